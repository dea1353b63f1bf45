"""Small files are decoded record by record (``ReadTuning.by_record_bytes``, issue #14): the
block path's learning of every key costs more than it saves on a few hundred records.  The
rows are the same either way (``test_block_scalars`` checks the block path against the general
one); here, which path a file takes by the bytes left to read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tbconvert.filters import Selection
from tbconvert.reading.chunks import FileTask, ReadSettings, read_file
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast.blocks import Block
from tbconvert.reading.tuning import BY_RECORD_BYTES
from tests.support.eventfiles import simple_value, summary_event, write_events

# The suite reads small files by the block path (tests/conftest.py); these tests the switch.
pytestmark = pytest.mark.by_record_switch


def _task(path: Path, offset: int = 0, from_start: bool = False) -> FileTask:
    size = os.path.getsize(path)
    return FileTask(
        index=0,
        path=str(path),
        rel_path=path.name,
        run_path=".",
        context="",
        size=size,
        mtime_ns=0,
        offset=offset,
        stored_size=size if offset else None,
        stored_digest=None,
        known_metadata={},
        from_start=from_start,
    )


def _blocks_fed(task: FileTask, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(records fed as blocks to the block path, scalar points read)."""
    blocks = 0
    feed = EventDecoder.feed

    def counted(self: EventDecoder, batch: object) -> None:
        nonlocal blocks
        if isinstance(batch, Block) and not self._by_record:
            blocks += len(batch)
        feed(self, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(EventDecoder, "feed", counted)
    points = 0
    for chunk in read_file(task, ReadSettings(Selection(), 100_000), {}):
        points += len(chunk.rows.get("scalars", ()))
    return blocks, points


def _file(path: Path, steps: int) -> Path:
    # Steps of two varint bytes each: every record has the same size.
    return write_events(
        path,
        (
            summary_event(step, 1e9 + step, [simple_value("loss", step)])
            for step in range(1000, 1000 + steps)
        ),
    )


def test_small_file_is_read_record_by_record(tmp_path: Path, monkeypatch) -> None:
    path = _file(tmp_path / "events.out.tfevents.1.h", 200)
    assert os.path.getsize(path) < BY_RECORD_BYTES
    assert _blocks_fed(_task(path), monkeypatch) == (0, 200)


def test_large_file_takes_the_block_path(tmp_path: Path, monkeypatch) -> None:
    path = _file(tmp_path / "events.out.tfevents.1.h", 2000)
    assert os.path.getsize(path) >= BY_RECORD_BYTES
    blocks, points = _blocks_fed(_task(path), monkeypatch)
    assert points == 2000 and blocks > 1000


def test_a_few_new_bytes_of_a_large_file_are_read_record_by_record(
    tmp_path: Path, monkeypatch
) -> None:
    path = _file(tmp_path / "events.out.tfevents.1.h", 2000)
    size = os.path.getsize(path)
    offset = size - BY_RECORD_BYTES // 2
    # Start the read at a record boundary: after the whole records before ``offset``.
    whole = _file(tmp_path / "head", 0)
    boundary = os.path.getsize(whole)
    record = (size - boundary) // 2000
    offset = boundary + ((offset - boundary) // record) * record
    blocks, points = _blocks_fed(_task(path, offset), monkeypatch)
    assert blocks == 0 and points == (size - offset) // record


def test_a_large_file_read_again_from_its_start_takes_the_block_path(
    tmp_path: Path, monkeypatch
) -> None:
    # Its stored offset leaves a few bytes, but the read restarts at 0: every byte is read.
    path = _file(tmp_path / "events.out.tfevents.1.h", 2000)
    offset = os.path.getsize(path) - 100
    blocks, points = _blocks_fed(_task(path, offset, from_start=True), monkeypatch)
    assert points == 2000 and blocks > 1000


def test_exactly_the_switch_size_takes_the_block_path(tmp_path: Path, monkeypatch) -> None:
    # Fewer bytes than the switch are read record by record; as many, by blocks.  The file is
    # brought to the exact size by the tag length of one last record.
    path = tmp_path / "events.out.tfevents.1.h"
    steps = 1
    while os.path.getsize(_file(path, steps)) < BY_RECORD_BYTES - 120:
        steps += 1
    events = [
        summary_event(step, 1e9 + step, [simple_value("loss", step)])
        for step in range(1000, 1000 + steps)
    ]
    for width in range(1, 100):
        last = summary_event(2000, 1e9, [simple_value("x" * width, 0.0)])
        if os.path.getsize(write_events(path, [*events, last])) >= BY_RECORD_BYTES:
            break
    assert os.path.getsize(path) == BY_RECORD_BYTES
    blocks, points = _blocks_fed(_task(path, 0, from_start=True), monkeypatch)
    assert points == steps + 1 and blocks > 0


def test_collector_runs_rarely_while_converting(tmp_path: Path, monkeypatch) -> None:
    """The cyclic collector's thresholds are raised for the conversion and restored after."""
    import gc

    from tbconvert import convert
    from tbconvert.conversion.job import Job

    seen = []
    run = Job.run

    def watched(self: Job, *args: object, **kwargs: object) -> None:
        seen.append(gc.get_threshold())
        run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Job, "run", watched)
    _file(tmp_path / "logs" / "events.out.tfevents.1.h", 20)
    before = gc.get_threshold()
    summary = convert(tmp_path / "logs", str(tmp_path / "store.db"), progress=False)
    assert summary.exit_code == 0 and summary.points["scalars"] == 20
    assert gc.get_threshold() == before
    assert seen and seen[0][0] >= 100_000 and seen[0][0] > before[0]


def test_small_file_is_checked_record_by_record(tmp_path: Path, monkeypatch) -> None:
    """Its checksums too: NumPy's check of a whole buffer costs more than it saves here."""
    from tbconvert.reading.fast import blocks

    walked = []
    walk = blocks.walk
    monkeypatch.setattr(blocks, "walk", lambda *args: walked.append(1) or walk(*args))
    small = _file(tmp_path / "events.out.tfevents.1.h", 200)
    large = _file(tmp_path / "events.out.tfevents.2.h", 2000)
    assert _blocks_fed(_task(small), monkeypatch) == (0, 200) and not walked
    assert _blocks_fed(_task(large), monkeypatch)[1] == 2000 and walked
