"""What a conversion reports and records, counted from the logs written here (mutants of
``conversion/job.py``, ``conversion/plan.py`` and ``store/writer.py`` that the store's views
alone let through; docs/mutation.md)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert import convert
from tbconvert.conversion import commits as groups_module
from tbconvert.conversion import job as job_module
from tbconvert.conversion import plan as plan_module
from tbconvert.reading import chunks as chunks_module
from tbconvert.rows import SeriesDefinition
from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tbconvert.store.file_states import FileState
from tbconvert.writing.writer import StoreWriter
from tests.support.eventfiles import append_events, simple_value, summary_event, write_events

FILE = "events.out.tfevents.1.h"


def _events(tag: str, steps: range, base: float = 1e9) -> list:
    return [summary_event(step, base + step, [simple_value(tag, step / 2)]) for step in steps]


def _query(store: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(store)) as connection:
        return [tuple(row) for row in connection.execute(sql)]


@pytest.mark.mutant_gap
def test_counts_of_a_first_run_then_an_incremental_one(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    train = write_events(logs / "a" / "train" / FILE, _events("loss", range(10)))
    evaluation = write_events(logs / "a" / "eval" / FILE, _events("loss", range(5)))
    b_first = write_events(logs / "b" / FILE, _events("acc", range(3)))
    sizes = [path.stat().st_size for path in (train, evaluation, b_first)]

    first = convert(logs, store)
    assert (first.runs_created, first.runs_extended) == (2, 0)
    assert (first.series_created, first.series_extended) == (3, 0)
    assert first.contexts == 3  # train, eval and b's own directory
    assert (first.files_read, first.files_unchanged) == (3, 0)
    assert first.records_read == (10 + 1) + (5 + 1) + (3 + 1)  # each file's version record too
    assert first.bytes_read == sum(sizes)
    assert first.points == {"scalars": 18}

    append_events(train, _events("loss", range(10, 14)))
    b_second = write_events(logs / "b" / "events.out.tfevents.2.h", _events("lr", range(6)))
    second = convert(logs, store)
    # a gets 4 points of an existing series; b a new series in a new file.
    assert (second.runs_created, second.runs_extended) == (0, 2)
    assert (second.series_created, second.series_extended) == (1, 1)
    assert second.contexts == 3
    assert (second.files_read, second.files_unchanged) == (2, 2)
    assert second.records_read == 4 + (6 + 1)
    assert second.bytes_read == train.stat().st_size - sizes[0] + b_second.stat().st_size
    assert second.points == {"scalars": 10}
    assert (second.files_replaced, second.files_moved, second.files_gone) == (0, 0, 0)

    third = convert(logs, store)
    assert (third.runs_extended, third.series_extended, third.files_read) == (0, 0, 0)
    assert third.files_unchanged == 4 and third.bytes_read == 0


@pytest.mark.mutant_gap
def test_moved_replaced_and_gone_files_are_counted(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(logs / "group" / "run" / "train" / FILE, _events("loss", range(4)))
    write_events(logs / "group" / "run" / "eval" / FILE, _events("loss", range(3)))
    write_events(logs / "other" / FILE, _events("acc", range(5)))
    convert(logs, store)

    # --flat: train and eval become runs of their own, group/run their group.
    flat = convert(logs, store, flat=True)
    assert flat.files_moved == 2 and flat.files_replaced == 0
    assert flat.runs_created == 2 and flat.files_read == 2 and flat.files_unchanged == 1
    runs = _query(store, "SELECT run_path, group_path, name FROM runs ORDER BY run_path")
    assert runs == [
        ("group/run/eval", "group/run", "eval"),
        ("group/run/train", "group/run", "train"),
        ("other", "", "other"),
    ]

    # A file replaced by one with another first record (same name, fewer bytes).
    write_events(logs / "other" / FILE, _events("acc", range(2), base=2e9))
    (logs / "group" / "run" / "eval" / FILE).unlink()
    again = convert(logs, store, flat=True)
    assert again.files_replaced == 1 and again.files_gone == 1 and again.files_moved == 0
    assert _query(store, "SELECT count(*) FROM v_scalars WHERE run_path = 'other'") == [(2,)]
    statuses = _query(store, "SELECT path, status FROM event_files ORDER BY path")
    assert statuses == [
        (f"group/run/eval/{FILE}", "gone"),
        (f"group/run/train/{FILE}", "ok"),
        (f"other/{FILE}", "ok"),
    ]


@pytest.mark.mutant_gap
def test_a_run_at_the_logdir_root_is_named_after_the_logdir(tmp_path: Path) -> None:
    logs, store = tmp_path / "my_experiment", tmp_path / "s.db"
    write_events(logs / FILE, _events("loss", range(2)))
    convert(logs, store)
    assert _query(store, "SELECT run_path, group_path, name FROM runs") == [
        (".", "", "my_experiment")
    ]


@pytest.mark.mutant_gap
def test_each_conversion_records_its_options_and_summary(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(logs / "run" / FILE, _events("loss", range(3)))
    convert(logs, store, plugins=["scalars", "images"], tags=["lo*"], exclude_tags=["x"])
    convert(logs, store, full=True, flat=True)
    rows = _query(
        store, "SELECT logdir, status, options, summary, finished_at >= started_at FROM conversions"
    )
    assert [(row[0], row[1], row[4]) for row in rows] == [(str(logs.resolve()), "finished", 1)] * 2
    options = [json.loads(row[2]) for row in rows]
    assert options == [
        {
            "source": str(logs.resolve()),
            "flat": False,
            "full": False,
            "plugins": ["images", "scalars"],
            "tags": ["lo*"],
            "exclude_tags": ["x"],
        },
        {
            "source": str(logs.resolve()),
            "flat": True,
            "full": True,
            "plugins": None,
            "tags": [],
            "exclude_tags": [],
        },
    ]
    summaries = [json.loads(row[3]) for row in rows]
    assert [summary["files"]["read"] for summary in summaries] == [1, 1]
    assert [summary["points"] for summary in summaries] == [{"scalars": 3}, {"scalars": 3}]
    assert [summary["records_read"] for summary in summaries] == [4, 4]


@pytest.mark.mutant_gap
def test_dry_run_plans_each_action_with_the_bytes_it_reads(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    grown = write_events(logs / "a" / FILE, _events("loss", range(6)))
    replaced = write_events(logs / "b" / FILE, _events("loss", range(6)))
    shrunk = write_events(logs / "c" / FILE, _events("loss", range(6)))
    write_events(logs / "d" / FILE, _events("loss", range(6)))
    convert(logs, store)
    stored = grown.stat().st_size
    append_events(grown, _events("loss", range(6, 9)))
    # Another first record, and more bytes than were read: only the digest tells.
    write_events(replaced, _events("acc", range(9), base=3e9))
    write_events(shrunk, _events("loss", range(2)))
    fresh = write_events(logs / "e" / FILE, _events("loss", range(1)))
    plan = {
        entry["path"]: (entry["action"], entry["bytes"])
        for entry in convert(logs, store, dry_run=True).plan
    }
    assert plan == {
        f"a/{FILE}": ("append", grown.stat().st_size - stored),
        f"b/{FILE}": ("replaced", replaced.stat().st_size),
        f"c/{FILE}": ("replaced", shrunk.stat().st_size),
        f"d/{FILE}": ("unchanged", 0),
        f"e/{FILE}": ("new", fresh.stat().st_size),
    }
    full = {
        entry["path"]: entry["action"]
        for entry in convert(logs, store, dry_run=True, full=True).plan
    }
    assert set(full.values()) == {"reread", "new"}


@pytest.mark.mutant_gap
def test_ids_made_in_a_rolled_back_transaction_are_not_reused(tmp_path: Path) -> None:
    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    writer = StoreWriter(engine)
    try:
        series = SeriesDefinition(0, "loss", "scalars", "float32", None, None, None)
        with pytest.raises(RuntimeError), writer.transaction():
            run = writer.run_id("src", "r", host="h", logdir="/l", group_path="", name="r")
            writer.series_ids(run, writer.context_id("train"), [series])[0]
            writer.insert_blobs({"ab" * 32: b"bytes"})
            raise RuntimeError("the chunk fails: everything above rolls back")
        with writer.transaction():
            run = writer.run_id("src", "r", host="h", logdir="/l", group_path="", name="r")
            context = writer.context_id("train")
            series_id = writer.series_ids(run, context, [series])[0]
            writer.insert_blobs({"ab" * 32: b"bytes"})
        again = writer.series_ids(run, context, [series])[0]
    finally:
        writer.close()
        engine.dispose()
    assert again == series_id
    assert _query(tmp_path / "s.db", "SELECT id, name FROM runs") == [(run, "r")]
    assert _query(tmp_path / "s.db", "SELECT id, name FROM contexts") == [(context, "train")]
    assert _query(tmp_path / "s.db", "SELECT id, run_id, context_id FROM series") == [
        (series_id, run, context)
    ]
    assert _query(tmp_path / "s.db", "SELECT sha256, size, data FROM blobs") == [
        ("ab" * 32, 5, b"bytes")
    ]


@pytest.mark.mutant_gap
def test_rows_dropped_as_empty_are_made_again_not_reused_from_the_cache(tmp_path: Path) -> None:
    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    writer = StoreWriter(engine)
    loss = SeriesDefinition(0, "loss", "scalars", "float32", None, None, None)
    acc = SeriesDefinition(1, "acc", "scalars", "float32", None, None, None)
    names = {"host": "h", "logdir": "/l", "group_path": ""}
    try:
        with writer.transaction():
            # Run "kept" keeps a file, so only its series goes; run "gone" goes whole.
            kept = writer.run_id("src", "kept", name="kept", **names)
            gone = writer.run_id("src", "gone", name="gone", **names)
            context = writer.context_id("train")
            writer.save_file(FileState(None, kept, context, "kept/f"))
            old_series = [writer.series_ids(run, context, [loss])[0] for run in (kept, gone)]
            other = writer.series_ids(kept, writer.context_id("eval"), [acc])[0]
            writer.drop_empty(kept, context)
            writer.drop_empty(gone, context)
            again = writer.run_id("src", "gone", name="gone", **names)
            new_series = [writer.series_ids(run, context, [loss])[0] for run in (kept, again)]
            assert writer.series_ids(kept, writer.context_id("eval"), [acc])[0] == other
    finally:
        writer.close()
        engine.dispose()
    runs = _query(tmp_path / "s.db", "SELECT id, run_path FROM runs ORDER BY run_path")
    assert runs == [(again, "gone"), (kept, "kept")]
    series = _query(tmp_path / "s.db", "SELECT id, run_id, name FROM series ORDER BY id")
    assert series == sorted(
        [(other, kept, "acc")]
        + [(new, run, "loss") for new, run in zip(new_series, (kept, again), strict=True)]
    )
    # (SQLite may hand a deleted row's id out again: the rows, not the ids, tell.)
    assert len(old_series) == 2 and gone


@pytest.mark.mutant_gap
def test_image_and_audio_rows_keep_every_column_around_their_blob(tmp_path: Path) -> None:
    # The writer swaps each row's blob digest for the blob's id: the columns on either
    # side of it must come through unchanged.
    picture = io.BytesIO()
    Image.new("RGB", (3, 2), (200, 10, 10)).save(picture, format="PNG")
    image = Summary.Image(encoded_image_string=picture.getvalue(), width=3, height=2)
    sound = Summary.Audio(
        sample_rate=8000.0,
        num_channels=1,
        length_frames=4,
        encoded_audio_string=b"RIFF-not-checked",
        content_type="audio/wav",
    )
    values = [Summary.Value(tag="picture", image=image), Summary.Value(tag="sound", audio=sound)]
    write_events(tmp_path / "logs" / "run" / FILE, [summary_event(4, 8.0, values)])
    convert(tmp_path / "logs", tmp_path / "s.db")
    assert _query(
        tmp_path / "s.db", "SELECT tag, step, idx, format, width, height, data FROM v_images"
    ) == [("picture", 4, 0, "PNG", 3, 2, picture.getvalue())]  # Pillow's name
    assert _query(tmp_path / "s.db", "SELECT tag, step, idx, sample_rate, data FROM v_audio") == [
        ("sound", 4, 0, 8000.0, b"RIFF-not-checked")
    ]
    assert _query(
        tmp_path / "s.db", "SELECT num_channels, length_frames, content_type FROM audio"
    ) == [(1, 4, "audio/wav")]


@pytest.mark.mutant_gap
def test_filtered_values_and_unreadable_records_add_up_over_files(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run, count in (("a", 4), ("b", 6)):
        write_events(
            logs / run / FILE,
            [
                summary_event(s, 1e9 + s, [simple_value("loss", 1.0), simple_value("acc", 0.5)])
                for s in range(count)
            ],
        )
    # Records whose CRCs verify but whose payload is no Event, even read leniently: one in
    # a, two in b.
    for run, bad in (("a", 1), ("b", 2)):
        with (logs / run / FILE).open("ab") as handle:
            for _ in range(bad):
                RecordWriter(handle).write(b"\x0a\xff\xff\xff\xff\x0f")
    before = time.time()
    summary = convert(logs, store, tags=["loss"])
    after = time.time()
    assert summary.filtered_values == 4 + 6
    assert summary.points == {"scalars": 10}
    assert summary.damaged_records == 1 + 2
    ends = {run: (logs / run / FILE).stat().st_size for run in ("a", "b")}
    bad_record = 12 + 6 + 4
    assert [str(problem) for problem in summary.problems] == [
        f"a/{FILE}: at byte {ends['a'] - bad_record}: record is not an Event",
        f"b/{FILE}: at byte {ends['b'] - 2 * bad_record}: record is not an Event",
        f"b/{FILE}: at byte {ends['b'] - bad_record}: record is not an Event",
    ]
    (low, high), *_ = _query(store, "SELECT min(updated_at), max(updated_at) FROM event_files")
    assert before <= low <= high <= after


@pytest.mark.mutant_gap
def test_a_store_another_process_is_writing_to_is_waited_for_and_said_so(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(logs / "run" / FILE, _events("loss", range(3)))
    convert(logs, store)
    write_events(logs / "other" / FILE, _events("loss", range(2)))
    holder = sqlite3.connect(store)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the store's write lock
    said = []

    def notify(message: str) -> None:
        said.append(message)
        holder.rollback()  # ... and finishes

    try:
        summary = convert(logs, store, notify=notify)
    finally:
        holder.close()
    assert said == ["another process is writing to the store; waiting for it to finish ..."]
    assert summary.files_read == 1 and summary.points == {"scalars": 2}


@pytest.mark.mutant_gap
def test_small_files_commit_together_once_their_points_fill_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten files of 3 points, 10 points a chunk: a group takes files until it holds 10 points
    # or more, so they commit as 4 + 4 + 2 files.  Counted from outside the job, as
    # tests/support/crashpoints.py does: the points in the store after each commit.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(10):
        write_events(logs / f"run_{run}" / FILE, _events("loss", range(3)))
    after_commits = _points_after_each_commit(store, monkeypatch)
    summary = convert(logs, store, chunk_points=10)
    assert summary.points == {"scalars": 30}
    assert sorted(set(after_commits)) == [0, 12, 24, 30]


def _points_after_each_commit(store: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The scalars in the store after each of the writer's transactions (filled as they end),
    counted from outside the job."""
    original = StoreWriter.transaction
    after_commits: list[int] = []

    @contextmanager
    def counted(writer: StoreWriter) -> Iterator[None]:
        with original(writer):
            yield
        after_commits.append(_query(store, "SELECT count(*) FROM scalars")[0][0])

    monkeypatch.setattr(StoreWriter, "transaction", counted)
    return after_commits


@pytest.mark.mutant_gap
def test_a_file_that_cannot_be_statted_is_a_problem_and_the_files_after_it_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    bad = write_events(logs / "a" / FILE, _events("loss", range(4)))
    write_events(logs / "b" / FILE, _events("acc", range(3)))
    real_stat = os.stat

    def guarded(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path) == str(bad):  # root ignores chmod: refuse the way the OS would
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(plan_module.os, "stat", guarded)
    summary = convert(logs, store)
    assert [(p.path, p.message) for p in summary.problems] == [
        ("a/" + FILE, "cannot read: Permission denied")
    ]
    assert summary.points == {"scalars": 3} and summary.files_read == 1


@pytest.mark.mutant_gap
def test_a_file_another_converter_read_further_since_the_plan_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    grown = write_events(logs / "a" / FILE, _events("loss", range(5)))
    write_events(logs / "b" / FILE, _events("acc", range(3)))
    convert(logs, store)
    append_events(grown, _events("loss", range(5, 10)))
    planned = job_module.plan_files
    other: list[Any] = []

    def plan_then_another_converter_reads(*args: Any, **kwargs: Any) -> list[Any]:
        plans = list(planned(*args, **kwargs))
        if not other:  # once: the other converter plans too
            other.append(None)
            other.append(convert(logs, store))  # reads a's 5 new points first
        return plans

    monkeypatch.setattr(job_module, "plan_files", plan_then_another_converter_reads)
    late = convert(logs, store)
    assert other[1].points == {"scalars": 5} and other[1].files_read == 1
    # a was planned from offset X, but the store says X + 5 records: it is left alone and
    # counted unchanged, as b (unchanged at plan time) is.
    assert (late.files_read, late.files_unchanged) == (0, 2)
    assert not late.points and late.records_read == 0
    assert _query(store, "SELECT count(*) FROM scalars") == [(13,)]


@pytest.mark.mutant_gap
def test_a_full_reread_counts_damaged_records_afresh(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    path = write_events(logs / "run" / FILE, _events("loss", range(10)))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55  # one record's CRC fails
    path.write_bytes(bytes(data))
    first = convert(logs, store)
    again = convert(logs, store, full=True)
    assert first.damaged_records == again.damaged_records == 1
    assert _query(store, "SELECT status, damaged_records FROM event_files") == [("damaged", 1)]


@pytest.mark.mutant_gap
def test_a_files_wall_time_span_is_kept_over_appends(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    path = write_events(
        logs / "run" / FILE, _events("loss", range(5), base=2e9), version_wall_time=3e9
    )
    convert(logs, store)
    span = "SELECT first_wall_time, last_wall_time FROM event_files"
    assert _query(store, span) == [(2e9, 3e9)]
    append_events(path, _events("loss", range(5, 8), base=1e9))
    convert(logs, store)
    assert _query(store, span) == [(1e9 + 5, 3e9)]


@pytest.mark.mutant_gap
def test_lossy_records_add_up_over_files(tmp_path: Path) -> None:
    # A tag that is not UTF-8 (0xff in place of "Q") makes its record lossy: one per file.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in ("a", "b", "c"):
        payload = summary_event(1, 1e9, [simple_value("lossQ", 0.5)]).SerializeToString()
        path = logs / run / FILE
        path.parent.mkdir(parents=True)
        with path.open("wb") as handle:
            RecordWriter(handle).write(payload.replace(b"Q", b"\xff"))
    summary = convert(logs, store)
    assert summary.lossy_records == 3 and summary.points == {"scalars": 3}


@pytest.mark.mutant_gap
def test_a_group_also_closes_at_its_number_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever their points, a group takes at most _GROUP_FILES files (1000; 3 here).
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(7):
        write_events(logs / f"run_{run}" / FILE, _events("loss", range(2)))
    monkeypatch.setattr(groups_module, "_GROUP_FILES", 3)
    after_commits = _points_after_each_commit(store, monkeypatch)
    convert(logs, store, chunk_points=1000)
    assert sorted(set(after_commits)) == [0, 6, 12, 14]


@pytest.mark.mutant_gap
@pytest.mark.by_record_switch
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
def test_a_group_also_closes_at_its_bytes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    # Whatever their points, a group closes once its files read _GROUP_READ_BYTES (2 MB;
    # two of these files here), whether small files are read in batches or one by one.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(7):
        write_events(logs / f"run_{run}" / FILE, _events("loss", range(2)))
    size = (logs / "run_0" / FILE).stat().st_size
    monkeypatch.setattr(groups_module, "_GROUP_READ_BYTES", 2 * size)
    if not batched:
        monkeypatch.setattr(chunks_module, "_BY_RECORD_BYTES", 0)
    after_commits = _points_after_each_commit(store, monkeypatch)
    convert(logs, store, chunk_points=1000)
    assert sorted(set(after_commits)) == [0, 4, 8, 12, 14]


@pytest.mark.mutant_gap
def test_a_file_with_no_valid_record_is_invalid_and_one_damaged_at_its_start_is_not(
    tmp_path: Path,
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    (logs / "a").mkdir(parents=True)
    (logs / "a" / FILE).write_bytes(b"not an event file\n" * 20)
    good = write_events(tmp_path / "good" / FILE, _events("loss", range(5)))
    (logs / "b").mkdir()
    (logs / "b" / FILE).write_bytes(b"\xff" * 40 + good.read_bytes())  # damage at offset 0
    summary = convert(logs, store)
    assert _query(store, "SELECT path, status FROM event_files ORDER BY path") == [
        ("a/" + FILE, "invalid"),
        ("b/" + FILE, "damaged"),
    ]
    assert [(p.path, p.message) for p in summary.problems if "not an event" in p.message] == [
        ("a/" + FILE, "not an event file (no valid record)")
    ]
    assert summary.points == {"scalars": 5}


@pytest.mark.mutant_gap
def test_a_file_marked_gone_records_when(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    gone = write_events(logs / "a" / FILE, _events("loss", range(3)))
    write_events(logs / "b" / FILE, _events("loss", range(3)))
    convert(logs, store)
    gone.unlink()
    before = time.time()
    assert convert(logs, store).files_gone == 1
    [(status, updated_at)] = _query(
        store, f"SELECT status, updated_at FROM event_files WHERE path = 'a/{FILE}'"
    )
    assert status == "gone" and before <= updated_at <= time.time()


@pytest.mark.mutant_gap
@pytest.mark.parametrize("chunk_points", [10, 100_000])
def test_bytes_read_are_the_bytes_of_this_read_however_many_chunks_it_takes(
    tmp_path: Path, chunk_points: int
) -> None:
    """A file read again from its start counts all its bytes, a grown one its new bytes; only
    the read's first chunk says it restarted (found by the seed-17 sample, docs/mutation.md)."""
    logdir = tmp_path / "logs"
    path = logdir / "run" / "events.out.tfevents.1.host"
    store = str(tmp_path / "store.db")

    def events(count: int, scale: float) -> list[Any]:
        return [summary_event(s, 1e9 + s, [simple_value("loss", scale * s)]) for s in range(count)]

    def read(**options: Any) -> int:
        summary = convert(logdir, store, chunk_points=chunk_points, progress=False, **options)
        return summary.bytes_read

    write_events(path, events(40, 1.0))
    assert read() == os.path.getsize(path)
    assert read(full=True) == os.path.getsize(path)
    before = os.path.getsize(path)
    append_events(
        path, [summary_event(s, 1e9 + s, [simple_value("loss", s)]) for s in range(40, 75)]
    )
    assert read() == os.path.getsize(path) - before
    path.unlink()
    write_events(path, events(45, 2.0))  # replaced: its first record changed
    assert read() == os.path.getsize(path)
