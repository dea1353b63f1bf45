"""One SQL statement run read-only on a store, on either backend (``tbconvert query``).

Read-only is the connection's property, never a guess from the text alone:

- SQLite: a connection of its own, opened ``mode=ro``, with ``PRAGMA query_only`` on and an
  authorizer that lets a statement read tables, call functions and read pragmas, and refuses
  everything else (DELETE, UPDATE, INSERT, CREATE, DROP, ATTACH, a pragma given a value such
  as ``writable_schema = ON``), naming what it refused.
- PostgreSQL: a ``READ ONLY`` transaction, always rolled back; the server refuses every write,
  data-modifying ``WITH`` included.

Before either, the statement's first word must be one that reads (:data:`READING_WORDS`):
PostgreSQL lets a read-only transaction run ``ANALYZE`` and ``COPY ... TO`` a server file,
and SQLite lets a read-only connection ``VACUUM INTO`` a new file.  One statement only: both
drivers are asked to prepare it, and their parsers refuse a second one.

Parameters are named ``:name`` on both backends.
"""

from __future__ import annotations

import contextlib
import decimal
import re
import sqlite3
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbconvert.errors import StoreError, UsageError
from tbconvert.store.engine import BUSY_TIMEOUT_MS, sqlite_path
from tbconvert.store.errors import translate_errors

if TYPE_CHECKING:
    from tbconvert.query.store import Store

# Statements that only read, by their first word.  SHOW and TABLE are PostgreSQL's, PRAGMA is
# SQLite's (the authorizer refuses a pragma given a value).
READING_WORDS = ("SELECT", "WITH", "VALUES", "TABLE", "EXPLAIN", "SHOW", "PRAGMA")
# Rows a PostgreSQL stream receives at a time, where libpq can send them in chunks.
STREAM_CHUNK_ROWS = 1000
# PostgreSQL types (their OIDs) that psycopg reads as None, bool, int, float, str or bytes:
# results of only these columns skip plain_value, a Python call per value.
_PLAIN_TYPES = frozenset((16, 17, 18, 19, 20, 21, 23, 25, 26, 700, 701, 705, 1042, 1043))
# Words that name a write, to say which one a PostgreSQL refusal was about: its own message
# names the outer statement ("cannot execute SELECT" for a data-modifying WITH).
_WRITE_WORDS = ("INSERT", "UPDATE", "DELETE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE")
# SQLite authorizer action codes (sqlite3.h), by number, for the refusal's message.
# fmt: off
_SQLITE_ACTIONS = (
    "COPY", "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE",
    "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE",
    "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER",
    "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT",
    "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE",
    "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT", "RECURSIVE",
)
_READING_ACTIONS = frozenset(
    (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE)
)
# Pragmas whose argument names what they describe, not a value they set.
# fmt: off
_DESCRIBING_PRAGMAS = frozenset((
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
))
# fmt: on
# Comments, quoted strings and identifiers (PostgreSQL's $tag$ strings too), then bare words.
_TOKENS = re.compile(
    r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]"
    r"|(\$[A-Za-z_]*\$).*?\1|([A-Za-z_][A-Za-z_0-9]*)|;",
    re.DOTALL,
)
_READ_ONLY = "tbconvert query runs read-only statements"


class RefusedStatement(UsageError):
    """A statement ``query`` does not run: one that writes, several, or none."""


@dataclass(frozen=True)
class QueryResult:
    """What a read-only statement returned.

    Attributes:
        columns: The result's column names, in order.
        rows: Its rows (up to ``max_rows``), each a tuple of plain Python values: ``None``,
            int, float (NaN included), str, bytes; PostgreSQL's numerics as int or float, its
            dates and times as ISO 8601 text.
        truncated: True when the statement returned more rows than ``max_rows``.
    """

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


def run_read_only(
    store: Store,
    sql: str,
    parameters: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
) -> QueryResult:
    """Run one statement read-only and return its columns and rows.

    Args:
        store: An open store (:func:`tbconvert.open_store`).
        sql: One SQL statement; named parameters as ``:name``.
        parameters: Their values.
        max_rows: Return at most this many rows (``truncated`` says whether there were more).

    Raises:
        RefusedStatement: the statement would write, there are several, or none.
        UsageError: a parameter has no value, or ``max_rows`` is negative.
        StoreError: the database reports an error running it (syntax, unknown table...).
    """
    if max_rows is not None and max_rows < 0:
        raise UsageError(f"max_rows must be 0 or more, not {max_rows}")
    with read_only_rows(store, sql, parameters) as (columns, rows):
        taken: list[tuple[Any, ...]] = []
        for row in rows:
            if max_rows is not None and len(taken) == max_rows:
                return QueryResult(columns, taken, truncated=True)
            taken.append(row)
    return QueryResult(columns, taken)


@contextlib.contextmanager
def read_only_rows(
    store: Store, sql: str, parameters: Mapping[str, Any] | None = None
) -> Iterator[tuple[tuple[str, ...], Iterator[tuple[Any, ...]]]]:
    """The columns and a stream of rows of one statement run read-only (see
    :func:`run_read_only`), for output that need not hold every row; the rows must be read
    inside the ``with`` block.

    Raises:
        RefusedStatement, UsageError, StoreError: as :func:`run_read_only`.
    """
    words = statement_words(sql)
    check_reading(words, store.display)
    if store.engine.dialect.name == "sqlite":
        url = store.engine.url  # its text would percent-encode a "file:" database
        path = sqlite_path(f"sqlite:///{url.database or ''}")
        if path is None:
            raise StoreError("an in-memory store cannot be opened read-only", path=store.display)
        immutable = url.query.get("immutable") == "1"
        opened = _sqlite_rows(path, immutable, sql, dict(parameters or {}), store)
    else:
        opened = _postgres_rows(store, sql, dict(parameters or {}))
    with _refusals(store.display, words), opened as (columns, rows):
        yield columns, rows


def statement_words(sql: str) -> list[str]:
    """The bare words of ``sql`` in capitals, outside comments, strings and quoted names
    (``;`` kept, as a word of its own)."""
    return [
        match[2].upper() if match[2] else ";"
        for match in _TOKENS.finditer(sql)
        if match[2] or match[0] == ";"
    ]


def check_reading(words: list[str], display: str | None = None) -> None:
    """Refuse a statement whose first word is not one of :data:`READING_WORDS`.

    Raises:
        RefusedStatement: no statement, or one that does not start by reading.
    """
    first = next((word for word in words if word != ";"), None)
    if first is None:
        raise RefusedStatement(
            "no SQL statement given", path=display, hint="pass one, e.g. 'SELECT * FROM v_runs'"
        )
    if first not in READING_WORDS:
        raise RefusedStatement(
            f"{first} refused: {_READ_ONLY}",
            path=display,
            hint=f"start with one of {', '.join(READING_WORDS)}",
        )


@contextlib.contextmanager
def _sqlite_rows(
    path: str, immutable: bool, sql: str, parameters: dict[str, Any], store: Store
) -> Iterator[tuple[tuple[str, ...], Iterator[tuple[Any, ...]]]]:
    uri = Path(path).resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")
    with translate_errors(store.display):
        connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    guard = _Authorizer()
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(guard)
        try:
            cursor = connection.execute(sql, parameters)
        except sqlite3.DatabaseError as error:
            if guard.refused:
                raise RefusedStatement(
                    f"{guard.refused} refused: {_READ_ONLY}", path=store.display
                ) from error
            raise
        columns = tuple(d[0] for d in cursor.description or ())
        yield columns, iter(cursor)
    finally:
        connection.close()


class _Authorizer:
    """SQLite's authorizer callback: reading is allowed; the first thing refused is kept."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(
        self, action: int, first: str | None, second: str | None, *_where: str | None
    ) -> int:
        if action in _READING_ACTIONS:
            return sqlite3.SQLITE_OK
        # A table-valued pragma (pragma_table_info) first declares its table, which SQLite
        # authorizes as an update of the schema table; a statement's own update of it is
        # refused by SQLite itself without writable_schema, which is refused below.
        if action == sqlite3.SQLITE_UPDATE and first == "sqlite_master":
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (second is None or first in _DESCRIBING_PRAGMAS):
            return sqlite3.SQLITE_OK
        if self.refused is None:
            name = _SQLITE_ACTIONS[action] if action < len(_SQLITE_ACTIONS) else str(action)
            name = name.replace("_", " ")
            what = f"PRAGMA {first} = {second}" if action == sqlite3.SQLITE_PRAGMA else name
            target = first if first and action != sqlite3.SQLITE_PRAGMA else None
            self.refused = what + (f" on {target}" if target else "")
        return sqlite3.SQLITE_DENY


@contextlib.contextmanager
def _postgres_rows(
    store: Store, sql: str, parameters: dict[str, Any]
) -> Iterator[tuple[tuple[str, ...], Iterator[tuple[Any, ...]]]]:
    from sqlalchemy import exc, text

    try:
        compiled = text(sql).compile(dialect=store.engine.dialect)
        values = compiled.construct_params(parameters)
    except exc.SQLAlchemyError as error:
        raise UsageError(
            str(error).splitlines()[0], hint="give it with --param NAME=VALUE"
        ) from None
    with translate_errors(store.display), store.engine.connect() as conn:
        raw: Any = conn.connection.dbapi_connection
        try:
            raw.execute("SET TRANSACTION READ ONLY")
            cursor = raw.cursor()
            # stream() prepares the statement (the extended protocol): the server's parser
            # refuses a second statement, which a simple query would run.
            rows = cursor.stream(compiled.string, values, size=_stream_chunk())
            try:
                first = next(rows, None)
                described = cursor.description or ()
                columns = tuple(d.name for d in described)
                plain = all(d.type_code in _PLAIN_TYPES for d in described)
                yield columns, _plain_rows(rows, first, converted=not plain)
            finally:
                rows.close()  # a stream left early is cancelled before the rollback
        finally:
            raw.rollback()


def _stream_chunk() -> int:
    """Rows a stream takes per message: libpq 17 and later send them in chunks, older ones
    one at a time (docs/performance.md#tbconvert-query-on-a-big-store-49-2026-11-28)."""
    import psycopg

    return STREAM_CHUNK_ROWS if psycopg.pq.version() >= 170000 else 1


def _plain_rows(
    rows: Iterator[tuple[Any, ...]], first: tuple[Any, ...] | None, *, converted: bool
) -> Iterator[tuple[Any, ...]]:
    if first is None:
        return
    if not converted:
        yield first
        yield from rows
        return
    yield tuple(map(plain_value, first))
    for row in rows:
        yield tuple(map(plain_value, row))


def plain_value(value: Any) -> Any:
    """A driver's value as None, int, float, str or bytes (what every output can write)."""
    if value is None or isinstance(value, (int, float, str, bytes)):
        return value
    if isinstance(value, decimal.Decimal):
        return (
            int(value) if value == value.to_integral_value() and value.is_finite() else float(value)
        )
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (timedelta, uuid.UUID)):
        return str(value)
    return str(value)


@contextlib.contextmanager
def _refusals(display: str, words: list[str]) -> Iterator[None]:
    """Driver errors that mean "refused" as :class:`RefusedStatement`; others as StoreError."""
    try:
        with translate_errors(display):
            yield
    except Exception as error:
        cause = error.__cause__ or error
        if "supply a value for binding" in str(cause):
            raise UsageError(
                str(cause).rstrip("."), path=display, hint="give it with --param NAME=VALUE"
            ) from error
        refused = _refusal(cause, words)
        if refused is None:
            raise
        raise RefusedStatement(refused, path=display) from error


def _refusal(error: BaseException, words: list[str]) -> str | None:
    text = str(error)
    if "one statement at a time" in text or "multiple commands" in text:
        return "several statements refused: tbconvert query runs one statement"
    if (
        "readonly database" in text
        or "may not be modified" in text
        or getattr(error, "sqlstate", None) == "25006"
    ):
        written = next((word for word in words if word in _WRITE_WORDS), None)
        return f"{written or 'writing'} refused: {_READ_ONLY}"
    return None
