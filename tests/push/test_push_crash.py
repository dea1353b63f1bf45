"""A push killed (SIGKILL, in a real process) at every batch boundary, then run again,
leaves every MLflow history equal to ``v_scalars``, each point exactly once (#39).

Each kill is right before a metric batch is sent (MLflow never gets it) or right after
MLflow acknowledged it (the store has not marked it), one right after an MLflow run is
created (the store has not recorded it): the push run again must find that run by its tag,
and one on either side of an upload of artifacts, which must come back byte for byte.
Each kill pushes into an experiment of its own, on the session's server and in MLflow's file
store.  MLflow's SQL stores (the server's) drop a point equal to one they hold in every field,
so a batch sent twice leaves no trace there; the file store appends, and shows any point
sent twice.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from tbconvert import convert
from tests.push.conftest import write_logdir
from tests.push.test_push_mlflow import (
    expected_artifacts,
    mlflow_artifacts,
    mlflow_histories,
    mlflow_runs,
    store_histories,
    tracking_uri,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BATCH = 10


def run_jobs(
    jobs: list[dict[str, Any]],
    tmp_path: Path,
    driver: str = "tests.support.push_crash",
    timeout: float = 600,
) -> list[dict[str, Any]]:
    jobs_file, results_file = tmp_path / "jobs.json", tmp_path / "results.json"
    jobs_file.write_text(json.dumps(jobs))
    subprocess.run(
        [sys.executable, "-m", driver, str(jobs_file), str(results_file)],
        cwd=ROOT,
        check=True,
        timeout=timeout,
    )
    results: list[dict[str, Any]] = json.loads(results_file.read_text())
    return results


def kill_everywhere_then_run_again(
    run: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    job: Callable[..., dict[str, Any]],
    count: str,
    batch: tuple[str, str],
    at_least: int,
    others: list[tuple[str, str, int, str]],
) -> list[str]:
    """Count a whole push's batches (the job ``count``), kill a push (SIGKILL) before and
    after each batch (``batch``: the killed pushes' name prefix and the call counted) and at
    each of ``others`` (name, call, number, when), then run each killed push again to its
    end; the names of the killed pushes.

    The count may come with the batches that the next one followed directly, nothing in
    between (``back_to_back``, see ``tests/support/push_crash.BackToBack``): the kill before
    the next is then the kill after that one, made once."""
    (whole,) = run([job(count)])
    assert whole["status"] == 0
    said = json.loads(whole["said"])
    batches = said if isinstance(said, int) else said["calls"]
    same = set() if isinstance(said, int) else {number + 1 for number in said["back_to_back"]}
    assert batches >= at_least  # several runs, several batches each
    prefix, counted = batch
    kills = [
        (f"{prefix}-{when}-{number}", counted, number, when)
        for number in range(1, batches + 1)
        for when in ("before", "after")
        if not (when == "before" and number in same)
    ]
    kills += others
    killed = run([job(name, call, n, when) for name, call, n, when in kills])
    assert [result["status"] for result in killed] == [-9] * len(kills), killed
    again = run([job(name) for name, *_ in kills])
    assert [result["status"] for result in again] == [0] * len(kills), again
    return [name for name, *_ in kills]


@pytest.mark.parametrize("target", ["server", "file"])
def test_a_push_killed_at_every_batch_boundary_then_run_again_is_exact(
    target: str, mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = tracking_uri(target, mlflow_server, tmp_path, monkeypatch)
    write_logdir(tmp_path / "logs", runs=2, steps=12)
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0

    def job(experiment: str, call: str = "log_batch", number: int = 0, when: str = "after"):
        return {
            "store": str(store),
            "uri": uri,
            "experiment": experiment,
            "batch_size": BATCH,
            "call": call,
            "number": number,
            "when": when,
        }

    kills = kill_everywhere_then_run_again(
        lambda jobs: run_jobs(jobs, tmp_path),
        job,
        "crash-count",
        ("crash", "log_batch"),
        6,
        [
            ("crash-created", "create_run", 1, "after"),
            # Around an upload of artifacts (the marks move after it).
            ("crash-upload-before", "log_artifacts", 2, "before"),
            ("crash-upload-after", "log_artifacts", 1, "after"),
        ],
    )

    expected = store_histories(store, target)
    # Every destination's marks count each scalar point once.
    with closing(sqlite3.connect(store)) as conn:
        (points,) = conn.execute("SELECT count(*) FROM scalars").fetchone()
        counted = conn.execute(
            "SELECT destination, sum(points) FROM push_marks WHERE point_table = 'scalars' "
            "GROUP BY destination"
        ).fetchall()
    assert len(counted) == len(kills) + 1 and {total for _, total in counted} == {points}
    files = expected_artifacts(store)
    for name in kills:
        assert mlflow_histories(uri, name) == expected, name
        assert mlflow_artifacts(uri, name, tmp_path / name) == files, name
        # One MLflow run per tbconvert run: a run the store did not record was found again.
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name(name)
        assert experiment is not None
        names = Counter(r.info.run_name for r in client.search_runs([experiment.experiment_id]))
        assert set(names.values()) == {1}, (name, names)
        assert sorted(mlflow_runs(uri, name)) == sorted({run_path for run_path, _ in expected})
