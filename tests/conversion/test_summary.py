"""What a conversion reports and records, counted from the logs written here: the Summary's
counts (runs, series, files, records, bytes, problems) over first, incremental and full
runs, the conversions row that keeps its options and summary, and each event file's status
and wall-time span in ``event_files``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert import convert
from tbconvert.conversion import plan as plan_module
from tests.support.eventfiles import (
    append_events,
    scalar_events,
    simple_value,
    summary_event,
    write_events,
)
from tests.support.snapshots import sqlite_rows

FILE = "events.out.tfevents.1.h"


# ---------------------------------------------------------------------------------- counts


@pytest.mark.mutant_gap
def test_counts_of_a_first_run_then_an_incremental_one(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    train = write_events(logs / "a" / "train" / FILE, scalar_events("loss", range(10)))
    evaluation = write_events(logs / "a" / "eval" / FILE, scalar_events("loss", range(5)))
    b_first = write_events(logs / "b" / FILE, scalar_events("acc", range(3)))
    sizes = [path.stat().st_size for path in (train, evaluation, b_first)]

    first = convert(logs, store)
    assert (first.runs_created, first.runs_extended) == (2, 0)
    assert (first.series_created, first.series_extended) == (3, 0)
    assert first.contexts == 3  # train, eval and b's own directory
    assert (first.files_read, first.files_unchanged) == (3, 0)
    assert first.records_read == (10 + 1) + (5 + 1) + (3 + 1)  # each file's version record too
    assert first.bytes_read == sum(sizes)
    assert first.points == {"scalars": 18}

    append_events(train, scalar_events("loss", range(10, 14)))
    b_second = write_events(logs / "b" / "events.out.tfevents.2.h", scalar_events("lr", range(6)))
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
    write_events(logs / "group" / "run" / "train" / FILE, scalar_events("loss", range(4)))
    write_events(logs / "group" / "run" / "eval" / FILE, scalar_events("loss", range(3)))
    write_events(logs / "other" / FILE, scalar_events("acc", range(5)))
    convert(logs, store)

    # --flat: train and eval become runs of their own, group/run their group.
    flat = convert(logs, store, flat=True)
    assert flat.files_moved == 2 and flat.files_replaced == 0
    # They move with their points: none is read again (each counts as unchanged too).
    assert flat.runs_created == 2 and flat.files_read == 0 and flat.files_unchanged == 3
    assert flat.bytes_read == 0
    runs = sqlite_rows(store, "SELECT run_path, group_path, name FROM runs ORDER BY run_path")
    assert runs == [
        ("group/run/eval", "group/run", "eval"),
        ("group/run/train", "group/run", "train"),
        ("other", "", "other"),
    ]

    # A file replaced by one with another first record (same name, fewer bytes).
    write_events(logs / "other" / FILE, scalar_events("acc", range(2), base=2e9))
    (logs / "group" / "run" / "eval" / FILE).unlink()
    again = convert(logs, store, flat=True)
    assert again.files_replaced == 1 and again.files_gone == 1 and again.files_moved == 0
    assert sqlite_rows(store, "SELECT count(*) FROM v_scalars WHERE run_path = 'other'") == [(2,)]
    statuses = sqlite_rows(store, "SELECT path, status FROM event_files ORDER BY path")
    assert statuses == [
        (f"group/run/eval/{FILE}", "gone"),
        (f"group/run/train/{FILE}", "ok"),
        (f"other/{FILE}", "ok"),
    ]


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
    (low, high), *_ = sqlite_rows(store, "SELECT min(updated_at), max(updated_at) FROM event_files")
    assert before <= low <= high <= after


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
def test_a_full_reread_counts_damaged_records_afresh(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    path = write_events(logs / "run" / FILE, scalar_events("loss", range(10)))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55  # one record's CRC fails
    path.write_bytes(bytes(data))
    first = convert(logs, store)
    again = convert(logs, store, full=True)
    assert first.damaged_records == again.damaged_records == 1
    assert sqlite_rows(store, "SELECT status, damaged_records FROM event_files") == [("damaged", 1)]


@pytest.mark.mutant_gap
def test_a_file_that_cannot_be_statted_is_a_problem_and_the_files_after_it_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    bad = write_events(logs / "a" / FILE, scalar_events("loss", range(4)))
    write_events(logs / "b" / FILE, scalar_events("acc", range(3)))
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


# ------------------------------------------------------------------------------ what is kept


@pytest.mark.mutant_gap
def test_each_conversion_records_its_options_and_summary(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(logs / "run" / FILE, scalar_events("loss", range(3)))
    convert(logs, store, plugins=["scalars", "images"], tags=["lo*"], exclude_tags=["x"])
    convert(logs, store, full=True, flat=True)
    rows = sqlite_rows(
        store, "SELECT logdir, status, options, summary, finished_at >= started_at FROM conversions"
    )
    assert [(row[0], row[1], row[4]) for row in rows] == [(str(logs.resolve()), "finished", 1)] * 2
    options = [json.loads(row[2]) for row in rows]
    assert options == [
        {
            "source": str(logs.resolve()),
            "layout": "auto",
            "flat": False,
            "full": False,
            "plugins": ["images", "scalars"],
            "tags": ["lo*"],
            "exclude_tags": ["x"],
        },
        {
            "source": str(logs.resolve()),
            "layout": "auto",
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
def test_a_file_with_no_valid_record_is_invalid_and_one_damaged_at_its_start_is_not(
    tmp_path: Path,
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    (logs / "a").mkdir(parents=True)
    (logs / "a" / FILE).write_bytes(b"not an event file\n" * 20)
    good = write_events(tmp_path / "good" / FILE, scalar_events("loss", range(5)))
    (logs / "b").mkdir()
    (logs / "b" / FILE).write_bytes(b"\xff" * 40 + good.read_bytes())  # damage at offset 0
    summary = convert(logs, store)
    assert sqlite_rows(store, "SELECT path, status FROM event_files ORDER BY path") == [
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
    gone = write_events(logs / "a" / FILE, scalar_events("loss", range(3)))
    write_events(logs / "b" / FILE, scalar_events("loss", range(3)))
    convert(logs, store)
    gone.unlink()
    before = time.time()
    assert convert(logs, store).files_gone == 1
    [(status, updated_at)] = sqlite_rows(
        store, f"SELECT status, updated_at FROM event_files WHERE path = 'a/{FILE}'"
    )
    assert status == "gone" and before <= updated_at <= time.time()


@pytest.mark.mutant_gap
def test_a_files_wall_time_span_is_kept_over_appends(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    path = write_events(
        logs / "run" / FILE, scalar_events("loss", range(5), base=2e9), version_wall_time=3e9
    )
    convert(logs, store)
    span = "SELECT first_wall_time, last_wall_time FROM event_files"
    assert sqlite_rows(store, span) == [(2e9, 3e9)]
    append_events(path, scalar_events("loss", range(5, 8), base=1e9))
    convert(logs, store)
    assert sqlite_rows(store, span) == [(1e9 + 5, 3e9)]
