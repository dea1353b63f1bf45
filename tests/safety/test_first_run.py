"""A new store appears with its whole schema or not at all (design §6): no SQL client ever
sees a store without its views, whenever the first conversion is stopped."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from tbconvert import convert
from tbconvert.store import migrate
from tests.support.eventfiles import scalar_events, write_events

VIEWS = {"v_runs", "v_scalars", "v_last_scalars", "v_series", "v_params"}


def logdir_of(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for run in range(3):
        write_events(
            root / f"run{run}" / "events.out.tfevents.1.h", scalar_events("loss", range(50))
        )
    return root


def views_of(path: Path) -> set[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")
        }


def test_a_store_whose_schema_fails_midway_is_never_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_way(conn, current, head):  # type: ignore[no-untyped-def]
        conn.exec_driver_sql("CREATE TABLE runs (id INTEGER PRIMARY KEY)")
        raise OSError("killed")

    monkeypatch.setattr(migrate, "_migrate", half_way)
    store = tmp_path / "s.db"
    with pytest.raises(OSError, match="killed"):
        convert(logdir_of(tmp_path), store, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["logs"]  # no store, and nothing left behind


@pytest.mark.slow  # a process started and killed a dozen times
def test_kill_9_during_a_first_conversion_leaves_no_store_or_a_whole_one(tmp_path: Path) -> None:
    logdir = logdir_of(tmp_path)
    script = (
        "import sys; from tbconvert import convert; "
        "convert(sys.argv[1], sys.argv[2], progress=False)"
    )
    seen = {"none": 0, "whole": 0}
    for attempt in range(12):
        store = tmp_path / f"s{attempt}.db"
        process = subprocess.Popen([sys.executable, "-c", script, str(logdir), str(store)])
        time.sleep(0.05 * attempt)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if store.exists():
            assert views_of(store) >= VIEWS, attempt
            seen["whole"] += 1
        else:
            seen["none"] += 1
    # Both outcomes happened: the kills fell before and after the store appeared.
    assert seen["none"] and seen["whole"], seen
    # What the killed creations left behind goes with the next creation of that store.
    convert(logdir, tmp_path / "s0.db", progress=False)
    assert not [name for name in os.listdir(tmp_path) if name.startswith("s0.db.creating-")]
