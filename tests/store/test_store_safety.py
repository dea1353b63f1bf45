"""A database that is not ours is refused byte for byte unchanged, by every command; a store on
read-only media can still be read by every reading command (design §9, issue #13 item 8)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.errors import StoreError
from tests.support.eventfiles import simple_value, summary_event, write_events


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file of a directory, by name, with the sha256 of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
    }


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_events(
        root / "run" / "events.out.tfevents.1.host",
        [summary_event(step, 1e9 + step, [simple_value("loss", step)]) for step in range(20)],
    )
    return root


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    """Someone else's SQLite database, in the default (rollback journal) mode."""
    directory = tmp_path / "theirs"
    directory.mkdir()
    path = directory / "app.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.execute("INSERT INTO notes VALUES ('mine')")
    raw.commit()
    raw.close()
    return path


COMMANDS = [
    ["tf", "--logdir", "{logdir}"],
    ["tf", "--logdir", "{logdir}", "--dry-run"],
    ["runs"],
    ["show", "run"],
    ["export", "scalars", "-o", "-"],
    ["db", "current"],
    ["db", "upgrade"],
    ["db", "check"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: " ".join(command[:2]))
def test_a_database_not_ours_is_refused_unchanged(
    foreign: Path, logdir: Path, command: list[str]
) -> None:
    before = fingerprint(foreign.parent)
    args = [part.format(logdir=logdir) for part in command]
    result = CliRunner().invoke(cli, [*args, "--store", str(foreign)])
    assert result.exit_code != 0, result.output
    if "--dry-run" not in args:
        assert "not a tbconvert store" in result.output
    assert fingerprint(foreign.parent) == before  # not even switched to WAL
    with sqlite3.connect(foreign) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_open_store_refuses_a_database_not_ours_unchanged(foreign: Path) -> None:
    from tbconvert import open_store

    before = fingerprint(foreign.parent)
    with pytest.raises(StoreError, match="not a tbconvert store"):
        open_store(foreign)
    assert fingerprint(foreign.parent) == before


@pytest.fixture
def read_only_store(
    logdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A converted store (WAL mode, no -wal or -shm left) in a read-only directory, the file
    chmod 444, seen through a read-only bind mount: read-only media even for root.  Where
    mounting is not permitted, the fallback the code takes is tested instead: the store
    reported unwritable (root ignores file modes)."""
    source = tmp_path / "media"
    source.mkdir()
    store = source / "store.db"
    convert(logdir, store)
    assert sorted(path.name for path in source.iterdir()) == ["store.db"]
    with sqlite3.connect(store) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store.chmod(0o444)
    source.chmod(0o555)
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True)
    if bound.returncode == 0:
        remounted = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(mounted)], capture_output=True
        )
        try:
            assert remounted.returncode == 0, remounted.stderr
            with pytest.raises(OSError):
                (mounted / "probe").touch()
            yield mounted / "store.db"
        finally:
            subprocess.run(["umount", "--lazy", str(mounted)], check=True)
            source.chmod(0o755)
        return
    real_access = os.access

    def access(path: object, mode: int, *args: object, **kwargs: object) -> bool:
        if mode & os.W_OK and str(path).startswith(str(source)):
            return False
        return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    try:
        yield store
    finally:
        source.chmod(0o755)


@pytest.mark.parametrize(
    "command",
    [["runs", "--json"], ["show", "run", "--json"], ["export", "scalars", "-o", "-"]],
    ids=["runs", "show", "export"],
)
def test_a_store_on_read_only_media_can_be_read(read_only_store: Path, command: list[str]) -> None:
    before = fingerprint(read_only_store.parent)
    result = CliRunner().invoke(cli, [*command, "--store", str(read_only_store)])
    assert result.exit_code == 0, result.output
    assert "loss" in result.stdout or "run" in result.stdout
    assert fingerprint(read_only_store.parent) == before


def test_open_store_reads_read_only_media(read_only_store: Path) -> None:
    from tbconvert import open_store

    with open_store(read_only_store) as store:
        assert len(store.scalars(run="run", tag="loss")) == 20


def test_converting_into_read_only_media_is_one_line_error(
    read_only_store: Path, logdir: Path
) -> None:
    write_events(
        logdir / "more" / "events.out.tfevents.1.host",
        [summary_event(0, 1e9, [simple_value("loss", 1.0)])],
    )
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(read_only_store)]
    )
    assert result.exit_code == 1
    assert "read-only" in result.output and len(result.output.strip().splitlines()) == 1
