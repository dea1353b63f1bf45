"""A ``push wandb --offline`` killed (SIGKILL, in a real process) at every batch boundary,
around the making of a W&B run and around its other plugins and its end, then run again,
leaves every W&B history equal to ``v_scalars_current`` with one point per step, each point
once, read back with W&B's own reader (#48).

Each kill pushes into an offline directory of its own.  A kill right after a run is made
(the store has not recorded it) must find that run again by its stable id: one W&B run per
run, whatever the number of its directories.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tests.push.conftest import write_logdir
from tests.push.test_push_crash import kill_everywhere_then_run_again
from tests.push.test_push_crash import run_jobs as run_mlflow_jobs
from tests.push.test_push_wandb import assert_exact, resumed_logdir
from tests.push.wandb_readback import wandb_runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BATCH = 16


def run_jobs(jobs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    return run_mlflow_jobs(jobs, tmp_path, "tests.support.push_crash_wandb", timeout=1200)


def test_a_push_killed_anywhere_then_run_again_is_exact(tmp_path: Path) -> None:
    write_logdir(tmp_path / "logs", runs=1, steps=12)
    resumed_logdir(tmp_path / "logs")
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0

    def job(name: str, call: str = "log_points", number: int = 0, when: str = "after"):
        return {
            "store": str(store),
            "out": str(tmp_path / name),
            "batch_size": BATCH,
            "call": call,
            "number": number,
            "when": when,
        }

    kills = kill_everywhere_then_run_again(
        lambda jobs: run_jobs(jobs, tmp_path),
        job,
        "count",
        ("crash", "log_points"),
        5,
        [
            ("crash-made", "open_run", 2, "after"),
            ("crash-files-before", "log_files", 2, "before"),
            ("crash-files-after", "log_files", 2, "after"),
            ("crash-finish-before", "finish_run", 1, "before"),
            ("crash-finish-after", "finish_run", 2, "after"),
        ],
    )

    # Every destination's marks count each scalar point once.
    with closing(sqlite3.connect(store)) as conn:
        (points,) = conn.execute("SELECT count(*) FROM scalars").fetchone()
        counted = conn.execute(
            "SELECT destination, sum(points) FROM push_marks WHERE point_table = 'scalars' "
            "GROUP BY destination"
        ).fetchall()
    assert len(counted) == len(kills) + 1 and {total for _, total in counted} == {points}
    for name in kills:
        assert_exact(store, tmp_path / name)
        runs = wandb_runs(tmp_path / name)
        media = {key: steps for run in runs.values() for key, steps in run.media.items()}
        assert all(len({s for s, _ in steps}) == len(steps) for steps in media.values()), name
        assert len(media) == 3, name  # images, texts, histograms of run_0, each once
