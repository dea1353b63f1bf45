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

from tbconvert.rows import POINT_COLUMNS, FileRows, InsertRows, Row
from tbconvert.store.engine import sqlite_path
from tbconvert.writing.bulk import executemany, nothing
from tbconvert.writing.sqlite_checkpoints import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer
from tbconvert.writing.statements import Statements, insert_many

# Blobs larger than this are written in pieces of this size.
BLOB_PIECE = 4 << 20


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
        if packed := rows.packed_count():
            # The block path's rows, (series_id, step, [file_id,] record_offset, wall_time,
            # value): value index 0, and one file's id, are literals of the statement.
            file_id = str(int(rows.file_id)) if isinstance(rows, FileRows) else "?"
            values = f"(?, ?, {file_id}, ?, 0, ?, ?)"
            inserted = insert_many(dbapi, into, values, rows.packed_rows(), packed)
            whole, count = rows.general_rows(), count - packed
        if not count:
            return inserted
        marks = ", ".join(["?"] * len(POINT_COLUMNS[table]))
        return inserted + insert_many(dbapi, into, f"({marks})", whole, count)

    def insert_blobs(self, dbapi: Any, blobs: Sequence[tuple[str, int, bytes]]) -> None:
        """Insert (sha256, size, data) rows, ignoring stored ones; blobs larger than a piece
        are written in pieces (:func:`insert_large_blob`)."""
        pieces = hasattr(dbapi, "blobopen")  # Python >= 3.11
        executemany(
            dbapi,
            "INSERT INTO blobs (sha256, size, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [blob for blob in blobs if not pieces or blob[1] <= BLOB_PIECE],
        )
        for sha, size, data in blobs:
            if pieces and size > BLOB_PIECE:
                insert_large_blob(dbapi, sha, data)


def insert_large_blob(dbapi: Any, sha: str, data: bytes) -> None:
    """Insert one blob as zeros, then write its bytes over them a piece at a time.

    A bound blob is copied (Python's sqlite3 binds with ``SQLITE_TRANSIENT``), copied again
    into the record SQLite builds, and the first copy stays bound to the cached statement
    until its next use: three times the blob in all.  A ``zeroblob`` costs no memory, and
    the pieces go through the page cache (issue #40).
    """
    cursor = dbapi.cursor()
    try:
        cursor.execute(
            "INSERT INTO blobs (sha256, size, data) VALUES (?, ?, zeroblob(?)) "
            "ON CONFLICT DO NOTHING RETURNING id",
            (sha, len(data), len(data)),
        )
        row = cursor.fetchone()
    finally:
        cursor.close()
    if row is None:  # stored already
        return
    view = memoryview(data)
    with dbapi.blobopen("blobs", "data", row[0]) as blob:
        for start in range(0, len(data), BLOB_PIECE):
            blob.write(view[start : start + BLOB_PIECE])
