"""A store shared by a team (design §1.4): logdirs of several machines in one PostgreSQL server.

Run identity is (source, run path).  The source defaults to the logdir's absolute path; on a
server, a second machine whose logdir has the same path must not write into the first one's
runs (its file states would replace the other machine's points): it is refused until it names
its logdir with ``--source``.  One directory mounted at two paths is one source when named so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.conversion import pipeline
from tbconvert.errors import StoreError
from tbconvert.store.migrate import HEAD_REVISION
from tests.support.children import child_env
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import connect, rows, view_rows, without_run_ids

ROOT = Path(__file__).resolve().parents[2]


def write_logdir(root: Path, scale: float, runs: tuple[str, ...] = ("run_a", "run_b")) -> Path:
    for run in runs:
        write_events(
            root / run / "events.out.tfevents.1.host",
            [
                summary_event(step, 1e9 + step, [simple_value("loss", scale * step)])
                for step in range(40)
            ],
        )
    return root


@pytest.fixture
def on_host(monkeypatch: pytest.MonkeyPatch):
    """Pretend the converter runs on another machine."""

    def switch(name: str) -> None:
        monkeypatch.setattr(pipeline.socket, "gethostname", lambda: name)

    return switch


def scalars_by_source(store: str) -> list[tuple[object, ...]]:
    with connect(store) as conn:
        return rows(
            conn,
            "SELECT r.source, r.host, v.run_path, count(*), sum(v.value) "
            "FROM v_scalars AS v JOIN v_runs AS r ON r.run_id = v.run_id "
            "GROUP BY r.source, r.host, v.run_path ORDER BY 1, 2, 3",
        )


def test_same_path_on_two_machines_is_refused_until_named(
    pg_server, tmp_path: Path, on_host
) -> None:
    store = pg_server.new_database("team")
    logdir = write_logdir(tmp_path / "logs", scale=1.0)
    on_host("gpu1")
    convert(logdir, store)
    before = view_rows(store)

    # gpu2 has its own, different logs at the very same path.
    shutil.rmtree(logdir)
    write_logdir(logdir, scale=-1.0)
    on_host("gpu2")
    with pytest.raises(StoreError, match="written from gpu1") as refused:
        convert(logdir, store)
    assert f"--source gpu2:{logdir}" in str(refused.value)
    assert view_rows(store) == before  # nothing of gpu1's was touched

    summary = convert(logdir, store, source=f"gpu2:{logdir}")
    assert summary.exit_code == 0 and summary.runs_created == 2
    assert scalars_by_source(store) == [
        (str(logdir), "gpu1", "run_a", 40, 780.0),
        (str(logdir), "gpu1", "run_b", 40, 780.0),
        (f"gpu2:{logdir}", "gpu2", "run_a", 40, -780.0),
        (f"gpu2:{logdir}", "gpu2", "run_b", 40, -780.0),
    ]
    # Re-runs from each machine with their own identity add nothing.
    assert convert(logdir, store, source=f"gpu2:{logdir}").total_points == 0


def test_one_directory_mounted_at_two_paths_is_one_source(
    pg_server, tmp_path: Path, on_host
) -> None:
    store = pg_server.new_database("shared")
    first_mount = write_logdir(tmp_path / "mnt_a" / "tb", scale=1.0)
    second_mount = tmp_path / "mnt_b" / "tb"
    shutil.copytree(first_mount, second_mount)  # same bytes, same mtimes
    on_host("gpu1")
    convert(first_mount, store, source="team-tb")
    on_host("gpu2")
    again = convert(second_mount, store, source="team-tb")
    assert again.files_unchanged == 2 and again.total_points == 0 and again.runs_created == 0
    assert [row[:4] for row in scalars_by_source(store)] == [
        ("team-tb", "gpu1", "run_a", 40),
        ("team-tb", "gpu1", "run_b", 40),
    ]


def test_sqlite_store_moved_to_another_machine_keeps_converting(tmp_path: Path, on_host) -> None:
    """A SQLite file is one user's: a new host name (laptops rename themselves) is no reason to
    refuse, and the same logdir keeps its runs."""
    store = str(tmp_path / "mine.db")
    logdir = write_logdir(tmp_path / "logs", scale=1.0)
    on_host("laptop.lan")
    convert(logdir, store)
    on_host("laptop.local")
    write_events(
        logdir / "run_c" / "events.out.tfevents.1.host",
        [summary_event(0, 1e9, [simple_value("loss", 1.0)])],
    )
    summary = convert(logdir, store)
    assert summary.exit_code == 0 and summary.runs_created == 1 and summary.total_points == 1


def test_converters_on_two_machines_at_once_equal_sequential_runs(
    pg_server, tmp_path: Path
) -> None:
    """Several converters, each with its own source, write into one server at the same time."""
    logdirs = [
        write_logdir(
            tmp_path / f"machine{i}" / "logs",
            scale=i + 1.0,
            runs=tuple(f"run_{r}" for r in range(4)),
        )
        for i in range(3)
    ]
    store = pg_server.new_database("together")
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tbconvert",
                "tf",
                "--logdir",
                str(logdir),
                "--store",
                store,
                "--source",
                f"machine{i}",
                "-q",
            ],
            cwd=ROOT,
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, logdir in enumerate(logdirs)
    ]
    for process in processes:
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    sequential = pg_server.new_database("one_by_one")
    for i, logdir in enumerate(logdirs):
        convert(logdir, sequential, source=f"machine{i}")
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(sequential))


def test_cli_on_a_server(pg_server, tmp_path: Path) -> None:
    """The commands a team uses, with a plain postgresql:// URL (the psycopg driver is chosen)."""
    logdir = write_logdir(tmp_path / "logs", scale=1.0)
    store = pg_server.new_database("cli").replace("postgresql+psycopg://", "postgresql://")
    runner = CliRunner()
    created = runner.invoke(cli, ["db", "upgrade", "--store", store])
    assert created.exit_code == 0 and f"empty -> {HEAD_REVISION}" in created.output
    converted = runner.invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", store, "--source", "team", "--json"]
    )
    assert converted.exit_code == 0, converted.output
    assert json.loads(converted.stdout)["points"] == {"scalars": 80}
    listed = runner.invoke(cli, ["runs", "--store", store])
    assert listed.exit_code == 0 and "run_a" in listed.output and "run_b" in listed.output
    for command in (["db", "current"], ["db", "check"]):
        result = runner.invoke(cli, [*command, "--store", store])
        assert result.exit_code == 0, result.output
    assert (
        f"store: {HEAD_REVISION}" in runner.invoke(cli, ["db", "current", "--store", store]).output
    )


def test_missing_database_and_unreachable_server_are_one_line_errors(
    pg_server, tmp_path: Path
) -> None:
    logdir = write_logdir(tmp_path / "logs", scale=1.0)
    runner = CliRunner()
    missing = runner.invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", pg_server.url("no_such_db")]
    )
    assert missing.exit_code == 1
    assert "database does not exist" in missing.output and "createdb" in missing.output
    closed = runner.invoke(
        cli,
        ["tf", "--logdir", str(logdir), "--store", "postgresql://someone:secret@127.0.0.1:1/tb"],
    )
    assert closed.exit_code == 1
    assert "cannot connect to the PostgreSQL server" in closed.output
    assert "secret" not in closed.output  # the password never reaches the terminal
    assert len(closed.output.strip().splitlines()) == 1


def test_empty_source_name_is_a_usage_error(tmp_path: Path) -> None:
    logdir = write_logdir(tmp_path / "logs", scale=1.0)
    store = tmp_path / "never.db"
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(store), "--source", " "]
    )
    assert result.exit_code == 2 and "source name is empty" in result.output
    assert not store.exists()


def test_readme_team_commands_run_against_a_server(pg_server, tmp_path: Path) -> None:
    """docs/cli.md's commands, with its example server and logdir swapped for real ones."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("## Sharing a store with your team", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    example_url = "postgresql://tb@db.example.org/tb"
    assert example_url in block and "--logdir /data/tb" in block
    url = pg_server.new_database("readme").replace("postgresql+psycopg://", "postgresql://")
    logdir = write_logdir(tmp_path / "tb", scale=1.0)
    # Server administration and installation are the reader's; the rest runs as written.
    admin, machines = block.split("# On every machine that has logs.", 1)
    commands = [
        line
        for line in machines.splitlines()
        if line.startswith(("export ", "tbconvert ", "psql "))
    ]
    assert len(commands) == 4
    # The admin's grant (the keys checked per chunk, writing.pg_foreign_keys) is valid as written.
    (grant,) = [line for line in admin.splitlines() if "GRANT" in line]
    pg_server.execute("CREATE ROLE tb LOGIN")
    pg_server.execute(grant.split("'")[1])
    allowed = "SELECT has_parameter_privilege('tb', 'session_replication_role', 'SET')"
    assert pg_server.execute(allowed) == [(True,)]
    script = (
        "\n".join(["set -e", *commands]).replace(example_url, url).replace("/data/tb", str(logdir))
    )
    bindir = Path(sys.executable).parent
    psql = shutil.which("psql") or str(pg_server.bindir / "psql")
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{bindir}:{Path(psql).parent}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert "run_a" in result.stdout and "run_b" in result.stdout
    assert "(2 rows)" in result.stdout  # psql: the last loss of each of the 2 runs
