"""A first push into a new MLflow database that was killed while MLflow created it leaves a
database MLflow cannot open again (its set-up is hundreds of statements, not one
transaction).  Later pushes say so in one line with the fix, not a traceback of MLflow's
migrations, and the fix works (issue #44).

The half-made database is made as a kill would make it: a forked child sets up MLflow's
database and ends itself (``os._exit``, as ``kill -9``) right after the N-th statement that
changes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tests.support.children import child_env
from tests.support.crashpoints import CRASHED, forked
from tests.support.eventfiles import write_tbx_run

pytest.importorskip("mlflow")
# Slow (MLflow's set-up of a database, several times): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WRITES = ("CREATE", "ALTER", "DROP", "INSERT", "UPDATE", "DELETE")


def _set_up_mlflow(job: dict[str, Any], report: int) -> None:
    from mlflow.tracking import MlflowClient
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    made = [0]

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(WRITES):
            made[0] += 1
            if made[0] == job["stop_after"]:
                os.write(report, str(made[0]).encode())
                os._exit(CRASHED)

    event.listen(Engine, "after_cursor_execute", count)
    MlflowClient(tracking_uri=job["uri"]).search_experiments()
    os.write(report, str(made[0]).encode())
    os._exit(0)


def half_made(path: Path, stop_after: int) -> None:
    status, _ = forked(_set_up_mlflow, {"uri": f"sqlite:///{path}", "stop_after": stop_after})
    assert status == CRASHED


@pytest.fixture(scope="module")
def statements(tmp_path_factory: pytest.TempPathFactory) -> int:
    """How many changing statements MLflow's whole set-up of a database makes."""
    path = tmp_path_factory.mktemp("whole") / "mlflow.db"
    status, made = forked(_set_up_mlflow, {"uri": f"sqlite:///{path}", "stop_after": 0})
    assert status == 0 and int(made) > 100
    return int(made)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("push")
    write_tbx_run(root / "logs", "run_a")
    convert(root / "logs", root / "s.db", progress=False)
    return root / "s.db"


def push(store: Path, uri: str, where: Path) -> subprocess.CompletedProcess[str]:
    """A push in a process of its own, as a user's next one (MLflow keeps a database's
    engine, and its open connection, for the life of a process)."""
    command = ["push", "mlflow", "--store", str(store), "--tracking-uri", uri]
    return subprocess.run(
        [sys.executable, "-m", "tbconvert", *command],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=where,  # MLflow's sqlite: store puts its artifacts in ./mlruns
    )


@pytest.mark.parametrize("fraction", [0.1, 0.5, 1.0], ids=["early", "midway", "last"])
def test_a_later_push_says_so_in_one_line_and_removing_it_fixes_it(
    statements: int,
    store: Path,
    tmp_path: Path,
    fraction: float,
) -> None:
    database = tmp_path / "mlflow.db"
    half_made(database, max(1, round(statements * fraction) - 1))
    result = push(store, f"sqlite:///{database}", tmp_path)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {database}: MLflow's tracking database "), line
    assert f"remove it (rm {database})" in line, line
    database.unlink()
    again = push(store, f"sqlite:///{database}", tmp_path)
    assert again.returncode == 0, again.stderr


def test_mlflow_db_upgrade_does_not_finish_it(statements: int, tmp_path: Path) -> None:
    """Why the message says to remove it: MLflow's own upgrade fails on it too."""
    database = tmp_path / "mlflow.db"
    half_made(database, statements // 2)
    upgrade = subprocess.run(
        [sys.executable, "-m", "mlflow", "db", "upgrade", f"sqlite:///{database}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert upgrade.returncode != 0
    assert "already exists" in upgrade.stderr or "duplicate column" in upgrade.stderr
