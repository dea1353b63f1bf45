"""The writer's statements, run on the driver's own cursor: every statement of the writer's
transactions goes through here, reads and writes (SQLAlchemy is left for engines, schema, and
the reads a read-only connection shares: ``store.file_states``, ``conversion.takeover``).

A conversion of many small files runs a dozen small statements per file (look up or create
its run and series, read and save its state).  Through SQLAlchemy each ``text()`` is built,
hashed into the compiled cache and wrapped in a result object again on every call: about
0.1 ms a statement, more than the driver's own work (issue #14).  Here the SQL is written once,
with ``:name`` parameters, and handed to the DB-API cursor as it is (sqlite3 takes ``:name``)
or, for psycopg, with its parameters spelt ``%(name)s`` (made once and cached); psycopg then
prepares the statements it sees often on the server by itself.  Inserts of many rows are
:class:`Insert` values, which SQLite takes a hundred rows a statement.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from tbconvert.store.file_states import FILE_COLUMNS


@dataclass(frozen=True)
class Insert:
    """``INSERT INTO table (columns) VALUES (...) then``, kept in parts so that rows can go
    many a statement (:meth:`Statements.insert`) or one with named parameters (``str()``)."""

    table: str
    columns: tuple[str, ...]
    then: str = ""

    def __str__(self) -> str:
        """The statement for one row of ``:column`` parameters."""
        return self.with_values("(" + ", ".join(f":{column}" for column in self.columns) + ")")

    def with_values(self, values: str) -> str:
        """The statement with ``values`` after ``VALUES``."""
        return f"INSERT INTO {self.table} ({', '.join(self.columns)}) VALUES {values}{self.then}"

    def marks(self, mark: str) -> str:
        """One row of positional parameters: ``(?, ?, ...)`` or ``(%s, %s, ...)``."""
        return "(" + ", ".join([mark] * len(self.columns)) + ")"


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
INSERT_RUN = str(Insert("runs", RUN_COLUMNS, " ON CONFLICT DO NOTHING RETURNING id"))
RUNS_OF = "SELECT run_path, id FROM runs WHERE source = :source AND run_path IN ({marks})"
# With the ids the writer gives (``Identities.allocate``): no conflict is possible.
INSERT_RUN_WITH_ID = Insert("runs", ("id", *RUN_COLUMNS))
NEXT_ID = "SELECT coalesce(max(id), 0) + 1 FROM {table}"
CONTEXT_ID = "SELECT id FROM contexts WHERE name = :name"
INSERT_CONTEXT = "INSERT INTO contexts (name) VALUES (:name) ON CONFLICT DO NOTHING RETURNING id"
SERIES_OF = (
    "SELECT id, name, plugin FROM series WHERE run_id = :run_id AND context_id = :context_id"
)
INSERT_SERIES = Insert("series", SERIES_COLUMNS, " ON CONFLICT DO NOTHING")
INSERT_SERIES_WITH_ID = Insert("series", ("id", *SERIES_COLUMNS))
FILE_STATE = (
    f"SELECT id, {', '.join(FILE_COLUMNS)} FROM event_files WHERE run_id = :run_id AND path = :path"
)
_STATE_COLUMNS = (*FILE_COLUMNS, "updated_at")
INSERT_FILE = str(Insert("event_files", _STATE_COLUMNS, " RETURNING id"))
INSERT_FILE_WITH_ID = Insert("event_files", ("id", *_STATE_COLUMNS))
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
# A ``:name`` parameter, which psycopg spells ``%(name)s``.
_NAMED = re.compile(r"(?<![:\w]):(\w+)")


def id_list(ids: Iterable[int]) -> str:
    """Ids as the items of an SQL ``IN`` list, sorted (so a statement reads the same for the
    same ids); integers from the store, written into the SQL as such."""
    return ", ".join(str(int(i)) for i in sorted(ids))


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

    def run(self, sql: str, params: Mapping[str, Any]) -> int:
        """Run a statement that returns nothing; how many rows it changed."""
        cursor = self._dbapi().cursor()
        try:
            cursor.execute(self._sql(sql), params)
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def insert(
        self, insert: Insert, rows: Sequence[Sequence[Any]] | Sequence[Mapping[str, Any]]
    ) -> None:
        """Insert ``rows``, tuples in the order of ``insert.columns`` or mappings by column:
        on SQLite many rows a statement (:func:`insert_many`), on a server by ``executemany``
        (psycopg batches it)."""
        if not rows:
            return
        values: Sequence[Sequence[Any]] = (
            [operator.itemgetter(*insert.columns)(row) for row in rows]
            if isinstance(rows[0], Mapping)
            else rows  # type: ignore[assignment]  # tuples, as the first one is
        )
        if self._pyformat:
            cursor = self._dbapi().cursor()
            try:
                cursor.executemany(insert.with_values(insert.marks("%s")), values)
            finally:
                cursor.close()
            return
        into = f"INSERT INTO {insert.table} ({', '.join(insert.columns)})"
        insert_many(self._dbapi(), into, insert.marks("?"), values, len(values), insert.then)

    def many(self, sql: str, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a statement of named parameters once per parameter set."""
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
