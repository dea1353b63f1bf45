"""Small files read in batches (``tbconvert/reading/small_files.py``, issue #14) make exactly the
chunks that reading each file on its own makes (``chunks.read_file``, itself checked against
TensorBoard in ``test_oracle``): rows in record order bit for bit, series, offsets, digests,
damage, statistics and the known metadata passed to later files of a run.

Random sets of files are written with tensorboard's own ``RecordWriter`` from hand-built
Events (simple values and TF2 tensors with and without metadata, other plugins' tensors,
several values in one Event, wall times of ``0.0``, ``-0.0`` and NaN, steps of every varint
width and negative, an empty tag and one too long for the block path's keys), then some are
torn, damaged, emptied or gzipped, and each is planned as new, grown, replaced or to be read
from its start, under random selections and chunk sizes, with the key cache full or empty.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.summary.writer.record_writer import RecordWriter

import tbconvert
from tbconvert.conversion.options import ConvertTuning
from tbconvert.filters import Selection
from tbconvert.reading import small_files
from tbconvert.reading.chunks import (
    Chunk,
    FileTask,
    KnownMetadataByOwner,
    ReadSettings,
    read_file,
)
from tbconvert.reading.fast.batch import BatchParts
from tbconvert.reading.fast.template import LearntKeys
from tbconvert.reading.records import RecordReader
from tbconvert.reading.small_files import read_files
from tbconvert.reading.tuning import BY_RECORD_BYTES, ReadTuning
from tests.support.eventfiles import (
    event_file_name,
    file_version_event,
    scalar_metadata,
    simple_value,
    summary_event,
    tensor_value,
    write_events,
)
from tests.support.snapshots import comparable_rows, file_states

pytestmark = pytest.mark.by_record_switch

# Mostly two tags, so that keys repeat within and across files.
TAGS = ("loss",) * 4 + ("acc",) * 3 + ("", "t" * 120)
WALLS = (1.7e9, 1.7e9 + 0.25, 0.0, -0.0, math.nan)
STEPS = (0, 1, 127, 128, 300, 2**40, 2**62, -3)
VALUES = (0.5, -1.25, math.nan, math.inf, -0.0, 1e-40)
CUSTOM = SummaryMetadata(
    display_name="custom",
    plugin_data=SummaryMetadata.PluginData(plugin_name="custom", content=b"c"),
)
# Scalars metadata that a series definition shows (a writer's display name and description).
DESCRIBED = SummaryMetadata(
    display_name="Loss",
    summary_description="training loss",
    plugin_data=SummaryMetadata.PluginData(plugin_name="scalars", content=b"v1"),
)

KINDS = (
    "simple",
    "simple+md",
    "simple+described",
    "tf2",
    "tf2-described",
    "tf2-bare",
    "tf2-shapeless",
    "double",
    "custom",
    "pair",
    "version",
)
EVENT = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(TAGS),
    st.sampled_from(STEPS),
    st.sampled_from(WALLS),
    st.sampled_from(VALUES),
)


def _value(kind: str, tag: str, value: float) -> list[Summary.Value]:
    if kind == "simple":
        return [simple_value(tag, value)]
    if kind == "simple+md":
        return [simple_value(tag, value, metadata=scalar_metadata())]
    if kind == "simple+described":
        return [simple_value(tag, value, metadata=DESCRIBED)]
    if kind == "tf2-described":
        return [tensor_value(tag, value, metadata=DESCRIBED)]
    if kind == "tf2":
        return [tensor_value(tag, value)]
    if kind == "tf2-bare":
        return [tensor_value(tag, value, with_metadata=False)]
    if kind == "tf2-shapeless":
        return [tensor_value(tag, value, shape=None)]
    if kind == "double":
        return [tensor_value(tag, value, dtype="float64")]
    if kind == "custom":
        return [tensor_value(tag, value, metadata=CUSTOM)]
    return [simple_value(tag, value), simple_value(tag + "/b", value)]


def _write(
    path: Path, events: list[tuple[str, str, int, float, float]], version: bool, nan_walls: bool
) -> None:
    built = [
        file_version_event(wall)
        if kind == "version"
        else summary_event(step, math.nan if nan_walls else wall, _value(kind, tag, value))
        for kind, tag, step, wall, value in events
    ]
    write_events(path, built, file_version=version, version_wall_time=1.7e9)


def _spoil(path: Path, how: str, where: float) -> None:
    data = path.read_bytes()
    if how == "torn" and data:
        path.write_bytes(data[: int(len(data) * where)])
    elif how == "damaged" and data:
        at = int((len(data) - 1) * where)
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1 :])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "gzip":
        path.write_bytes(gzip.compress(data))


def _boundaries(path: Path) -> list[int]:
    """Offsets where the file's valid records end."""
    with path.open("rb") as handle:
        reader = RecordReader(handle)
        return [reader.consumed for _ in reader]


def _first_digest(path: Path) -> str | None:
    with path.open("rb") as handle:
        payload = RecordReader(handle).record_at(0)
    return None if payload is None else hashlib.sha256(payload).hexdigest()


FILE = st.tuples(
    st.sampled_from(("run/a",) * 3 + ("run/b", ".")),
    st.lists(EVENT, max_size=30),
    st.booleans(),  # a file_version record first
    st.sampled_from((False,) * 5 + (True,)),  # every summary's wall time NaN
    st.sampled_from(("intact",) * 5 + ("torn", "damaged", "empty", "gzip")),
    st.floats(0.05, 0.95),
    st.sampled_from(("new",) * 3 + ("grown", "replaced", "from_start", "shrank")),
    st.floats(0, 1),
)


def _tasks(root: Path, files: list[Any]) -> list[FileTask]:
    tasks = []
    for index, (run, events, version, nan_walls, spoil, where, plan, cut) in enumerate(files):
        path = root / run / event_file_name(1.7e9 + index, suffix=f".{index}")
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, events, version, nan_walls)
        _spoil(path, spoil, where)
        size = path.stat().st_size
        offset, stored_size, digest = 0, None, None
        if plan != "new" and size:
            ends = [0, *_boundaries(path)]
            offset = ends[int(cut * (len(ends) - 1))]
            stored_size, digest = size, _first_digest(path)
            if plan == "replaced":
                digest = "0" * 64
            elif plan == "shrank":
                offset = stored_size = size + 16
        tasks.append(
            FileTask(
                index=index,
                path=str(path),
                rel_path=str(path.relative_to(root)),
                run_path=run,
                context="",
                size=size,
                mtime_ns=0,
                offset=offset,
                stored_size=stored_size,
                stored_digest=digest,
                known_metadata={},
                from_start=plan == "from_start",
            )
        )
    return tasks


def _rows(rows: Any) -> list[str]:
    # repr: NaN equals NaN and -0.0 differs from 0.0, as bits do.
    return [repr(row) for row in rows]


def _comparable(task: FileTask, chunk: Chunk) -> tuple[Any, ...]:
    return (
        task.index,
        {table: _rows(rows) for table, rows in chunk.rows.items()},
        chunk.blobs,
        chunk.new_series,
        chunk.consumed,
        chunk.records,
        chunk.damage,
        repr((chunk.first_wall_time, chunk.last_wall_time)),
        (chunk.done, chunk.torn, chunk.restart, chunk.replaces, chunk.digest, chunk.error),
        repr(chunk.stats),
    )


def _one_by_one(tasks: list[FileTask], read: ReadSettings) -> Iterator[tuple[FileTask, Chunk]]:
    known_metadata: KnownMetadataByOwner = {}
    for task in tasks:
        for chunk in read_file(task, read, known_metadata):
            yield task, chunk


SELECTIONS = (
    Selection(),
    Selection(tags=("loss*",)),
    Selection(exclude_tags=("acc",)),
    Selection(plugins=frozenset({"scalars"})),
)


@pytest.mark.slow  # 400 random sets of files, each read both ways
@settings(max_examples=400, deadline=None)
@given(
    files=st.lists(FILE, min_size=1, max_size=8),
    selection=st.sampled_from(SELECTIONS),
    chunk_points=st.sampled_from((4, 25, 100_000)),
    cache=st.sampled_from(("learnt", "empty", "learnt unfiltered")),
    first_batch=st.sampled_from((1, 3, 8)),
)
def test_batches_make_the_chunks_of_files_read_one_by_one(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[Any],
    selection: Selection,
    chunk_points: int,
    cache: str,
    first_batch: int,
) -> None:
    root = tmp_path_factory.mktemp("batches")
    tasks = _tasks(root, files)
    keys = LearntKeys()
    read = ReadSettings(
        selection,
        chunk_points,
        tuning=ReadTuning(first_batch_files=first_batch),
        learnt_keys=keys,
    )
    if cache == "learnt unfiltered":  # keys of tags the selection leaves out are known
        list(_one_by_one(tasks, ReadSettings(Selection(), chunk_points, learnt_keys=keys)))
    expected = [_comparable(*item) for item in _one_by_one(tasks, read)]  # learns keys
    if cache == "empty":
        keys.clear()
    got = [_comparable(*item) for item in read_files(tasks, read, {})]
    assert got == expected


def _sweep(logdir: Path, runs: int) -> None:
    """Runs of a few hundred single-scalar events, TF1 and TF2, some with a second file."""
    for run in range(runs):
        for part in range(1 + run % 2):
            events = [
                summary_event(
                    step,
                    1.7e9 + step,
                    [
                        simple_value("loss", 1 / (step + 1))
                        if run % 3
                        else tensor_value("loss", 1 / (step + 1), with_metadata=step == 0)
                    ],
                )
                for step in range(part * 150, part * 150 + 150)
            ]
            events += [summary_event(step, 1.7e9, [simple_value("lr", 0.1)]) for step in (0, 1)]
            write_events(
                logdir / f"run{run:03d}" / event_file_name(1.7e9 + part, suffix=f".{part}"),
                events,
            )


def test_a_sweep_read_in_batches_is_stored_as_read_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = tmp_path / "logdir"
    _sweep(logdir, 60)
    batched = str(tmp_path / "batched.db")
    tbconvert.convert(logdir, batched, progress=False)
    calls = 0
    check = small_files.FileBatch.check

    def counted(batch: small_files.FileBatch, loaded: list[Any]) -> None:
        nonlocal calls
        calls += 1
        check(batch, loaded)

    monkeypatch.setattr(small_files.FileBatch, "check", counted)
    one_by_one = str(tmp_path / "one_by_one.db")
    one_file_batches = ConvertTuning(read=ReadTuning(first_batch_files=0, batch_files=0))
    tbconvert.convert(logdir, one_by_one, progress=False, tuning=one_file_batches)
    assert calls == len(list(logdir.rglob("*tfevents*")))  # batches of one file
    assert comparable_rows(batched) == comparable_rows(one_by_one)
    assert file_states(batched) == file_states(one_by_one)


def test_files_are_batched_only_under_the_by_record_size(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    _sweep(logdir, 4)
    big = logdir / "big" / event_file_name(1.7e9)
    write_events(
        big, [summary_event(step, 1.7e9, [simple_value("x", step)]) for step in range(2000)]
    )
    assert os.path.getsize(big) >= BY_RECORD_BYTES
    read = ReadSettings(Selection(), 100_000)
    paths = sorted(logdir.rglob("*tfevents*"))
    tasks = [
        FileTask(i, str(p), p.name, str(p.parent), "", p.stat().st_size, 0, 0, None, None, {})
        for i, p in enumerate(paths)
    ]
    seen: list[list[str]] = []
    check = small_files.FileBatch.check

    def recorded(batch: small_files.FileBatch, loaded: list[Any]) -> None:
        seen.append([file.task.path for file in loaded])  # every file loads here
        check(batch, loaded)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(small_files.FileBatch, "check", recorded)
        list(read_files(tasks, read, {}))
    assert str(big) not in {path for paths in seen for path in paths}
    assert sorted(path for paths in seen for path in paths) == sorted(
        str(p) for p in paths if p != big
    )


def test_metadata_of_an_earlier_file_defines_the_series_of_a_later_one(tmp_path: Path) -> None:
    """TF1 writers send a tag's metadata once: a later file of the run (``reopen``) holds
    values without it, and its series takes the metadata the earlier file carried."""
    run = tmp_path / "run"
    first = write_events(
        run / event_file_name(1.7e9, suffix=".0"),
        [summary_event(0, 1.7e9, [simple_value("loss", 1.0, metadata=DESCRIBED)])],
    )
    later = write_events(
        run / event_file_name(1.7e9, suffix=".1"),
        [summary_event(step, 1.7e9 + step, [simple_value("loss", 0.5)]) for step in range(9)],
    )
    tasks = [
        FileTask(i, str(p), p.name, "run", "", p.stat().st_size, 0, 0, None, None, {})
        for i, p in enumerate((first, later))
    ]
    read = ReadSettings(Selection(), 100_000)
    expected = [_comparable(*item) for item in _one_by_one(tasks, read)]  # learns the keys
    (definition,) = expected[1][3]
    assert (definition.display_name, definition.description) == ("Loss", "training loss")
    assert [_comparable(*item) for item in read_files(tasks, read, {})] == expected


def test_files_of_one_length_are_walked_by_their_own_records(tmp_path: Path) -> None:
    """A batch guesses that a file lies like an earlier one of the same length (a sweep's
    files do): a file of that length whose records lie otherwise must still be found as it
    is, record by record, and not taken for damaged."""
    long_first = [simple_value("a" * 9, 1.0), simple_value("b", 2.0)]
    paths = [
        write_events(
            tmp_path / "run" / event_file_name(1.7e9, suffix=f".{index}"),
            [summary_event(0, 1.7e9, [value]) for value in values],
        )
        for index, values in enumerate((long_first, long_first[::-1], long_first))
    ]
    assert len({path.stat().st_size for path in paths}) == 1
    assert len({tuple(_boundaries(path)) for path in paths}) == 2
    tasks = [
        FileTask(i, str(p), p.name, "run", "", p.stat().st_size, 0, 0, None, None, {})
        for i, p in enumerate(paths)
    ]
    batch = small_files.FileBatch(ReadSettings(Selection(), 100_000))
    loaded = [batch.load(task, Path(task.path).read_bytes()) for task in tasks]
    batch.check(loaded)
    parts = batch.parts
    assert parts is not None
    for path, file in zip(paths, loaded, strict=True):
        assert file is not None and not file.damaged
        starts = parts.starts[file.first : file.stop] + file.shift
        assert starts.tolist() == [0, *_boundaries(path)[:-1]]


# Version headers as raw payloads: (how, payload, whether the batch settles the file without a
# decoder).  Field 1 is the wall time (fixed64), field 3 the version string.
_HEADER = b"\x09" + struct.pack("<d", 1.7e9)
VERSION_HEADERS = (
    ("plain", _HEADER + b"\x1a\x0dbrain.Event:2", True),
    ("empty version", _HEADER + b"\x1a\x00", True),
    ("127 bytes", _HEADER + b"\x1a\x7f" + b"v" * 127, True),
    ("128 bytes", _HEADER + b"\x1a\x80\x01" + b"v" * 128, False),
    ("not ASCII", _HEADER + b"\x1a\x02\xc3\xa9", False),
    ("not UTF-8", _HEADER + b"\x1a\x01\xff", False),
    ("infinite", b"\x09" + struct.pack("<d", math.inf) + b"\x1a\x01v", False),
    ("NaN", b"\x09" + struct.pack("<d", math.nan) + b"\x1a\x01v", False),
    ("with a step", _HEADER + b"\x10\x05\x1a\x01v", False),
    ("version first", b"\x1a\x01v" + _HEADER, False),
    ("twice", _HEADER + b"\x1a\x01v" + b"\x1a\x01w", False),
)


@pytest.mark.parametrize(
    ("how", "payload", "settles"), VERSION_HEADERS, ids=[how for how, *_ in VERSION_HEADERS]
)
def test_a_version_header_is_settled_as_its_decoder_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, payload: bytes, settles: bool
) -> None:
    """A file of a version header and records of cached keys needs no decoder
    (``BatchParts.settled``), but only when the header's bytes can mean nothing else: any
    other header goes through the decoder, and both make the chunk ``read_file`` makes."""
    paths = []
    for index in range(3):
        path = tmp_path / "run" / event_file_name(1.7e9, suffix=f".{index}")
        write_events(
            path,
            [summary_event(step, 1.7e9 + step, [simple_value("loss", 0.5)]) for step in range(5)],
            file_version=False,
        )
        body = path.read_bytes()
        with path.open("wb") as handle:
            RecordWriter(handle).write(payload)
            handle.write(body)
        paths.append(path)
    assert _settled_as_read_one_by_one(paths, monkeypatch) == [settles] * 3


def _settled_as_read_one_by_one(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Read the files (each its own run) one by one, which teaches the key cache their keys,
    then in a batch: the chunks must be the same; which files the batch settled."""
    tasks = [
        FileTask(i, str(p), p.name, f"run{i}", "", p.stat().st_size, 0, 0, None, None, {})
        for i, p in enumerate(paths)
    ]
    read = ReadSettings(Selection(), 100_000)  # a fresh table of learnt keys
    expected = [_comparable(*item) for item in _one_by_one(tasks, read)]  # learns the keys
    settled = []
    real = BatchParts.settled

    def recorded(self: BatchParts, *args: Any) -> Any:
        outcome = real(self, *args)
        settled.append(outcome is not None)
        return outcome

    monkeypatch.setattr(BatchParts, "settled", recorded)
    assert [_comparable(*item) for item in read_files(tasks, read, {})] == expected
    return settled


@pytest.mark.parametrize("how", ["a version header after a record", "a tag in two keys"])
def test_files_of_cached_keys_that_only_the_decoder_reads_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Files of nothing but cached keys and version headers, where the batch cannot tell
    the decoder's result: a version header behind another record (counted, not a point),
    and one tag written as a simple value and as a tensor (two keys, one series).  The
    files between them, with no such record, are settled."""
    paths = []
    for index in range(4):
        odd = index % 2 == 1
        # The even files teach the key cache the tensor's key of the tag.
        value = tensor_value if how == "a tag in two keys" and not odd else simple_value
        events = [summary_event(step, 1.7e9 + step, [value("loss", 0.5)]) for step in range(4)]
        if odd and how == "a version header after a record":
            events.insert(2, file_version_event(1.7e9 + 1.5))
        if odd and how == "a tag in two keys":
            events.insert(2, summary_event(9, 1.7e9 + 9, [tensor_value("loss", 0.25)]))
        path = tmp_path / f"run{index}" / event_file_name(1.7e9, suffix=f".{index}")
        write_events(path, events)
        paths.append(path)
    assert _settled_as_read_one_by_one(paths, monkeypatch) == [True, False, True, False]


def test_metadata_after_another_plugins_value_routes_the_tags_later_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tag written first as a tensor with no metadata (the tensors plugin), then as simple
    values with scalars metadata of a cached key, then as a tensor again: the batch defines
    the scalar series with the decoder's ``define_scalar``, which must forget the tensor's
    route as the decoder's own first metadata does, so that the last tensor is a scalar."""
    events = [
        summary_event(0, 1.7e9, [tensor_value("acc", 0.5, with_metadata=False)]),
        summary_event(1, 1.7e9, [simple_value("acc", 0.5, metadata=scalar_metadata())]),
        summary_event(2, 1.7e9, [simple_value("acc", 0.5, metadata=scalar_metadata())]),
        summary_event(3, 1.7e9, [tensor_value("acc", 0.5)]),
    ]
    paths = [tmp_path / f"run{index}" / event_file_name(1.7e9) for index in range(2)]
    for path in paths:
        write_events(path, events)
    assert _settled_as_read_one_by_one(paths, monkeypatch) == [False, False]
