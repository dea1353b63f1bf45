"""Bulk writes into a SQLite store: driver-level ``executemany`` of ``INSERT ... ON CONFLICT
DO NOTHING``, a hundred rows a statement; the block path's packed scalars go through a narrower
one.  Foreign keys are not enforced on the converter's own connection (see
:meth:`SqliteBulk.on_connect`); the log is copied into the file by a thread
(``sqlite_checkpoints``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Connection, Engine

from tbconvert.rows import POINT_COLUMNS, InsertRows, PackedRows, Row, RowBatch
from tbconvert.store.engine import sqlite_path
from tbconvert.writing.bulk import executemany, nothing
from tbconvert.writing.sqlite_checkpoints import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer
from tbconvert.writing.statements import Statements, insert_many


class SqliteBulk:
    """Bulk writes into a SQLite store."""

    shared = False

    def __init__(self, engine: Engine) -> None:
        """Args: the store's engine."""
        self._path = sqlite_path(str(engine.url))
        self._checkpointer = None if self._path is None else Checkpointer(self._path)
        self.waiting_on_server: Callable[[], None] = nothing  # never: no server

    def on_connect(self, dbapi: Any) -> None:
        """Every parent row a point refers to (series, file) is made by this writer, in the
        transaction that inserts the point, so enforcing the keys here would only check the
        writer's own ids, at a sixth of the insert's cost.  The
        keys stay declared and every other connection enforces them; this one is closed,
        never pooled (:meth:`on_close`).  Set outside a transaction: SQLite ignores the
        pragma inside one.  The log is copied into the database by a thread
        (:mod:`tbconvert.writing.sqlite_checkpoints`), not by this connection's commits."""
        dbapi.execute("PRAGMA foreign_keys = OFF")
        dbapi.execute(f"PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}")

    def after_commit(self) -> None:
        """A transaction of points committed: have its pages copied into the file."""
        if self._checkpointer is not None:
            self._checkpointer.after_commit()

    def on_close(self, conn: Connection) -> None:
        """Stop checkpointing; discard the connection rather than pool it with foreign keys
        off (SQLite checkpoints what is left when the last connection closes)."""
        if self._checkpointer is not None:
            self._checkpointer.close()
        conn.invalidate()

    def text_value(self, value: str | None) -> str | None:
        """SQLite keeps any text as it is."""
        return value

    def lock_runs(self, statements: Statements, source: str, run_paths: Collection[str]) -> None:
        """Nothing to do: SQLite's write lock, taken when the transaction begins, covers it."""

    def notices(self) -> list[str]:
        """Nothing to tell: the converter's own connection never checks the keys."""
        return []

    def is_busy(self) -> bool:
        """True when another process holds the store's write lock right now."""
        if self._path is None:
            return False
        try:
            probe = sqlite3.connect(self._path, timeout=0, isolation_level=None)
        except sqlite3.Error:
            return False  # the real connection reports the problem properly
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()

    def insert_points(self, dbapi: Any, table: str, rows: InsertRows, fresh: bool = False) -> int:
        """Insert point rows, ignoring rows already stored from the same bytes (whether
        ``fresh`` or not: SQLite checks the key either way); returns how many were new."""
        into = f"INSERT INTO {table} ({', '.join(POINT_COLUMNS[table])})"
        whole: Iterable[Row] = rows
        count = len(rows)
        inserted = 0
        if isinstance(rows, (PackedRows, RowBatch)) and (blocks := rows.block_count()):
            # The block path's rows, (series_id, step, [file_id,] record_offset, wall_time,
            # value): value index 0, and one file's id, are literals of the statement.
            file_id = str(int(rows.file_id)) if isinstance(rows, PackedRows) else "?"
            values = f"(?, ?, {file_id}, ?, 0, ?, ?)"
            inserted = insert_many(dbapi, into, values, rows.block_rows(), blocks)
            whole, count = rows.general_rows(), count - blocks
        if not count:
            return inserted
        marks = ", ".join(["?"] * len(POINT_COLUMNS[table]))
        return inserted + insert_many(dbapi, into, f"({marks})", whole, count)

    def insert_blobs(self, dbapi: Any, blobs: Sequence[tuple[str, int, bytes]]) -> None:
        """Insert (sha256, size, data) rows, ignoring stored ones."""
        executemany(
            dbapi,
            "INSERT INTO blobs (sha256, size, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            blobs,
        )
