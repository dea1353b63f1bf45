"""Series summaries of a group of small files applied together (issue #14).

A group's points go in with one insert per table and fold into ``series_summaries`` with one
aggregation, so one series can get rows of several files at once: its last point must still
be the one of the file later in path byte order, and an insert that stored only part of its
rows must still be recounted.  The expected last values are worked out here from the files
written, and the kept summaries are compared with a recount by SQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.writing.sqlite import SqliteBulk
from tests.support.eventfiles import event_file_name, simple_value, summary_event, write_events
from tests.support.snapshots import assert_summaries_exact

# Byte order puts "Z" before "a", and "a" before "b": unlike arrival order or a
# case-insensitive sort.  Every file is a file of the run "run", context ".".
_HOSTS = ("b", "Z", "a")


def _last_values(store: Path) -> dict[str, tuple[int, float]]:
    with sqlite3.connect(store) as connection:
        found = connection.execute("SELECT tag, step, value FROM v_last_scalars").fetchall()
    return {tag: (step, value) for tag, step, value in found}


def _count_inserts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = SqliteBulk.insert_points

    def counted(self: SqliteBulk, dbapi: Any, table: str, rows: Any, fresh: bool = False) -> int:
        sizes.append(len(rows))
        return real(self, dbapi, table, rows, fresh)

    monkeypatch.setattr(SqliteBulk, "insert_points", counted)
    return sizes


def _write_sweep_of_one_run(logdir: Path, top: int) -> dict[str, float]:
    """Three files of one run, each with "loss" up to the same top step (a tie between files)
    and "own" up to a step of its own; returns the value each file gives "loss" at the top."""
    at_top = {}
    for number, host in enumerate(_HOSTS):
        name = event_file_name(1_700_000_000 + number, host=host)
        value = float(10 * number + 1)
        events = [
            summary_event(step, 1_700_000_000.0 + step, [simple_value("loss", step * 0.5)])
            for step in range(top)
        ]
        events.append(summary_event(top, 1_700_000_100.0, [simple_value("loss", value)]))
        events.append(summary_event(number, 1_700_000_200.0, [simple_value("own", float(number))]))
        write_events(logdir / "run" / name, events)
        at_top[name] = value
    return at_top


def test_the_last_point_of_a_series_spread_over_a_group_is_the_last_file_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_top = _write_sweep_of_one_run(tmp_path / "logs", top=5)
    inserts = _count_inserts(monkeypatch)
    store = tmp_path / "s.db"
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.files_read == 3
    assert len(inserts) == 1  # the three files in one group, one insert
    last_by_path = max(at_top, key=lambda name: name.encode())
    assert _last_values(store) == {"loss": (5, at_top[last_by_path]), "own": (2, 2.0)}
    assert_summaries_exact(store)


def test_a_group_extends_the_summaries_of_files_already_stored(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    at_top = _write_sweep_of_one_run(logdir, top=5)
    store = tmp_path / "s.db"
    convert(logdir, store, progress=False)
    # A fourth file, last by path, ties on the top step with the stored ones.
    name = event_file_name(1_700_000_009, host="c")
    write_events(
        logdir / "run" / name, [summary_event(5, 1_700_000_300.0, [simple_value("loss", 99.0)])]
    )
    at_top[name] = 99.0
    convert(logdir, store, progress=False)
    assert _last_values(store)["loss"] == (5, 99.0)
    assert_summaries_exact(store)


def test_a_group_with_rows_already_stored_keeps_the_summaries_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = tmp_path / "logs"
    _write_sweep_of_one_run(logdir, top=5)
    store = tmp_path / "s.db"
    convert(logdir, store, tags=["loss"], progress=False)
    # A new file, then every tag: the stored files are read again from their start (their
    # "loss" rows are stored already, "own" rows are not) in the group of the new file.
    name = event_file_name(1_700_000_009, host="c")
    write_events(
        logdir / "run" / name,
        [summary_event(7, 1_700_000_300.0, [simple_value("loss", 7.0), simple_value("own", 7.0)])],
    )
    inserts = _count_inserts(monkeypatch)
    convert(logdir, store, progress=False)
    assert len(inserts) == 2  # the new file's rows, then the rows read again
    assert _last_values(store) == {"loss": (7, 7.0), "own": (7, 7.0)}
    assert_summaries_exact(store)
    clean = tmp_path / "clean.db"
    convert(logdir, clean, progress=False)
    assert _last_values(clean) == _last_values(store)
