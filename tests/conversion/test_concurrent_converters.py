"""Converters that meet on one store, in one process here: a converter waits for another
process's write lock and says so, and leaves a file that another converter read further
since its plan to that converter.  (``tests/safety/test_crash_safety.py`` runs converters
at once in processes of their own.)
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.conversion import job as job_module
from tests.support.eventfiles import append_events, scalar_events, write_events
from tests.support.snapshots import sqlite_rows

FILE = "events.out.tfevents.1.h"


@pytest.mark.mutant_gap
def test_a_store_another_process_is_writing_to_is_waited_for_and_said_so(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(logs / "run" / FILE, scalar_events("loss", range(3)))
    convert(logs, store)
    write_events(logs / "other" / FILE, scalar_events("loss", range(2)))
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
def test_a_file_another_converter_read_further_since_the_plan_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    grown = write_events(logs / "a" / FILE, scalar_events("loss", range(5)))
    write_events(logs / "b" / FILE, scalar_events("acc", range(3)))
    convert(logs, store)
    append_events(grown, scalar_events("loss", range(5, 10)))
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
    assert sqlite_rows(store, "SELECT count(*) FROM scalars") == [(13,)]
