"""A SQLite store on a disk that fills up mid-conversion (design §9): a size-limited tmpfs
mounted by the test (as root, as CI runs).  One clear line naming the device and what is
kept, exit 1, a store that passes SQLite's integrity check, and a next run (once there is
room) that completes it exactly."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert.cli import cli
from tests.support.eventfiles import scalar_events, write_events
from tests.support.snapshots import view_rows, without_run_ids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_one_line_a_sound_store_and_the_next_run_completes_it(
    tmp_path: Path, small_disk: Path
) -> None:
    logdir = tmp_path / "logs"
    events = scalar_events("loss", range(20_000))
    for run in range(6):
        write_events(logdir / f"run{run}" / "events.out.tfevents.1.h", events)
    store = small_disk / "runs.db"
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", str(store)])
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert f"no space left on {small_disk}: " in line and "points of this run kept" in line
    assert "free some space and run again" in line
    with closing(sqlite3.connect(store)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = conn.execute("SELECT count(*) FROM v_scalars").fetchone()[0]
    assert f"{kept:,} points of this run kept" in line
    # Room again: the next run completes the store, as a clean conversion makes it.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    again = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", str(store)])
    assert again.exit_code == 0, again.output
    clean = tmp_path / "clean.db"
    assert (
        CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", str(clean)]).exit_code
        == 0
    )
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(clean))
