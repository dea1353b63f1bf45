"""A PostgreSQL server that ends the converter's session mid-conversion (design §9): one
clear line and exit 1, and the next run completes the store exactly."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.children import child_env
from tests.support.eventfiles import scalar_events, write_events
from tests.support.pgserver import PostgresServer
from tests.support.snapshots import view_rows, views_without_gone, without_run_ids

pytestmark = pytest.mark.slow  # a conversion long enough to be cut, and a clean one to compare

ROOT = Path(__file__).resolve().parents[2]
# The CLI, with the server told to end the session from inside the Nth COPY of points: the
# connection is lost at a point the conversion reaches, mid-COPY, whatever the machine's pace.
CUT_MID_COPY = textwrap.dedent("""
    import sys
    import psycopg
    from tbconvert.cli import cli
    from tbconvert.writing import postgres

    admin, cut_at, arguments = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    write, copies = postgres._write, [0]

    def write_into_a_lost_session(copy, types, data):
        copies[0] += 1
        if copies[0] == cut_at:
            with psycopg.connect(admin, autocommit=True) as session:
                pid = copy.connection.info.backend_pid
                session.execute("SELECT pg_terminate_backend(%s)", (pid,))
        write(copy, types, data)

    postgres._write = write_into_a_lost_session
    cli(arguments)
""")


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
    # Five COPYs of points or so: the session ends inside the third, with two committed.
    runs, points = 60, 4000
    logdir = runs_of(tmp_path / "logs", runs, points)
    store = pg_server.new_database("fault")
    line = lose_the_session_inside_a_copy(pg_server, logdir, store, "--jobs", "1", "-q")
    assert "run the same command again" in line
    kept = points_in(pg_server, store)
    assert 0 < kept < runs * points
    again = convert(logdir, store, progress=False)
    assert again.exit_code == 0 and again.points["scalars"] == runs * points - kept
    clean = pg_server.new_database("clean")
    convert(logdir, clean, progress=False)
    assert without_run_ids(views_without_gone(store)) == without_run_ids(view_rows(clean))


def runs_of(logdir: Path, runs: int, points: int) -> Path:
    """``runs`` runs of one event file each, the same ``points`` points in every one: written
    once, then copied (building the Events costs seconds per hundred thousand)."""
    first = write_events(
        logdir / "run0" / "events.out.tfevents.1.h", scalar_events("x", range(points))
    )
    for run in range(1, runs):
        (logdir / f"run{run}").mkdir()
        shutil.copyfile(first, logdir / f"run{run}" / first.name)
    return logdir


def lose_the_session_inside_a_copy(
    pg_server: PostgresServer, logdir: Path, store: str, *options: str
) -> str:
    """Convert until the server ends the session inside the third COPY of points; the one
    line the command prints (exit 1), under -q as without it (issue #44)."""
    admin = f"host=127.0.0.1 port={pg_server.port} user={pg_server.user} dbname=postgres"
    process = subprocess.run(
        [sys.executable, "-c", CUT_MID_COPY, admin, "3",
         "tf", "--logdir", str(logdir), "--store", store, *options],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert process.returncode == 1, process.stderr
    (line,) = process.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "the connection to the PostgreSQL server was lost" in line
    return line


def test_a_session_lost_inside_a_copy_is_one_line_without_quiet_too(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """psycopg's own warning about the COPY it cannot end is not a second line (issue #44)."""
    logdir = runs_of(tmp_path / "logs", 6, 30_000)
    line = lose_the_session_inside_a_copy(pg_server, logdir, pg_server.new_database("copy"))
    assert "points of this run kept" in line
