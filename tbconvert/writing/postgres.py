"""Bulk writes into a PostgreSQL store: binary COPY.

Rows the store may already hold (a file read again from its start under a wider selection) go
through a staging table and one idempotent ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``, as
COPY cannot skip stored rows.  Rows the writer knows to be new (*fresh*: read past the file's
committed offset, in the transaction that holds the run's advisory lock, or after the file's
points were deleted) cannot conflict and are copied straight into the point table: half the
server's work.  Where the role may, the point tables' foreign keys are checked once per chunk
instead of once per row (``pg_foreign_keys``): the other half.  NaN becomes NULL on the way in
either case, which SQLite does by itself and PostgreSQL does not (``value IS NULL`` means NaN on
both backends).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from sqlalchemy.engine import Connection, Engine

from tbconvert.rows import POINT_COLUMNS, InsertRows, Row, in_key_order
from tbconvert.store.engine import advisory_key
from tbconvert.writing import pg_copy, pg_foreign_keys
from tbconvert.writing.bulk import executemany, nothing
from tbconvert.writing.statements import LOCK, Statements

# Blobs larger than this go to the server in pieces of this size.
BLOB_PIECE = 4 << 20


class PostgresBulk:
    """Bulk writes into a PostgreSQL store, which other machines may write to as well."""

    shared = True

    def __init__(self, engine: Engine) -> None:
        """Args: the store's engine."""
        self.keys_per_chunk = False
        self.role = ""
        # Points whose keys the server checked one row at a time (see writing.pg_foreign_keys).
        self.checked_per_row = 0
        # Called before each COPY (see StoreWriter.call_when_waiting_on_server).
        self.waiting_on_server: Callable[[], None] = nothing

    def on_connect(self, dbapi: Any) -> None:
        """Learn whether this role may check the point tables' keys per chunk."""
        self.keys_per_chunk, self.role = pg_foreign_keys.may_check_per_chunk(dbapi)

    def after_commit(self) -> None:
        """Nothing to do: the server writes its own log and checkpoints."""

    def on_close(self, conn: Connection) -> None:
        """Nothing to undo: the connection goes back to the pool as it came."""

    def text_value(self, value: str | None) -> str | None:
        """PostgreSQL text cannot hold U+0000: see :func:`server_text`."""
        return server_text(value)

    def lock_runs(self, statements: Statements, source: str, run_paths: Collection[str]) -> None:
        """Hold the runs until the transaction ends: concurrent converters then never
        interleave inside one run's rows.  In key order, one statement: two converters then
        never hold one run each while waiting for the other's."""
        keys = sorted({advisory_key("run", source, run_path) for run_path in run_paths})
        if keys:
            statements.run(LOCK, {"keys": keys})

    def notices(self) -> list[str]:
        """How to make the server faster, when it checked keys row by row."""
        if not self.checked_per_row:
            return []
        return [pg_foreign_keys.per_row_notice(self.role, self.checked_per_row)]

    def is_busy(self) -> bool:
        """Never: converters on a server wait on row and advisory locks, not the store."""
        return False

    def insert_points(self, dbapi: Any, table: str, rows: InsertRows, fresh: bool = False) -> int:
        """Insert point rows through COPY; unless ``fresh`` (none can be stored yet), through
        a staging table that skips stored ones.  Returns how many were new."""
        if not rows:
            return 0
        columns, types = POINT_COLUMNS[table], pg_copy.POINT_TYPES[table]
        texts = [index for index, kind in enumerate(types) if kind == "text"]
        data: Iterable[Row] | pg_copy.Stream = rows
        if rows.packed_count():
            # The packed ones in key order, as on SQLite: the key's index takes them faster;
            # as one COPY stream written by NumPy where every field is of a fixed width.
            stream = _binary_stream(rows, types)
            data = (
                stream
                if stream is not None
                else chain(rows.general_rows(), rows.packed_table().tolist())
            )
        elif texts:
            data = (_without_nul(row, texts) for row in rows)
        with dbapi.cursor() as cursor:
            per_chunk = self.keys_per_chunk and pg_foreign_keys.lock_parents(cursor, table, rows)
        if not per_chunk:
            self.checked_per_row += len(rows)
        self.waiting_on_server()
        if fresh:
            _copy(dbapi, table, columns, types, data)
            inserted = len(rows)  # COPY stores every row or fails
        else:
            inserted = _copy_new(dbapi, table, columns, types, data)
        if per_chunk:
            with dbapi.cursor() as cursor:
                pg_foreign_keys.checks_back_on(cursor)
        return inserted

    def insert_blobs(self, dbapi: Any, blobs: Sequence[tuple[str, int, bytes]]) -> None:
        """Insert (sha256, size, data) rows, ignoring stored ones; blobs larger than a piece
        go by COPY in pieces (:func:`_copy_large_blob`), after the others (an order every
        converter takes, as the writer's sorted one)."""
        executemany(
            dbapi,
            "INSERT INTO blobs (sha256, size, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            [blob for blob in blobs if blob[1] <= BLOB_PIECE],
        )
        for sha, size, data in blobs:
            if size > BLOB_PIECE:
                _copy_large_blob(dbapi, sha, data)


def server_text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold U+0000: it is written as the four characters ``\\x00``,
    the spelling already used for bytes that are not UTF-8 (SQLite keeps the character)."""
    if value is None or "\x00" not in value:
        return value
    return value.replace("\x00", "\\x00")


def _binary_stream(rows: InsertRows, types: Sequence[str]) -> pg_copy.Stream | None:
    """The binary COPY stream of scalars rows, all of them in key order (see
    :mod:`tbconvert.writing.pg_copy`); None when some field does not fit a fixed width."""
    import numpy as np

    table = rows.packed_table()
    general = list(rows.general_rows())
    if general:
        try:
            made = np.array(general, dtype=table.dtype)
        except (TypeError, ValueError, OverflowError):
            return None  # written row by row, where the server says what is wrong
        table = in_key_order(np.concatenate([table, made]))
    return pg_copy.Stream(table, types) if pg_copy.encodable(table, types) else None


def _write(copy: Any, types: Sequence[str], data: Iterable[Row] | pg_copy.Stream) -> None:
    """Send rows to a binary COPY: a stream piece by piece, or row by row, NaN as NULL."""
    if isinstance(data, pg_copy.Stream):
        for piece in data.pieces():
            copy.write(piece)
        return
    copy.set_types(types)
    floats = [index for index, kind in enumerate(types) if kind == "float8"]
    for row in _nan_as_null(data, floats):
        copy.write_row(row)


def _copy_large_blob(dbapi: Any, sha: str, data: bytes) -> None:
    """Store one blob unless stored already, sent a piece at a time through the session's
    staging table.  Bound as a parameter, the blob is copied whole into libpq's output
    buffer, which keeps that size for the connection's life (issue #40)."""
    stage = "tbconvert_stage_blobs"
    key = sha.encode()
    head = struct.pack(">hi", 3, len(key)) + key + struct.pack(">iqi", 8, len(data), len(data))
    view = memoryview(data)
    with dbapi.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} "
            "(sha256 text, size bigint, data bytea) ON COMMIT DELETE ROWS"
        )
        cursor.execute(f"TRUNCATE {stage}")
        with cursor.copy(f"COPY {stage} (sha256, size, data) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(pg_copy.SIGNATURE + head)
            for start in range(0, len(data), BLOB_PIECE):
                copy.write(view[start : start + BLOB_PIECE])
            copy.write(pg_copy.TRAILER)
        cursor.execute(
            f"INSERT INTO blobs (sha256, size, data) SELECT sha256, size, data FROM {stage} "
            "ON CONFLICT DO NOTHING"
        )


def _copy(
    dbapi: Any,
    table: str,
    columns: tuple[str, ...],
    types: Sequence[str],
    data: Iterable[Row] | pg_copy.Stream,
) -> None:
    """COPY rows straight into a point table (none of them can be stored yet)."""
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    with dbapi.cursor() as cursor, cursor.copy(statement) as copy:
        _write(copy, types, data)


def _copy_new(
    dbapi: Any,
    table: str,
    columns: tuple[str, ...],
    types: Sequence[str],
    data: Iterable[Row] | pg_copy.Stream,
) -> int:
    """COPY rows into the session's staging table, then move the ones not stored yet into the
    point table; returns how many it moved."""
    names = ", ".join(columns)
    stage = f"tbconvert_stage_{table}"
    moved = ", ".join(
        f"NULLIF({name}, 'NaN')" if kind == "float8" else name
        for name, kind in zip(columns, types, strict=True)
    )
    with dbapi.cursor() as cursor:
        # One staging table per session, emptied at every commit (a table per transaction
        # would churn the system catalogs); made again if a rollback took it away.
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} "
            f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        cursor.execute(f"TRUNCATE {stage}")
        with cursor.copy(f"COPY {stage} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
            _write(copy, types, data)
        cursor.execute(
            f"INSERT INTO {table} ({names}) SELECT {moved} FROM {stage} ON CONFLICT DO NOTHING"
        )
        return int(cursor.rowcount)


def _nan_as_null(rows: Iterable[Row], floats: list[int]) -> Iterator[Row]:
    """The rows with NaN in float columns as None (NaN is the only float unequal to itself)."""
    for row in rows:
        if all(row[index] == row[index] for index in floats):
            yield row
            continue
        values = list(row)
        for index in floats:
            if values[index] != values[index]:
                values[index] = None
        yield tuple(values)


def _without_nul(row: Row, texts: list[int]) -> Row:
    if not any(row[index] is not None and "\x00" in row[index] for index in texts):
        return row
    values = list(row)
    for index in texts:
        values[index] = server_text(values[index])
    return tuple(values)
