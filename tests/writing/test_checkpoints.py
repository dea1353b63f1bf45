"""The writer's log is copied into the database file by a thread (``writing.sqlite_checkpoints``).

The writer's connection no longer checkpoints at SQLite's default threshold; a
``Checkpointer`` does it after each commit of points, from a connection of its own.  These
tests look at the database file itself (a copy of it without its ``-wal``), which holds a
committed row only once a checkpoint copied it there.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tbconvert import convert
from tbconvert.store.engine import create_store_engine, store_url
from tbconvert.store.migrate import ensure_schema
from tbconvert.writing.sqlite_checkpoints import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer
from tbconvert.writing.writer import StoreWriter
from tests.support.eventfiles import write_tbx_scalars


def _in_file_alone(database: Path, tmp_path: Path) -> int:
    """Rows of ``t`` in the database file without its log."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(database, copy)
    with sqlite3.connect(copy) as reader:
        return int(reader.execute("SELECT count(*) FROM t").fetchone()[0])


def _wal_database(path: Path) -> sqlite3.Connection:
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # only the Checkpointer copies
    writer.execute("CREATE TABLE t (x)")
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the table itself is in the file
    return writer


def test_committed_rows_reach_the_database_file_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    writer = _wal_database(path)
    checkpointer = Checkpointer(str(path))
    writer.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(1000)])
    assert _in_file_alone(path, tmp_path) == 0  # committed, but only in the log

    checkpointer.after_commit()
    checkpointer.close()  # copies what was asked before it stops

    assert checkpointer.error is None
    assert checkpointer.checkpoints == 1
    assert _in_file_alone(path, tmp_path) == 1000
    writer.close()


def test_nothing_asked_starts_no_thread_and_a_broken_file_stops_only_the_thread(
    tmp_path: Path,
) -> None:
    idle = Checkpointer(str(tmp_path / "never.db"))
    idle.close()
    assert idle.checkpoints == 0
    assert not (tmp_path / "never.db").exists()

    broken = tmp_path / "broken.db"
    broken.write_bytes(b"not a database" * 1000)
    checkpointer = Checkpointer(str(broken))
    checkpointer.after_commit()
    checkpointer.close()
    checkpointer.after_commit()  # after the thread stopped: nothing waits, nothing fails
    assert isinstance(checkpointer.error, sqlite3.DatabaseError)
    assert checkpointer.checkpoints == 0


def test_the_writer_asks_after_commits_of_points_only(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    engine = create_store_engine(store_url(store))
    ensure_schema(engine)
    writer = StoreWriter(engine)
    try:
        raw = writer.conn.connection.dbapi_connection
        assert raw is not None
        pages = raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        assert pages == WRITER_AUTOCHECKPOINT_PAGES
        with writer.transaction():
            writer.identities.run_id("src", "run", host="h", logdir="/l", group_path="", name="run")
        checkpointer = getattr(writer.bulk, "_checkpointer", None)
        assert checkpointer is not None and checkpointer._thread is None
    finally:
        writer.close()
        engine.dispose()


def test_a_conversion_is_checkpointed_by_the_thread_and_leaves_one_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[Checkpointer] = []
    close = Checkpointer.close

    def recorded(self: Checkpointer) -> None:
        close(self)
        closed.append(self)

    monkeypatch.setattr(Checkpointer, "close", recorded)
    # Small groups: several commits, each followed by a checkpoint request.
    for number in range(6):
        points = [("loss", step, 1_700_000_000.0 + step, step / 7) for step in range(400)]
        write_tbx_scalars(tmp_path / "logs" / f"run{number}", points)
    store = tmp_path / "store.db"
    convert(str(tmp_path / "logs"), store=str(store), progress=False, chunk_points=500)

    assert len(closed) == 1
    assert closed[0].error is None and closed[0].checkpoints >= 1
    assert not Path(f"{store}-wal").exists()
    with sqlite3.connect(store) as reader:
        assert reader.execute("SELECT count(*) FROM scalars").fetchone()[0] == 6 * 400
