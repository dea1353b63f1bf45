"""Paths and URLs as a shell gives them (design §2), empty logdirs (design §9), and what
``tbconvert runs`` names: ``~`` and ``$VARIABLES`` expanded in ``--logdir``, ``--store``,
``-o``, ``TBCONVERT_STORE`` and the Python API; a logdir with no event files is a warning.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tensorboardX import SummaryWriter

import tbconvert
from tbconvert.cli import cli


def write_run(logdir: Path, run: str, steps: int = 5) -> None:
    with SummaryWriter(str(logdir / run)) as writer:
        for step in range(steps):
            writer.add_scalar("loss", 1.0 / (step + 1), step)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``~`` is ``tmp_path/home``, which holds ``logs/run_a``; ``$RUNS`` names ``logs``."""
    home = tmp_path / "home"
    write_run(home / "logs", "run_a")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RUNS", "logs")
    return home


def points(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(conn.execute("SELECT count(*) FROM v_scalars").fetchone()[0])


def test_api_expands_tilde_and_variables(home: Path) -> None:
    summary = tbconvert.convert("~/$RUNS", store="~/x.db", progress=False)
    assert summary.exit_code == 0 and summary.logdir == str(home / "logs")
    assert points(home / "x.db") == 5
    with tbconvert.open_store("~/x.db") as store:
        assert [run["run_path"] for run in store.runs()] == ["run_a"]
    with tbconvert.open_store("$HOME/x.db") as store:
        assert len(store.runs()) == 1
    with tbconvert.open_store("sqlite:///~/x.db") as store:
        assert len(store.runs()) == 1
    assert not Path("~").exists() and not Path("$HOME").exists()


def test_cli_expands_logdir_store_output_and_environment(home: Path) -> None:
    converted = invoke("tf", "--logdir", "~/$RUNS", "--store", "$HOME/y.db", "-q")
    assert converted.exit_code == 0, converted.output
    assert points(home / "y.db") == 5
    listed = invoke("runs", env={"TBCONVERT_STORE": "~/y.db"})
    assert listed.exit_code == 0, listed.output
    assert "run_a" in listed.stdout
    exported = invoke("export", "scalars", "--store", "~/y.db", "-o", "~/loss.csv")
    assert exported.exit_code == 0, exported.output
    assert len((home / "loss.csv").read_text().splitlines()) == 6


@pytest.mark.parametrize("content", ["nothing", "no-event-files"])
def test_a_logdir_without_event_files_is_a_warning(tmp_path: Path, content: str) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    if content == "no-event-files":
        (logdir / "run_a").mkdir()
        (logdir / "run_a" / "notes.txt").write_text("not an event file")
    result = invoke("tf", "--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 0, result.output
    assert f"warning: no event files under {logdir}" in result.stderr
    summary = tbconvert.convert(logdir, store=tmp_path / "s.db", progress=False)
    assert summary.warnings == [f"no event files under {logdir}"]


def test_a_logdir_with_event_files_has_no_such_warning(home: Path) -> None:
    summary = tbconvert.convert(home / "logs", store=home / "z.db", progress=False)
    assert not any("no event files" in warning for warning in summary.warnings)


def test_runs_shows_ids_and_sources_when_there_are_several(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    write_run(tmp_path / "first", "run_a")
    write_run(tmp_path / "second", "run_a")
    tbconvert.convert(tmp_path / "first", store=store, source="first", progress=False)
    one = invoke("runs", "--store", store).stdout.splitlines()
    assert one[0].split()[:3] == ["id", "run", "group"]
    assert one[1].split()[:2] == ["1", "run_a"]
    tbconvert.convert(tmp_path / "second", store=store, source="second", progress=False)
    two = invoke("runs", "--store", store).stdout.splitlines()
    assert two[0].split()[:4] == ["id", "run", "source", "group"]
    with sqlite3.connect(store) as conn:
        ids = dict(conn.execute("SELECT source, run_id FROM v_runs").fetchall())
    rows = sorted(line.split()[:3] for line in two[1:])
    assert rows == sorted(
        [[str(ids["first"]), "run_a", "first"], [str(ids["second"]), "run_a", "second"]]
    )
