"""Re-runs read only new bytes, and every sequence of changes ends where a clean run would."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.eventfiles import append_events, simple_value, summary_event, write_events
from tests.support.snapshots import (
    StoreFactory,
    file_states,
    point_count,
    view_rows,
    without_run_ids,
)

Clean = Callable[[Path], dict]  # logdir -> the views of a clean conversion of it


def events(tag: str, steps: range, base: float = 1000.0, scale: float = 1.0) -> list:
    return [summary_event(step, base + step, [simple_value(tag, scale * step)]) for step in steps]


@pytest.fixture
def clean(make_store: StoreFactory, tmp_path: Path) -> Clean:
    """The views of a logdir converted in one run, into a fresh store at each call."""
    names = (f"clean{i}" for i in itertools.count())

    def views(logdir: Path) -> dict:
        store = make_store(tmp_path, next(names))
        convert(logdir, store)
        return view_rows(store)

    return views


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_events(root / "run_a" / "events.out.tfevents.1.host", events("loss", range(50)))
    write_events(root / "run_b" / "events.out.tfevents.1.host", events("acc", range(30)))
    return root


def test_no_change_rerun_reports_every_file_unchanged(logdir: Path, store: str) -> None:
    first = convert(logdir, store)
    assert first.points["scalars"] == 80
    before = view_rows(store)
    second = convert(logdir, store)
    assert second.files_unchanged == 2 and second.files_read == 0
    assert second.total_points == 0 and second.bytes_read == 0
    assert view_rows(store) == before


def test_unchanged_files_are_not_opened(logdir: Path, store: str, monkeypatch) -> None:
    convert(logdir, store)
    import tbconvert.conversion.plan as planner
    import tbconvert.reading.chunks as reader

    def refuse(path: str):
        raise AssertionError(f"opened {path}")

    monkeypatch.setattr(reader, "open_event_file", refuse)
    monkeypatch.setattr(planner, "open_event_file", refuse)
    assert convert(logdir, store).files_unchanged == 2


def test_append_reads_only_the_new_bytes(logdir: Path, store: str, clean: Clean) -> None:
    convert(logdir, store)
    path = logdir / "run_a" / "events.out.tfevents.1.host"
    size = path.stat().st_size
    append_events(path, events("loss", range(50, 60)))
    second = convert(logdir, store)
    assert second.points["scalars"] == 10
    assert second.bytes_read == path.stat().st_size - size
    assert second.files_unchanged == 1
    assert view_rows(store) == clean(logdir)


def test_torn_tail_waits_for_the_rest(logdir: Path, store: str, clean: Clean) -> None:
    path = logdir / "run_a" / "events.out.tfevents.1.host"
    whole = path.read_bytes()
    append_events(path, events("loss", range(50, 53)))
    appended = path.read_bytes()[len(whole) :]
    path.write_bytes(whole + appended[:-7])  # the last record cut short, as mid-flush
    first = convert(logdir, store)
    assert first.exit_code == 0 and first.files_partial == 1
    assert first.points["scalars"] == 80 + 2
    path.write_bytes(whole + appended)
    second = convert(logdir, store)
    assert second.points["scalars"] == 1
    assert view_rows(store) == clean(logdir)
    assert file_states(store)["run_a/events.out.tfevents.1.host"][0] == "ok"


def test_shrunk_file_is_read_again_without_duplicates(
    logdir: Path, store: str, clean: Clean
) -> None:
    convert(logdir, store)
    path = logdir / "run_a" / "events.out.tfevents.1.host"
    write_events(path, events("loss", range(20)))
    second = convert(logdir, store)
    assert second.files_replaced == 1
    assert view_rows(store) == clean(logdir)


def test_replaced_file_with_new_first_record(logdir: Path, store: str, clean: Clean) -> None:
    convert(logdir, store)
    path = logdir / "run_a" / "events.out.tfevents.1.host"
    write_events(path, events("loss", range(80), base=5000.0, scale=2.0))  # larger, new head
    second = convert(logdir, store)
    assert second.files_replaced == 1
    rows = view_rows(store)
    assert rows == clean(logdir)
    losses = [row[5] for row in rows["v_scalars"] if row[3] == "loss"]
    assert len(losses) == 80 and min(losses) >= 5000.0


def test_deleted_file_is_marked_and_its_data_kept(logdir: Path, store: str) -> None:
    convert(logdir, store)
    before = point_count(store)
    (logdir / "run_b" / "events.out.tfevents.1.host").unlink()
    second = convert(logdir, store)
    assert second.files_gone == 1
    assert point_count(store) == before
    assert file_states(store)["run_b/events.out.tfevents.1.host"][0] == "gone"


def test_new_files_and_new_runs_are_picked_up(logdir: Path, store: str, clean: Clean) -> None:
    convert(logdir, store)
    write_events(logdir / "run_a" / "events.out.tfevents.2.host", events("loss", range(50, 70)))
    write_events(logdir / "run_c" / "events.out.tfevents.1.host", events("acc", range(5)))
    second = convert(logdir, store)
    assert second.runs_created == 1 and second.runs_extended == 1
    assert second.points["scalars"] == 25
    assert view_rows(store) == clean(logdir)


def test_full_rereads_everything_without_duplicates(logdir: Path, store: str) -> None:
    convert(logdir, store)
    before = view_rows(store)
    again = convert(logdir, store, full=True)
    assert again.files_read == 2 and again.points["scalars"] == 80
    assert view_rows(store) == before


def test_sequence_of_changes_matches_a_clean_run(logdir: Path, store: str, clean: Clean) -> None:
    path_a = logdir / "run_a" / "events.out.tfevents.1.host"
    steps = [
        lambda: append_events(path_a, events("loss", range(50, 55))),
        lambda: write_events(
            logdir / "run_d" / "events.out.tfevents.9.host", events("x", range(3))
        ),
        lambda: write_events(path_a, events("loss", range(10), base=9000.0)),
        lambda: append_events(path_a, events("loss", range(10, 12), base=9000.0)),
        lambda: os.utime(path_a, ns=(1, 1)),  # touched only: re-read, nothing added
    ]
    for change in steps:
        change()
        convert(logdir, store)
        assert view_rows(store) == clean(logdir)


def _nested_logdir(root: Path) -> dict[str, Path]:
    """Runs whose subdirectories are contexts, or runs of their own under ``--flat``: one
    file alone in its place, two sharing a place and a tag, and a run with its own file."""
    files = {
        "train": root / "group" / "run" / "train" / "events.out.tfevents.1.host",
        "eval_1": root / "group" / "run" / "eval" / "events.out.tfevents.1.host",
        "eval_2": root / "group" / "run" / "eval" / "events.out.tfevents.2.host",
        "own": root / "solo" / "events.out.tfevents.1.host",
    }
    write_events(files["train"], events("loss", range(40)))
    write_events(files["eval_1"], events("loss", range(0, 40, 10), scale=2.0))
    write_events(files["eval_2"], events("loss", range(40, 60, 10), base=5000.0, scale=2.0))
    write_events(files["own"], events("acc", range(5)))
    return files


def _fresh(make_store: StoreFactory, tmp_path: Path, logdir: Path, name: str, flat: bool) -> dict:
    fresh = make_store(tmp_path, name)
    convert(logdir, fresh, flat=flat)
    return without_run_ids(view_rows(fresh))


def test_a_flat_switch_moves_files_without_reading_them(
    tmp_path: Path, store: str, make_store: StoreFactory
) -> None:
    logdir = tmp_path / "logs"
    _nested_logdir(logdir)
    convert(logdir, store)
    before = view_rows(store)
    plan = convert(logdir, store, flat=True, dry_run=True).plan
    moved = [(entry["then"], entry["bytes"]) for entry in plan if entry["action"] == "moved"]
    assert moved == [("unchanged", 0)] * 3 and view_rows(store) == before
    flat = convert(logdir, store, flat=True)
    assert (flat.files_moved, flat.files_read, flat.bytes_read) == (3, 0, 0)
    assert flat.total_points == 0 and flat.files_unchanged == 4
    assert without_run_ids(view_rows(store)) == _fresh(make_store, tmp_path, logdir, "f", True)
    # And back: the two runs merge into group/run again, still without a byte read.
    back = convert(logdir, store)
    assert (back.files_moved, back.bytes_read, back.runs_merged) == (3, 0, 2)
    assert without_run_ids(view_rows(store)) == _fresh(make_store, tmp_path, logdir, "n", False)


def test_a_moved_file_that_grew_reads_only_its_new_bytes(
    tmp_path: Path, store: str, make_store: StoreFactory
) -> None:
    logdir = tmp_path / "logs"
    files = _nested_logdir(logdir)
    convert(logdir, store)
    size = files["train"].stat().st_size
    append_events(files["train"], events("loss", range(40, 50)))
    grown = files["train"].stat().st_size - size
    plan = convert(logdir, store, flat=True, dry_run=True).plan
    moved = {entry["path"]: (entry["then"], entry["bytes"]) for entry in plan}
    assert moved[str(files["train"].relative_to(logdir))] == ("append", grown)
    flat = convert(logdir, store, flat=True)
    assert (flat.files_moved, flat.files_read) == (3, 1)
    assert flat.bytes_read == grown
    assert flat.points == {"scalars": 10}
    assert without_run_ids(view_rows(store)) == _fresh(make_store, tmp_path, logdir, "f", True)
