"""``current_summaries`` (revision 0016): the aggregates of a series that may have several
attempts over its current points, kept by the writer through appends, restarts, session
starts, new files sorting before others, replaced and deleted files.  The oracle is the
reference rule over the points (``snapshots.assert_current_summaries_exact``) and, for the
selection, a pandas computation over ``v_scalars_current``."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

from tbconvert import convert
from tbconvert.writing import current_summaries
from tbconvert.writing.statements import Statements
from tests.support.eventfiles import (
    append_events,
    simple_value,
    summary_event,
    write_events,
)
from tests.support.revisions import down_and_up
from tests.support.snapshots import assert_current_summaries_exact, connect, rows

TAG = "loss"


def _points(steps: list[int], base: float = 0.0) -> list[Event]:
    return [
        summary_event(step, 1e9 + step, [simple_value(TAG, base + 1.0 / (step + 1))])
        for step in steps
    ]


def _start(step: int) -> Event:
    event = Event(step=step, wall_time=1e9 + step)
    event.session_log.status = SessionLog.START
    return event


def _check(store: str) -> list[tuple[object, ...]]:
    with contextlib.closing(connect(store)) as connection:
        assert_current_summaries_exact(connection)
        return sorted(rows(connection, "SELECT * FROM current_summaries"), key=repr)


def _convert(logdir: Path, store: str) -> list[tuple[object, ...]]:
    convert(logdir, store, progress=False)
    return _check(store)


def test_the_rows_follow_appends_restarts_starts_and_earlier_files(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_again: list[list[int]] = []
    make_again = current_summaries._made_again

    def spy(statements: Statements, ids: Sequence[int]) -> list[current_summaries.Current]:
        made_again.append(list(ids))
        return make_again(statements, ids)

    monkeypatch.setattr(current_summaries, "_made_again", spy)
    run = tmp_path / "logs" / "run"
    first = write_events(run / "events.out.tfevents.2.h", _points(list(range(10))))
    assert _convert(tmp_path / "logs", store) == []  # one attempt: no row
    append_events(first, _points([4, 5]))  # a restart in the same file
    (row,) = _convert(tmp_path / "logs", store)
    assert row[1] == 6  # steps 0..3, then 4, 5
    made_again.clear()
    append_events(first, _points([6, 7, 7, 9], base=1.0))  # appended in place
    (row,) = _convert(tmp_path / "logs", store)
    assert row[1] == 10
    assert made_again == []
    write_events(run / "events.out.tfevents.3.h", [_start(8), *_points([8, 20], base=-5.0)])
    (row,) = _convert(tmp_path / "logs", store)
    assert row[1] == 11  # 0..7 kept (7 twice), 8 and 20 new
    assert made_again  # a session start makes the row again
    # A file sorting before the others: read first, so its points are the oldest.
    write_events(run / "events.out.tfevents.1.h", _points([30, 31], base=-9.0))
    _convert(tmp_path / "logs", store)
    # A second series in the run, after the session start: it needs a row too.
    append_events(
        run / "events.out.tfevents.3.h", [summary_event(21, 1e9, [simple_value("acc", 0.5)])]
    )
    assert len(_convert(tmp_path / "logs", store)) == 2


def test_rows_go_with_deleted_and_replaced_files(store: str, tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    write_events(run / "events.out.tfevents.1.h", _points([0, 1, 2, 1, 2]))
    later = write_events(run / "events.out.tfevents.2.h", [_start(1), *_points([1, 5])])
    assert len(_convert(tmp_path / "logs", store)) == 1
    later.unlink()
    _convert(tmp_path / "logs", store)
    write_events(later, _points([7, 8]))
    _convert(tmp_path / "logs", store)
    convert(tmp_path / "logs", store, progress=False, full=True)
    _check(store)


def test_revision_0016_fills_the_table_and_its_downgrade_drops_it(
    store: str, tmp_path: Path
) -> None:

    run = tmp_path / "logs" / "run"
    write_events(run / "events.out.tfevents.1.h", _points([0, 1, 2, 3, 1, 2]))
    write_events(run / "events.out.tfevents.2.h", [_start(2), *_points([2, 3])])
    write_events(tmp_path / "logs" / "other" / "events.out.tfevents.1.h", _points([0, 1]))
    kept = _convert(tmp_path / "logs", store)
    assert len(kept) == 1
    assert down_and_up(store, "0015", "current_summaries") == 1
    assert _check(store) == kept
