"""The command line: help and examples everywhere, stdout for data, exit codes 0/1/2/3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from tensorboardX import SummaryWriter

from tbconvert.cli import cli
from tests.support.eventfiles import write_tbx_run


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*prefix, name)))
    return found


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_tbx_run(root, "run_a")
    write_tbx_run(root, "run_b")
    return root


@pytest.mark.parametrize("path", _commands(cli))
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output
    short = CliRunner().invoke(cli, [*path, "-h"])
    assert short.exit_code == 0


def test_version() -> None:
    from tbconvert import __version__

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_tf_json_on_stdout_summary_on_stderr(logdir: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(store), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["points"] == {"scalars": 40}
    assert summary["runs"] == {"total": 2, "created": 2, "extended": 0}
    assert "Converted" in result.stderr
    again = CliRunner().invoke(
        cli, ["tensorboard", "--logdir", str(logdir), "--store", str(store), "--json"]
    )
    assert again.exit_code == 0
    second = json.loads(again.stdout)
    assert second["points"] == {} and second["files"]["unchanged"] == 2


def test_quiet_prints_nothing(logdir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(tmp_path / "s.db"), "-q"]
    )
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr == ""


def test_dry_run_writes_nothing(logdir: Path, tmp_path: Path) -> None:
    store = tmp_path / "never.db"
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(store), "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)["plan"]
    assert [entry["action"] for entry in plan] == ["new", "new"]
    assert not store.exists()
    assert list(tmp_path.glob("never.db*")) == []


def test_missing_logdir_is_one_line_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(tmp_path / "nope"), "--store", str(tmp_path / "s.db")]
    )
    assert result.exit_code == 1
    assert str(tmp_path / "nope") in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_store_in_missing_directory_exit_1(logdir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(tmp_path / "no" / "dir" / "s.db")]
    )
    assert result.exit_code == 1
    assert "does not exist" in result.stderr and "mkdir" in result.stderr
    assert not (tmp_path / "no").exists()


def test_store_that_is_not_sqlite_exit_1(logdir: Path, tmp_path: Path) -> None:
    store = tmp_path / "notes.txt"
    store.write_bytes(b"these are my notes, not a database\n" * 200)
    before = store.read_bytes()
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", str(store)])
    assert result.exit_code == 1
    assert "not a SQLite database" in result.stderr
    assert store.read_bytes() == before


def test_unknown_plugin_is_usage_error(logdir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["tf", "--logdir", str(logdir), "--store", str(tmp_path / "s.db"), "--plugins", "nonsense"],
    )
    assert result.exit_code == 2
    assert "nonsense" in result.stderr


def test_damaged_file_exit_3_names_file_and_offset(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_tbx_run(root, "run_a", steps=30)
    (event_file,) = (root / "run_a").iterdir()
    data = bytearray(event_file.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    event_file.write_bytes(bytes(data))
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(root), "--store", str(tmp_path / "s.db"), "--json"]
    )
    assert result.exit_code == 3, result.stderr
    summary = json.loads(result.stdout)
    assert summary["damaged_records"] == 1
    assert summary["points"]["scalars"] == 29
    assert "at byte" in summary["problems"][0] and event_file.name in summary["problems"][0]


def test_orphans_are_warned_one_by_one(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    write_tbx_run(root, "run_a")
    with SummaryWriter(str(root), filename_suffix=".one") as writer:
        writer.add_scalar("x", 1.0, 0)
    with SummaryWriter(str(root), filename_suffix=".two") as writer:
        writer.add_scalar("x", 1.0, 0)
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(root), "--store", str(tmp_path / "s.db")]
    )
    assert result.exit_code == 0
    orphan_lines = [
        line for line in result.stderr.splitlines() if line.startswith("warning: orphan")
    ]
    assert len(orphan_lines) == 2
    assert "orphans:  2 event files" in result.stderr
    assert any(".one" in line for line in orphan_lines)
    assert any(".two" in line for line in orphan_lines)


def test_runs_lists_the_store(logdir: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", store, "-q"])
    result = CliRunner().invoke(cli, ["runs", "--store", store, "--json"])
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [run["run_path"] for run in runs] == ["run_a", "run_b"]
    assert [run["scalar_points"] for run in runs] == [20, 20]
    text_result = CliRunner().invoke(cli, ["runs", "--store", store])
    assert "run_a" in text_result.stdout


def test_runs_without_store_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 1 and "no store" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_db_commands(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    upgraded = CliRunner().invoke(cli, ["db", "upgrade", "--store", store])
    assert upgraded.exit_code == 0 and "empty ->" in upgraded.stdout
    current = CliRunner().invoke(cli, ["db", "current", "--store", store])
    assert current.exit_code == 0
    revision = current.stdout.split()[1]
    assert current.stdout.split()[3] == revision
    checked = CliRunner().invoke(cli, ["db", "check", "--store", store])
    assert checked.exit_code == 0 and "no drift" in checked.stdout


def test_store_from_environment(logdir: Path, tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "env.db"
    monkeypatch.setenv("TBCONVERT_STORE", str(store))
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "-q"])
    assert result.exit_code == 0 and store.exists()


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tbconvert", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0
    assert "tf" in result.stdout


def test_package_level_api_stays_callable() -> None:
    import tbconvert
    from tbconvert import convert, watch
    from tbconvert.query.store import open_store

    # The lazy package attributes are the library's functions, not wrappers or stand-ins.
    assert (tbconvert.convert, tbconvert.watch, tbconvert.open_store) == (
        convert,
        watch,
        open_store,
    )
    with pytest.raises(AttributeError, match="no attribute 'conversion_of'"):
        _ = tbconvert.conversion_of


@pytest.mark.parametrize(("progress", "shown"), [(True, True), (False, False), (None, False)])
def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal(
    logdir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    progress: bool | None,
    shown: bool,
) -> None:
    """The bar (tqdm's, on stderr) shows when asked for, or by default when stderr is a
    terminal; captured stderr is none, so the default shows nothing there."""
    import tbconvert

    tbconvert.convert(logdir, tmp_path / "store.db", progress=progress)
    out, err = capfd.readouterr()
    assert out == ""
    assert ("converting" in err) == shown
    if shown:
        assert "B/s" in err or "/s]" in err


def test_the_command_line_leaves_numpy_no_blas_threads_unless_asked() -> None:
    # OpenBLAS starts a thread per core as NumPy is imported, which only spins for tbconvert:
    # the command line sets one thread (Linux lists a process's threads in /proc).
    code = (
        "import os, tbconvert.cli, numpy; "
        "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])"
    )
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}

    def threads(**extra: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-c", code],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()

    assert threads() == ["1", "1"]
    assert threads(OPENBLAS_NUM_THREADS="2") == ["2", "2"]  # the user's setting is kept


def test_the_tf_command_leaves_what_its_imports_made_out_of_garbage_collection(
    tmp_path: Path,
) -> None:
    # A full collection would scan the tens of thousands of objects SQLAlchemy makes; the
    # command imports them with the collector off, then freezes them (in a process of its
    # own here: freezing is for the whole process).  The collector is on again afterwards.
    (tmp_path / "logs").mkdir()
    code = (
        "import gc, sys\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: collections.append(phase))\n"
        "from tbconvert.cli import cli\n"
        "before = len(collections)\n"
        "try:\n"
        f"    cli.main(['tf', '--logdir', {str(tmp_path / 'logs')!r}, "
        f"'--store', {str(tmp_path / 's.db')!r}, '-q'])\n"
        "except SystemExit as end:\n"
        "    print(end.code, gc.get_freeze_count(), int(gc.isenabled()), "
        "'sqlalchemy' in sys.modules, len(collections) - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    exit_code, frozen, enabled, imported, collections = done.stdout.split()
    assert exit_code == "0" and (tmp_path / "s.db").exists()
    assert int(frozen) > 20_000 and enabled == "1" and imported == "True"
    # Without the collector off, importing SQLAlchemy alone runs dozens of collections.
    assert int(collections) < 10


def test_the_console_script_ends_with_its_output_whole_and_its_exit_code(
    logdir: Path, tmp_path: Path
) -> None:
    # ``main`` ends the process without the interpreter's teardown: what a command printed
    # must still be whole on a pipe, its exit code kept (3: a damaged record skipped), the
    # exit handlers run, and the store closed with its log folded in.
    events = next((logdir / "run_a").iterdir())
    data = bytearray(events.read_bytes())
    data[len(data) // 2] ^= 0x55
    events.write_bytes(bytes(data))
    code = (
        "import atexit, sys\n"
        "atexit.register(print, 'exit handler ran', file=sys.stderr)\n"
        "from tbconvert.cli import main\n"
        "main()\n"
    )
    store = tmp_path / "s.db"
    arguments = ["tf", "--logdir", str(logdir), "--store", str(store), "--json"]
    done = subprocess.run(
        [sys.executable, "-c", code, *arguments],
        capture_output=True,
        text=True,
    )
    summary = json.loads(done.stdout)
    assert done.returncode == 3 and summary["damaged_records"] == 1
    assert summary["points"]["scalars"] == 39  # two runs of 20 steps, one record damaged
    assert done.stderr.rstrip().endswith("exit handler ran")
    assert store.exists() and not Path(f"{store}-wal").exists()
    usage = subprocess.run(
        [sys.executable, "-m", "tbconvert", "tf", "--no-such-option"],
        capture_output=True,
        text=True,
    )
    assert usage.returncode == 2 and "No such option" in usage.stderr
