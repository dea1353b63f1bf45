"""A PostgreSQL server that ends the converter's session mid-conversion (design §9): one
clear line and exit 1, and the next run completes the store exactly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.eventfiles import scalar_events, write_events
from tests.support.pgserver import PostgresServer
from tests.support.snapshots import view_rows, views_without_gone, without_run_ids

pytestmark = pytest.mark.slow  # a conversion long enough to be cut, and a clean one to compare


def points_in(server: PostgresServer, url: str) -> int:
    database = url.rsplit("/", 1)[1]
    try:
        ((count,),) = server.execute("SELECT count(*) FROM scalars", database)
    except Exception:  # the schema is not there yet
        return 0
    return int(str(count))


def test_a_session_ended_by_the_server_is_one_line_and_the_next_run_completes(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    logdir = tmp_path / "logs"
    for run in range(120):
        write_events(
            logdir / f"run{run}" / "events.out.tfevents.1.h", scalar_events("x", range(4000))
        )
    store = pg_server.new_database("fault")
    process = subprocess.Popen(
        [sys.executable, "-m", "tbconvert", "tf", "--logdir", str(logdir), "--store", store,
         "--jobs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while points_in(pg_server, store) == 0 and process.poll() is None:
        assert time.monotonic() < deadline, "no chunk was committed"
        time.sleep(0.05)
    database = store.rsplit("/", 1)[1]
    ended = pg_server.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )
    _out, stderr = process.communicate(timeout=120)
    if not ended:
        pytest.fail("the conversion ended before the server could end its session")
    assert process.returncode == 1, stderr
    (line,) = stderr.strip().splitlines()
    assert "the connection to the PostgreSQL server was lost" in line
    assert "run the same command again" in line and "Traceback" not in stderr
    kept = points_in(pg_server, store)
    assert 0 < kept < 120 * 4000
    again = convert(logdir, store, progress=False)
    assert again.exit_code == 0 and again.points["scalars"] == 120 * 4000 - kept
    clean = pg_server.new_database("clean")
    convert(logdir, clean, progress=False)
    assert without_run_ids(views_without_gone(store)) == without_run_ids(view_rows(clean))
