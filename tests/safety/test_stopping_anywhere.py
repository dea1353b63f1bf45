"""Ctrl-C (SIGINT) or SIGTERM at any moment of a command (its start-up and imports, before
a conversion, during discovery, during writing, in a command that reads) ends it with one line,
exit 130 / 143, no traceback and no click ``Aborted!`` (SPEC §2); the next run converts as a
clean one would.

Each signal lands at a point the code reaches (``tests/support/signalpoints.py``): the
process signals itself as it imports a module or calls a function, never after a sleep.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.children import child_env
from tests.support.eventfiles import write_tbx_run
from tests.support.snapshots import comparable_rows

# Slow (a command in a subprocess per case): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = child_env()
SIGNALS = {"SIGINT": 130, "SIGTERM": 143}
# Where the signal lands in `tbconvert tf`, and the start of the line that says so.
WHILE_CONVERTING = {
    "start-up": ("click", "stopped by {}: nothing half-made is kept"),
    "command-line import": ("tbconvert.cli.convert", "stopped by {}: nothing half-made is kept"),
    "library import": (
        "tbconvert.conversion.pipeline",
        "stopped by {}: nothing half-made is kept",
    ),
    "discovery": (
        "tbconvert.reading.walk:Walker.walk",
        "stopped by {} after the current transaction",
    ),
    "writing": (
        "tbconvert.writing.writer:StoreWriter.transaction",
        "stopped by {} after the current transaction",
    ),
    "summary": (
        "tbconvert.cli.convert:report_summary",
        "stopped by {}: nothing half-made is kept",
    ),
}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("anywhere") / "logs"
    for run in ("run_a", "run_b", "run_c"):
        write_tbx_run(root, run)
    return root


def signalled(name: str, point: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.signalpoints", name, point, *arguments],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], name: str, start: str) -> None:
    assert result.returncode == SIGNALS[name], result.stderr
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(start.format(name)), line
    assert line.endswith("run the same command again to continue"), line


@pytest.mark.parametrize("name", sorted(SIGNALS))
@pytest.mark.parametrize("moment", sorted(WHILE_CONVERTING))
def test_a_signal_at_any_moment_of_a_conversion(
    logdir: Path, tmp_path: Path, moment: str, name: str
) -> None:
    point, start = WHILE_CONVERTING[moment]
    store = tmp_path / "s.db"
    result = signalled(name, point, "tf", "--logdir", str(logdir), "--store", str(store), "-q")
    assert_one_line(result, name, start)
    convert(logdir, store, progress=False)
    clean = tmp_path / "clean.db"
    convert(logdir, clean, progress=False)
    assert comparable_rows(str(store)) == comparable_rows(str(clean))


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_a_signal_in_a_command_that_reads(logdir: Path, tmp_path: Path, name: str) -> None:
    store = tmp_path / "s.db"
    convert(logdir, store, progress=False)
    result = signalled(name, "tbconvert.query.store", "runs", "--store", str(store))
    assert_one_line(result, name, "stopped by {}: nothing half-made is kept")
    assert result.stdout == ""


def test_a_second_sigterm_stops_at_once_with_sigterms_code(logdir: Path, tmp_path: Path) -> None:
    """The first asks for a stop after the transaction; the second, sent as the writer's
    commit begins, stops at once: still 143, as SIGTERM's."""
    store = tmp_path / "s.db"
    script = (
        "import os, runpy, signal, sys\n"
        "from tbconvert.writing import writer\n"
        "original = writer.StoreWriter.transaction\n"
        "def twice(self):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return original(self)\n"
        "writer.StoreWriter.transaction = twice\n"
        "sys.argv = ['tbconvert', *sys.argv[1:]]\n"
        "runpy.run_module('tbconvert', run_name='__main__', alter_sys=True)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "tf", "--logdir", str(logdir), "--store", str(store)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("stopped at once: the transaction under way was rolled back")
