"""A store on read-only media, or in a directory the user cannot write, can still be read
(SPEC §9): SQLite's WAL wants a ``-shm`` file beside the store, which such a directory cannot
get.  Read commands give what they give on the writable store; a conversion into it fails in
one line; nothing is created beside it.

Root ignores file modes, so as root the directory is made read-only for real: a read-only
bind mount of it, in a mount namespace of the command's own (``unshare -m``), which ends
with the command.  Any other user gets a directory without write permission.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.children import child_env
from tests.support.eventfiles import write_tbx_run

# Slow (a command in a subprocess, in a mount namespace, per read): `make test-fast` leaves it
# out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = child_env()
READS = [
    ["runs", "--json"],
    ["show", "run_a", "--json"],
    ["hparams", "--format", "json"],
    ["export", "scalars", "-o", "-"],
    ["export", "params", "-o", "-"],
    ["query", "SELECT run_path, tag, step, value FROM v_scalars ORDER BY 1, 2, 3", "-q"],
]


def tbconvert(arguments: list[str], read_only: Path | None = None) -> subprocess.CompletedProcess:
    """Run the command line, with ``read_only`` (a directory) unwritable while it runs."""
    command = [sys.executable, "-m", "tbconvert", *arguments]
    if read_only is not None and os.geteuid() == 0:
        mount = f"mount --bind {read_only} {read_only} && mount -o remount,ro,bind {read_only}"
        command = ["unshare", "-m", "sh", "-c", f'{mount} && exec "$@"', "sh", *command]
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.fixture
def read_only(tmp_path: Path) -> Path:
    """An empty directory that ``tbconvert(..., read_only=it)`` cannot write."""
    directory = tmp_path / "media"
    directory.mkdir()
    if os.geteuid() == 0:
        if (
            shutil.which("unshare") is None
            or subprocess.run(
                ["unshare", "-m", "mount", "--bind", str(directory), str(directory)],
                capture_output=True,
            ).returncode
        ):
            pytest.skip("root here cannot make a read-only bind mount (unshare -m)")
    else:
        directory.chmod(0o555)
    return directory


def converted(tmp_path: Path, directory: Path) -> str:
    logs = tmp_path / "logs"
    write_tbx_run(logs, "run_a")
    write_tbx_run(logs, "run_b", steps=5)
    store = directory / "s.db"
    if os.geteuid() != 0:
        directory.chmod(0o755)
    result = tbconvert(["tf", "--logdir", str(logs), "--store", str(store)])
    if os.geteuid() != 0:
        directory.chmod(0o555)
    assert result.returncode == 0, result.stderr
    return str(store)


def test_read_commands_read_a_store_in_a_read_only_directory(
    tmp_path: Path, read_only: Path
) -> None:
    store = converted(tmp_path, read_only)
    assert sorted(os.listdir(read_only)) == ["s.db"]  # the last writer removed -wal and -shm
    for arguments in READS:
        writable = tbconvert([*arguments, "--store", store])
        assert writable.returncode == 0, writable.stderr
        result = tbconvert([*arguments, "--store", store], read_only=read_only)
        assert result.returncode == 0, (arguments, result.stderr)
        assert result.stdout == writable.stdout and result.stdout.strip()
    assert sorted(os.listdir(read_only)) == ["s.db"]


def test_converting_into_it_fails_in_one_line(tmp_path: Path, read_only: Path) -> None:
    store = converted(tmp_path, read_only)
    write_tbx_run(tmp_path / "logs", "run_c")
    result = tbconvert(["tf", "--logdir", str(tmp_path / "logs"), "--store", store], read_only)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert store in line and "read-only" in line
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT run_path FROM runs ORDER BY 1").fetchall() == [
            ("run_a",),
            ("run_b",),
        ]


def test_commits_still_in_the_write_ahead_log_are_read(tmp_path: Path, read_only: Path) -> None:
    """A store copied with its -wal and -shm (its writer still open) is not read as immutable,
    which would miss the commits only the -wal holds."""
    store = converted(tmp_path, read_only)
    if os.geteuid() != 0:
        read_only.chmod(0o755)
    writer = sqlite3.connect(store)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE runs SET run_path = run_path || '_renamed'")
    writer.commit()
    try:
        assert {"s.db-wal", "s.db-shm"} <= set(os.listdir(read_only))
        if os.geteuid() != 0:
            read_only.chmod(0o555)
        result = tbconvert(["runs", "--json", "--store", store], read_only)
    finally:
        writer.close()
    assert result.returncode == 0, result.stderr
    paths = sorted(run["run_path"] for run in json.loads(result.stdout))
    assert paths == ["run_a_renamed", "run_b_renamed"]
