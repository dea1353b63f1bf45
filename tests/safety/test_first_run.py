"""A new store appears with its whole schema or not at all (design §6): no SQL client ever
sees a store without its views, whenever the first conversion is stopped."""

from __future__ import annotations

import glob
import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.store import migrate
from tests.support.children import child_env
from tests.support.eventfiles import scalar_events, write_events

ROOT = Path(__file__).resolve().parents[2]
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

    monkeypatch.setattr(migrate, "migrate_schema", half_way)
    store = tmp_path / "s.db"
    with pytest.raises(OSError, match="killed"):
        convert(logdir_of(tmp_path), store, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["logs"]  # no store, and nothing left behind


def killed_at_every_step(tmp_path: Path, logdir: Path) -> list[dict[str, Any]]:
    """A first conversion into a new store per step, each killed (SIGKILL) at that step
    (``tests/support/crashpoints.py``): the audit events on the store's paths and the SQL
    statements, from the first look at the store to the conversion's last statement."""

    def run(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        jobs_file, results_file = tmp_path / "jobs.json", tmp_path / "results.json"
        jobs_file.write_text(json.dumps(jobs))
        command = [sys.executable, "-m", "tests.support.crashpoints", str(jobs_file)]
        subprocess.run(
            [*command, str(results_file)], cwd=ROOT, env=child_env(), check=True, timeout=900
        )
        results: list[dict[str, Any]] = json.loads(results_file.read_text())
        return results

    job = {"logdir": str(logdir), "store": str(tmp_path / "whole.db"), "point": 0}
    [whole] = run([job])
    assert whole["exit"] == 0
    jobs = [
        {**job, "store": str(tmp_path / f"s{point}.db"), "point": point}
        for point in range(1, whole["steps"] + 1)
    ]
    return [{**result, "store": job["store"]} for job, result in zip(jobs, run(jobs), strict=True)]


@pytest.mark.slow  # a first conversion killed at each of its ~60 steps
def test_kill_9_during_a_first_conversion_leaves_no_store_or_a_whole_one(tmp_path: Path) -> None:
    logdir = logdir_of(tmp_path)
    killed = killed_at_every_step(tmp_path, logdir)
    seen = {"none": 0, "whole": 0}
    for result in killed:
        assert result["exit"] == -signal.SIGKILL, result
        store = Path(result["store"])
        if store.exists():
            assert views_of(store) >= VIEWS, result
            seen["whole"] += 1
        else:
            seen["none"] += 1
    # Both outcomes happened: kills before the store appeared, and after.
    assert seen["none"] and seen["whole"], seen
    # What the killed creations left behind goes with the next creation of that store.
    abandoned = [
        Path(result["store"])
        for result in killed
        if glob.glob(f"{result['store']}.creating-*") and not Path(result["store"]).exists()
    ]
    assert abandoned, "no kill landed while a store was being built"
    convert(logdir, abandoned[0], progress=False)
    assert views_of(abandoned[0]) >= VIEWS
    assert not glob.glob(f"{abandoned[0]}.creating-*")
