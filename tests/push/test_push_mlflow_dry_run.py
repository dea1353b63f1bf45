"""``tbconvert push mlflow --dry-run`` counts what a push would send from the store alone: a
``sqlite:`` tracking database and a file store it names stay absent, or unchanged byte for
byte, and its counts are what the push then sends (#48).

The expected counts come from the store's views (``v_scalars``: MLflow takes every point),
and from what MLflow's own client reads back after the push.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tensorboardX import SummaryWriter

from tbconvert import convert
from tbconvert.cli import cli
from tests.push.conftest import W0
from tests.push.test_push_mlflow import mlflow_histories, tracking_uri

pytestmark = pytest.mark.slow
RUNS = ["protos", "run_0", "run_1"]


def scalar_points(store: Path) -> int:
    with closing(sqlite3.connect(store)) as conn:
        (points,) = conn.execute("SELECT count(*) FROM v_scalars").fetchone()
    return int(points)


def files_under(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself), with its bytes."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def push(*args: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(cli, ["push", "mlflow", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.mark.parametrize("target", ["sqlite", "file"])
def test_a_dry_run_counts_what_a_push_sends_and_leaves_mlflow_untouched(
    target: str, converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = tracking_uri(target, "", tmp_path, monkeypatch)
    mlflow_files = tmp_path / ("mlflow.db" if target == "sqlite" else "mlruns")
    args = ("--store", str(converted), "--tracking-uri", uri, "--experiment", "dry")

    plan, said = push(*args, "--dry-run")
    assert not mlflow_files.exists()
    assert plan["dry_run"] and plan["experiment_id"] == ""
    assert plan["metrics"] == scalar_points(converted)
    assert sorted(run["run_path"] for run in plan["runs"]) == RUNS
    assert all(run["created"] for run in plan["runs"])
    assert "would push 3 runs (3 new)" in said

    done, _ = push(*args)
    assert not done["dry_run"]
    assert done["metrics"] == plan["metrics"]
    assert [r["params"] for r in done["runs"]] == [r["params"] for r in plan["runs"]]
    read_back = mlflow_histories(uri, "dry")
    assert sum(len(points) for points in read_back.values()) == plan["metrics"]

    before = files_under(mlflow_files)
    again, said = push(*args, "--dry-run")
    assert again["metrics"] == 0 and not any(run["created"] for run in again["runs"])
    assert again["experiment_id"] == done["experiment_id"] != ""
    assert f"(id {done['experiment_id']})" in said
    # Another experiment at the same URI has nothing of the store yet.
    other, _ = push("--store", str(converted), "--tracking-uri", uri, "--dry-run")
    assert other["metrics"] == plan["metrics"] and other["experiment_id"] == ""

    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "run_0"), flush_secs=3600, filename_suffix=".more") as w:
        for step in range(12, 17):
            w.add_scalar("loss", step * 0.5, step, walltime=W0 + 300 + step)
    assert convert(logdir, converted, progress=False).exit_code == 0
    grown, _ = push(*args, "--dry-run")
    assert files_under(mlflow_files) == before
    assert grown["metrics"] == 5
    assert push(*args)[0]["metrics"] == 5


def test_a_store_pushed_before_it_recorded_names_is_said(converted: Path, tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ("--store", str(converted), "--tracking-uri", uri)
    with closing(sqlite3.connect(converted)) as conn, conn:
        conn.execute(
            "INSERT INTO push_runs (destination, run_id, remote_id, pending) "
            f"SELECT 'mlflow {uri} experiment 1', id, 'r' || id, 0 FROM runs"
        )
    plan, said = push(*args, "--dry-run")
    assert not (tmp_path / "mlflow.db").exists()
    assert plan["metrics"] == scalar_points(converted)
    assert "before it recorded experiment names" in said
    assert plan["warnings"] == [said.splitlines()[0].removeprefix("warning: ")]


def test_every_push_s_dry_run_has_the_same_json_shape(converted: Path, tmp_path: Path) -> None:
    store = ("--store", str(converted))
    commands = [
        ["mlflow", *store, "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        ["aim", *store, "--repo", str(tmp_path / "aim")],
        ["wandb", *store, "--project", "p", "--offline", str(tmp_path / "wandb")],
    ]
    documents = []
    for command in commands:
        result = CliRunner().invoke(cli, ["push", *command, "--dry-run", "--json"])
        assert result.exit_code == 0, result.output
        documents.append(json.loads(result.stdout))
    assert not any((tmp_path / name).exists() for name in ("mlflow.db", "aim", "wandb"))
    shared = {"runs", "metrics", "warnings", "dry_run"}
    assert all(shared <= set(document) for document in documents)
    assert len({frozenset(d["runs"][0]) for d in documents}) == 1
    assert len({d["metrics"] for d in documents[1:]}) == 1  # both keep one point per step


def test_a_recorded_destination_holds_no_credentials(converted: Path) -> None:
    from tbconvert.push.state import named_destination, save_destination
    from tbconvert.query.store import open_store

    uri = "http://user:s3cret@127.0.0.1:5000"
    opened = open_store(converted)
    try:
        with opened.engine.begin() as conn:
            save_destination(conn, "mlflow", uri, "e", "mlflow http://127.0.0.1:5000 experiment 7")
        with opened.connect() as conn:
            assert named_destination(conn, "mlflow", uri, "e") == (
                "mlflow http://127.0.0.1:5000 experiment 7"
            )
    finally:
        opened.close()
    with closing(sqlite3.connect(converted)) as conn:
        rows = conn.execute("SELECT * FROM push_destinations").fetchall()
    assert len(rows) == 1 and "s3cret" not in repr(rows) and "user" not in repr(rows)
