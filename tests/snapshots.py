"""Read stores of either backend in tests, and compare them through their public views."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VIEWS = (
    "v_runs",
    "v_scalars",
    "v_last_scalars",
    "v_images",
    "v_histograms",
    "v_texts",
    "v_params",
    "v_audio",
    "v_tensors",
    "v_series",
)
POINT_TABLES = ("scalars", "images", "histograms", "texts", "params", "audio", "tensors")


class StoreFactory:
    """Makes empty stores of one backend: a file path for SQLite, a database URL otherwise."""

    def __init__(self, backend: str, server: Any) -> None:
        self.backend = backend
        self.server = server

    def __call__(self, directory: Path, name: str = "store") -> str:
        if self.server is None:
            return str(directory / f"{name}.db")
        return self.server.new_database(name.replace("-", "_"))

    def __repr__(self) -> str:
        return f"StoreFactory({self.backend})"


def is_server(store: str | os.PathLike[str]) -> bool:
    """True when ``store`` is a database URL rather than a SQLite file."""
    return "://" in os.fspath(store)


class _ServerConnection:
    """A psycopg connection that takes SQL written for sqlite3 (``?`` placeholders)."""

    def __init__(self, url: str, *, read_only: bool) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        parts = make_url(url)
        self._connection = psycopg.connect(
            host=parts.host,
            port=parts.port,
            user=parts.username,
            dbname=parts.database,
            autocommit=True,
        )
        if read_only:
            self._connection.execute("SET default_transaction_read_only = on")

    def execute(self, sql: str, parameters: Any = None) -> Any:
        if parameters is None or parameters == ():
            return self._connection.execute(sql)  # type: ignore[arg-type]
        return self._connection.execute(sql.replace("%", "%%").replace("?", "%s"), parameters)

    def executemany(self, sql: str, rows: Any) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(sql.replace("%", "%%").replace("?", "%s"), rows)

    def commit(self) -> None:
        """Autocommit: nothing to do (sqlite3's API, for the same test code)."""

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> _ServerConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def connect(store: str | os.PathLike[str], *, read_only: bool = True) -> Any:
    """A DB-API connection to either backend that accepts ``?`` placeholders.

    Closing it is the caller's job (``contextlib.closing`` works for both).
    """
    if is_server(store):
        return _ServerConnection(os.fspath(store), read_only=read_only)
    if read_only:
        return sqlite3.connect(Path(store).resolve().as_uri() + "?mode=ro", uri=True)
    return sqlite3.connect(store)


def rows(connection: Any, sql: str, parameters: Any = None) -> list[tuple[Any, ...]]:
    """All rows of a query as plain tuples (the same type from both drivers)."""
    cursor = connection.execute(sql) if parameters is None else connection.execute(sql, parameters)
    return [tuple(row) for row in cursor.fetchall()]


def view_rows(store: str | os.PathLike[str]) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every view, as a sorted multiset (repr order copes with NULLs), after
    checking that the store's series summaries equal a recount of its points."""
    assert_summaries_exact(store)
    connection = connect(store)
    try:
        return {
            view: sorted(
                (tuple(row) for row in connection.execute(f"SELECT * FROM {view}").fetchall()),
                key=repr,
            )
            for view in VIEWS
        }
    finally:
        connection.close()


def without_run_ids(views: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple]]:
    """The same rows minus their first column (run_id), for stores whose runs were created
    in another order (files that appeared while converting, concurrent converters)."""
    return {view: sorted((row[1:] for row in rows), key=repr) for view, rows in views.items()}


def comparable_rows(store: str | os.PathLike[str]) -> dict[str, list[tuple[object, ...]]]:
    """:func:`view_rows` as two equivalent stores of one backend share them: on a server the
    id sequences skip the numbers that rolled-back or conflicting inserts drew, so run ids
    (not the runs) differ between equal stores."""
    views = view_rows(store)
    return without_run_ids(views) if is_server(store) else views


def point_count(store: str | os.PathLike[str]) -> int:
    """Rows in all point tables together."""
    connection = connect(store)
    try:
        return sum(
            connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in POINT_TABLES
        )
    finally:
        connection.close()


def file_states(store: str | os.PathLike[str]) -> dict[str, tuple[object, ...]]:
    """path -> (status, offset_consumed, records) of every event file."""
    connection = connect(store)
    try:
        return {
            row[0]: tuple(row[1:])
            for row in connection.execute(
                "SELECT path, status, offset_consumed, records FROM event_files"
            ).fetchall()
        }
    finally:
        connection.close()


def views_without_gone(store: str | os.PathLike[str]) -> dict[str, list[tuple[object, ...]]]:
    """:func:`view_rows` of the store as it would be without the files marked ``gone`` (SPEC
    §7: the only history a store keeps on purpose): their points and rows, then series and
    runs left with nothing.  The store itself is not changed (a rolled-back transaction on a
    server, a copy in memory for SQLite)."""
    with scratch_copy(store) as connection:
        gone = "SELECT id FROM event_files WHERE status = 'gone'"
        for table in POINT_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE file_id IN ({gone})")
        _recount(connection, store)  # the summaries without the deleted points
        connection.execute("DELETE FROM event_files WHERE status = 'gone'")
        unused = " AND ".join(
            f"NOT EXISTS (SELECT 1 FROM {table} AS p WHERE p.series_id = series.id)"
            for table in POINT_TABLES
        )
        connection.execute(f"DELETE FROM series WHERE {unused}")
        connection.execute(
            "DELETE FROM runs WHERE NOT EXISTS (SELECT 1 FROM event_files AS f "
            "WHERE f.run_id = runs.id) AND NOT EXISTS (SELECT 1 FROM series AS s "
            "WHERE s.run_id = runs.id)"
        )
        return {
            view: sorted(
                (tuple(row) for row in connection.execute(f"SELECT * FROM {view}").fetchall()),
                key=repr,
            )
            for view in VIEWS
        }


def _recount(connection: Any, store: str | os.PathLike[str]) -> None:
    from converter.store.summaries import recount_sql

    dialect = "postgresql" if is_server(store) else "sqlite"
    for statement in recount_sql(dialect, POINT_TABLES):
        connection.execute(statement)


def summaries(connection: Any) -> list[tuple[object, ...]]:
    """Every ``series_summaries`` row, sorted."""
    return sorted(
        (tuple(row) for row in connection.execute("SELECT * FROM series_summaries").fetchall()),
        key=repr,
    )


def assert_summaries_exact(store: str | os.PathLike[str]) -> None:
    """The summaries the writer kept equal those counted again from the points (on a copy of
    a SQLite store, in a rolled-back transaction on a server)."""
    with scratch_copy(store) as connection:
        kept = summaries(connection)
        _recount(connection, store)
        recounted = summaries(connection)
    assert kept == recounted, f"series summaries differ from a recount: {kept} != {recounted}"


@contextlib.contextmanager
def scratch_copy(store: str | os.PathLike[str]) -> Iterator[Any]:
    """A writable connection whose changes never reach the store: a copy in memory of a
    SQLite store, a transaction rolled back at the end on a server."""
    if is_server(store):
        connection = connect(store, read_only=False)
        connection.execute("BEGIN")
    else:
        source = sqlite3.connect(os.fspath(store))
        connection = sqlite3.connect(":memory:")
        source.backup(connection)
        source.close()
    try:
        yield connection
    finally:
        if is_server(store):
            connection.execute("ROLLBACK")
        connection.close()
