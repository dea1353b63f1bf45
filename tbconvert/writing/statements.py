"""The writer's small statements, run on the driver's own cursor.

A conversion of many small files runs a dozen small statements per file (look up or create
its run and series, read and save its state).  Through SQLAlchemy each ``text()`` is built,
hashed into the compiled cache and wrapped in a result object again on every call: about
0.1 ms a statement, more than the driver's own work (issue #14).  Here the SQL is written once,
with ``:name`` parameters, and handed to the DB-API cursor as it is (sqlite3 takes ``:name``)
or, for psycopg, rewritten once to ``%(name)s`` and cached; psycopg then prepares the
statements it sees often on the server by itself.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, islice
from typing import Any

from tbconvert.store.file_states import FILE_COLUMNS


def _insert(table: str, columns: tuple[str, ...], then: str = "") -> str:
    """``INSERT INTO table (columns) VALUES (:column, ...)``, then ``then``."""
    values = ", ".join(f":{column}" for column in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({values}){then}"


# The columns a new run and a new series are made with, in the order of the inserts' values
# (``Identities`` stages rows as tuples in that order, after the id where it gives one).
RUN_COLUMNS = ("source", "host", "logdir", "run_path", "group_path", "name")
SERIES_COLUMNS = (
    "run_id",
    "context_id",
    "name",
    "plugin",
    "dtype",
    "display_name",
    "description",
    "plugin_content",
)
RUN_ID = "SELECT id FROM runs WHERE source = :source AND run_path = :run_path"
# RETURNING gives the id in the same round trip; a conflict (another converter made the run
# since the look-up) returns nothing, and the look-up runs again.
INSERT_RUN = _insert("runs", RUN_COLUMNS, " ON CONFLICT DO NOTHING RETURNING id")
RUNS_OF = "SELECT run_path, id FROM runs WHERE source = :source AND run_path IN ({marks})"
# With the ids the writer gives (``Identities.allocate``): no conflict is possible.
INSERT_RUN_WITH_ID = _insert("runs", ("id", *RUN_COLUMNS))
NEXT_ID = "SELECT coalesce(max(id), 0) + 1 FROM {table}"
CONTEXT_ID = "SELECT id FROM contexts WHERE name = :name"
INSERT_CONTEXT = "INSERT INTO contexts (name) VALUES (:name) ON CONFLICT DO NOTHING RETURNING id"
SERIES_OF = (
    "SELECT id, name, plugin FROM series WHERE run_id = :run_id AND context_id = :context_id"
)
INSERT_SERIES = _insert("series", SERIES_COLUMNS, " ON CONFLICT DO NOTHING")
INSERT_SERIES_WITH_ID = _insert("series", ("id", *SERIES_COLUMNS))
FILE_STATE = (
    f"SELECT id, {', '.join(FILE_COLUMNS)} FROM event_files WHERE run_id = :run_id AND path = :path"
)
_STATE_COLUMNS = (*FILE_COLUMNS, "updated_at")
INSERT_FILE = _insert("event_files", _STATE_COLUMNS, " RETURNING id")
INSERT_FILE_WITH_ID = _insert("event_files", ("id", *_STATE_COLUMNS))
UPDATE_FILE = (
    f"UPDATE event_files SET {', '.join(f'{column} = :{column}' for column in _STATE_COLUMNS)} "
    "WHERE id = :id"
)
BLOB_ID = "SELECT id FROM blobs WHERE sha256 = :sha"
# The sorted subquery is never pulled up into the outer query, so the locks are taken in
# key order.
LOCK = (
    "SELECT pg_advisory_xact_lock(key) FROM "
    "(SELECT key FROM unnest(CAST(:keys AS BIGINT[])) AS key ORDER BY key) AS ordered"
)

# Point rows a SQLite statement inserts at once.  Python's driver binds a statement's
# parameters in one C loop but pays a Python round trip per statement (step, reset, changes):
# 100 rows a statement halve the insert of a sweep's 400k scalars (0.65 -> 0.33 s); the
# gain is flat past 50.  999 is the fewest parameters a SQLite may allow (before 3.32).
_ROWS_AT_ONCE = 100
_MAX_PARAMETERS = 999
_NAMED = re.compile(r"(?<![:\w]):(\w+)")
_INSERT_VALUES = re.compile(r"(INSERT INTO [^(]+\([^)]*\)) VALUES \(([^)]*)\)(.*)", re.DOTALL)


@functools.cache
def _positional_insert(sql: str) -> tuple[str, str, str, tuple[str, ...]] | None:
    """An INSERT of one row of named parameters taken apart for :func:`insert_many`:
    ``INSERT INTO t (columns)``, its values as ``?`` marks, what follows them, and the
    parameters' names in order; None for any other statement, or one returning rows."""
    found = _INSERT_VALUES.fullmatch(sql)
    if found is None or "RETURNING" in found[3]:
        return None
    names = tuple(_NAMED.findall(found[2]))
    if len(names) < 2 or found[2] != ", ".join(f":{name}" for name in names):
        return None  # literals among the values, or a name for one value (not a tuple)
    return found[1], f"({', '.join('?' * len(names))})", found[3].strip(), names


@functools.cache
def _pyformat(sql: str) -> str:
    return _NAMED.sub(r"%(\1)s", sql)


class Statements:
    """Runs the statements above on one DB-API connection, in its parameter style.

    Args:
        dbapi: Returns the driver's connection (the writer's, inside its SQLAlchemy
            transaction; asked each time, as SQLAlchemy may have replaced it).
        pyformat: The driver takes ``%(name)s`` (psycopg) rather than ``:name`` (sqlite3).
    """

    def __init__(self, dbapi: Callable[[], Any], pyformat: bool) -> None:
        """Bind to the connection."""
        self._dbapi = dbapi
        self._pyformat = pyformat

    def _sql(self, sql: str) -> str:
        return _pyformat(sql) if self._pyformat else sql

    def all(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Every row the statement returns."""
        cursor = self._dbapi().cursor()
        try:
            cursor.execute(self._sql(sql), params)
            return list(cursor.fetchall()) if cursor.description else []
        finally:
            cursor.close()

    def one(self, sql: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The statement's first row, or None."""
        cursor = self._dbapi().cursor()
        try:
            cursor.execute(self._sql(sql), params)
            row = cursor.fetchone()
            return None if row is None else tuple(row)
        finally:
            cursor.close()

    def scalar(self, sql: str, params: Mapping[str, Any]) -> Any:
        """The first column of the first row, or None."""
        row = self.one(sql, params)
        return None if row is None else row[0]

    def run(self, sql: str, params: Mapping[str, Any]) -> None:
        """Run a statement that returns nothing."""
        cursor = self._dbapi().cursor()
        try:
            cursor.execute(self._sql(sql), params)
        finally:
            cursor.close()

    def many(
        self, sql: str, params: Sequence[Mapping[str, Any]] | Sequence[tuple[Any, ...]]
    ) -> None:
        """Run a statement once per parameter set: an ``INSERT ... VALUES (:name, ...)`` on
        SQLite many rows a statement (:func:`insert_many`).  Such an insert also takes its
        rows as tuples, in the order of its parameters (no mapping made per row)."""
        insert = _positional_insert(sql) if params else None
        as_tuples = bool(params) and isinstance(params[0], tuple)
        if insert is not None and not self._pyformat:
            into, values, then, names = insert
            rows: Iterable[Any] = params if as_tuples else map(operator.itemgetter(*names), params)
            insert_many(self._dbapi(), into, values, rows, len(params), then)
            return
        if as_tuples:
            assert insert is not None, "rows as tuples need an INSERT of named values"
            params = [dict(zip(insert[3], row, strict=True)) for row in params]
        cursor = self._dbapi().cursor()
        try:
            cursor.executemany(self._sql(sql), params)
        finally:
            cursor.close()


def insert_many(
    dbapi: Any,
    into: str,
    values: str,
    rows: Iterable[Sequence[Any]],
    count: int,
    then: str = "ON CONFLICT DO NOTHING",
) -> int:
    """``{into} VALUES {values} {then}`` for the ``count`` rows of ``rows`` on a DB-API
    connection, ``_ROWS_AT_ONCE`` a statement and the rest in one more; returns the rows
    inserted.  The rows' values are regrouped in C (``zip`` over one iterator): no list of
    them is built."""
    width = values.count("?")
    at_once = max(1, min(_ROWS_AT_ONCE, _MAX_PARAMETERS // width))
    values_of = chain.from_iterable(rows)
    cursor = dbapi.cursor()
    try:
        inserted = 0
        # The rest as one statement too: a group's runs, series or files are rarely a
        # multiple of ``at_once``, and one statement a row cost a step each.
        for size, statements in ((at_once, count // at_once), (count % at_once, 1)):
            if size and statements:
                head = islice(values_of, size * statements * width)
                many = ", ".join([values] * size)
                cursor.executemany(
                    f"{into} VALUES {many} {then}", zip(*[head] * (size * width), strict=True)
                )
                inserted += cursor.rowcount
        return inserted
    finally:
        cursor.close()
