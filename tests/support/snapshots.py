"""Read stores of either backend in tests, and compare them through their public views."""

from __future__ import annotations

import contextlib
import math
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
BLOB_TABLES = ("images", "audio", "tensors")
# Besides the views, a snapshot holds the point tables joined *outwards* to what they point
# to (the views are inner joins: a point whose series or file is gone would not show in them)
# and every row whose reference points nowhere.
RAW_POINTS = "raw_points"
DANGLING = "dangling"


class StoreFactory:
    """Makes new stores of one backend: a file path for SQLite, a database URL otherwise (a
    copy of the server's store template, at the code's schema)."""

    def __init__(self, backend: str, server: Any) -> None:
        self.backend = backend
        self.server = server

    def __call__(self, directory: Path, name: str = "store", *, schema: bool = True) -> str:
        """A new store named ``name``; with ``schema`` False a server's database is left
        without the schema (a SQLite path is a file not made yet either way)."""
        if self.server is None:
            return str(directory / f"{name}.db")
        template = self.server.store_template() if schema else None
        return self.server.new_database(name.replace("-", "_"), template)

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


def sqlite_rows(store: str | os.PathLike[str], sql: str) -> list[tuple[Any, ...]]:
    """All rows of a query on a SQLite store as plain tuples, from a connection of its own."""
    with contextlib.closing(sqlite3.connect(store)) as connection:
        return [tuple(row) for row in connection.execute(sql)]


def query_rows(store: str, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    """Rows of a query on the store, through the database driver, read-only."""
    with contextlib.closing(connect(store)) as conn:
        return rows(conn, sql, parameters or None)


def rows(connection: Any, sql: str, parameters: Any = None) -> list[tuple[Any, ...]]:
    """All rows of a query as plain tuples (the same type from both drivers)."""
    cursor = connection.execute(sql) if parameters is None else connection.execute(sql, parameters)
    return [tuple(row) for row in cursor.fetchall()]


def raw_point_rows(connection: Any) -> list[tuple[object, ...]]:
    """Every row of every point table, named by what it points to through LEFT JOINs:
    (table, series' run_path, context, tag, plugin, file's run_path, context, path, step,
    record_offset, value_index, blob sha256).  A missing series, file, run, context or
    blob shows as NULLs instead of hiding the row; no store ids, so equal stores compare
    equal whatever order their rows were created in."""
    found: list[tuple[object, ...]] = []
    for table in POINT_TABLES:
        blob = "b.sha256" if table in BLOB_TABLES else "NULL"
        blob_join = "LEFT JOIN blobs AS b ON b.id = p.blob_id " if table in BLOB_TABLES else ""
        found += rows(
            connection,
            f"SELECT '{table}', sr.run_path, sc.name, s.name, s.plugin, fr.run_path, fc.name, "
            f"f.path, p.step, p.record_offset, p.value_index, {blob} FROM {table} AS p "
            "LEFT JOIN series AS s ON s.id = p.series_id "
            "LEFT JOIN runs AS sr ON sr.id = s.run_id "
            "LEFT JOIN contexts AS sc ON sc.id = s.context_id "
            "LEFT JOIN event_files AS f ON f.id = p.file_id "
            "LEFT JOIN runs AS fr ON fr.id = f.run_id "
            f"LEFT JOIN contexts AS fc ON fc.id = f.context_id {blob_join}",
        )
    return sorted(found, key=repr)


def _dangling_queries() -> dict[str, str]:
    """What must never be found, each as a query counting it."""
    queries = {}
    for table in POINT_TABLES:
        queries[f"{table} rows whose series is missing"] = (
            f"SELECT count(*) FROM {table} AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM series AS s WHERE s.id = p.series_id)"
        )
        queries[f"{table} rows whose file is missing"] = (
            f"SELECT count(*) FROM {table} AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM event_files AS f WHERE f.id = p.file_id)"
        )
        # A file's points belong to series of the file's own (run, context).
        queries[f"{table} rows whose file and series are in different (run, context)s"] = (
            f"SELECT count(*) FROM {table} AS p JOIN series AS s ON s.id = p.series_id "
            "JOIN event_files AS f ON f.id = p.file_id "
            "WHERE s.run_id <> f.run_id OR s.context_id <> f.context_id"
        )
    for table in BLOB_TABLES:
        queries[f"{table} rows whose blob is missing"] = (
            f"SELECT count(*) FROM {table} AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM blobs AS b WHERE b.id = p.blob_id)"
        )
    queries["series_summaries rows whose series is missing"] = (
        "SELECT count(*) FROM series_summaries AS m WHERE NOT EXISTS "
        "(SELECT 1 FROM series AS s WHERE s.id = m.series_id)"
    )
    queries["series_summaries rows whose last point's file is missing"] = (
        "SELECT count(*) FROM series_summaries AS m WHERE NOT EXISTS "
        "(SELECT 1 FROM event_files AS f WHERE f.id = m.last_file_id)"
    )
    for table in ("series", "event_files"):
        queries[f"{table} rows whose run is missing"] = (
            f"SELECT count(*) FROM {table} AS t WHERE NOT EXISTS "
            "(SELECT 1 FROM runs AS r WHERE r.id = t.run_id)"
        )
        queries[f"{table} rows whose context is missing"] = (
            f"SELECT count(*) FROM {table} AS t WHERE NOT EXISTS "
            "(SELECT 1 FROM contexts AS c WHERE c.id = t.context_id)"
        )
    return queries


def dangling_rows(connection: Any) -> list[tuple[str, int]]:
    """(what, how many) for every kind of row whose reference points nowhere; [] when none.

    SQLite's ``PRAGMA foreign_key_check`` finds the first kinds too, but the converter's own
    connection does not enforce keys, and a server's could have them deferred or dropped: this
    asks the tables themselves, on either backend."""
    found = []
    for what, sql in _dangling_queries().items():
        ((count,),) = rows(connection, sql)
        if count:
            found.append((what, int(count)))
    return found


def _snapshot(connection: Any) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every view (a sorted multiset: repr order copes with NULLs), the raw
    point rows and the dangling ones."""
    snapshot = {view: sorted(rows(connection, f"SELECT * FROM {view}"), key=repr) for view in VIEWS}
    snapshot[RAW_POINTS] = raw_point_rows(connection)
    snapshot[DANGLING] = [tuple(found) for found in dangling_rows(connection)]
    return snapshot


def view_rows(store: str | os.PathLike[str]) -> dict[str, list[tuple[object, ...]]]:
    """A snapshot of the store: every view's rows, then :data:`RAW_POINTS` and
    :data:`DANGLING` (see :func:`raw_point_rows`, :func:`dangling_rows`), after checking
    that the store's series summaries equal a recount of its points."""
    assert_summaries_exact(store)
    connection = connect(store)
    try:
        return _snapshot(connection)
    finally:
        connection.close()


def without_run_ids(views: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple]]:
    """The same rows minus the views' first column (run_id), for stores whose runs were
    created in another order (files that appeared while converting, concurrent converters).
    The raw and dangling rows hold no ids: they are kept as they are."""
    return {
        view: sorted((row[1:] for row in found), key=repr) if view in VIEWS else found
        for view, found in views.items()
    }


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
    """:func:`view_rows` of the store as it would be without the files marked ``gone`` (design
    §7: the only history a store keeps on purpose): their points and rows, then series and
    runs left with nothing.  The store itself is not changed (a rolled-back transaction on a
    server, a copy in memory for SQLite)."""
    with scratch_copy(store) as connection:
        gone = "SELECT id FROM event_files WHERE status = 'gone'"
        for table in POINT_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE file_id IN ({gone})")
        _recount(connection, store)  # the summaries without the deleted points
        # No view reads the current summaries (assert_current_summaries_exact checks them).
        connection.execute("DELETE FROM current_summaries")
        connection.execute("DELETE FROM run_params")  # assert_run_params_exact checks it
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
        return _snapshot(connection)


def _recount(connection: Any, store: str | os.PathLike[str]) -> None:
    from tbconvert.writing.series_summaries import recount_sql

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
    from tbconvert.writing.series_summaries import SERIES_KEY_COLUMNS

    with scratch_copy(store) as connection:
        kept = summaries(connection)
        _recount(connection, store)
        recounted = summaries(connection)
        names = [
            column[0]
            for column in connection.execute("SELECT * FROM series_summaries LIMIT 0").description
        ]
    # A sum depends on the order of its terms: the writer adds a batch at a time.
    at = names.index("value_sum")
    sums = [(row[at], again[at]) for row, again in zip(kept, recounted, strict=True)]
    # A recount has no key to copy for the points of a series gone: the copy is checked
    # against the series below.
    compared = [
        index
        for index, name in enumerate(names)
        if name != "value_sum" and name not in SERIES_KEY_COLUMNS
    ]
    kept, recounted = (
        [tuple(row[index] for index in compared) for row in found] for found in (kept, recounted)
    )
    assert kept == recounted, f"series summaries differ from a recount: {kept} != {recounted}"
    assert all(
        a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))
        for a, b in sums
    ), f"series summaries' sums differ from a recount: {sums}"
    with contextlib.closing(connect(store)) as connection:
        assert_current_summaries_exact(connection)
        # A summary's copy of its series' key (revision 0017), which a selection reads.
        ((wrong,),) = rows(
            connection,
            "SELECT count(*) FROM series_summaries AS m JOIN series AS s "
            "ON s.id = m.series_id WHERE NOT COALESCE(m.run_id = s.run_id AND m.context_id "
            "= s.context_id AND m.name = s.name AND m.plugin = s.plugin, FALSE)",
        )
        assert wrong == 0, f"{wrong} series summaries' keys are not their series'"
        assert_run_params_exact(connection)


# Every params row with what the rule of a selection's value ranks it by.
_PARAMS_RANKED = (
    "SELECT s.run_id, s.name, c.name, p.step, p.file_id, p.record_offset, p.value_index, "
    "p.key, p.value, p.value_num, p.value_type FROM params AS p "
    "JOIN series AS s ON s.id = p.series_id JOIN contexts AS c ON c.id = s.context_id"
)
_SIDECARS = ("hparams.yaml", "params.json")


def expected_run_params(connection: Any) -> dict[tuple[int, str], tuple[object, ...]]:
    """The value a selection reads of each (run, key), by the rule written again in Python
    from the params rows: a sidecar's row is hidden where an event file's series, or a
    sidecar named before its own, holds the key in the run; of the rows left, the first
    context by code point, then the last by (step, file, offset, value index)."""
    found = rows(connection, _PARAMS_RANKED)
    holders: dict[tuple[int, str], set[str]] = {}
    for row in found:
        holders.setdefault((row[0], row[7]), set()).add(row[1])
    best: dict[tuple[int, str], tuple[tuple[object, ...], tuple[object, ...]]] = {}
    for run_id, series, context, step, file_id, offset, index, key, *value in found:
        others = holders[run_id, key]
        if series in _SIDECARS and any(
            other not in _SIDECARS or other < series for other in others
        ):
            continue
        rank = (context.encode(), -step, -file_id, -offset, -index)
        if (run_id, key) not in best or rank < best[run_id, key][0]:
            best[run_id, key] = (rank, tuple(value))
    return {place: value for place, (_rank, value) in best.items()}


def assert_run_params_exact(connection: Any) -> None:
    """Every ``run_params`` row is the value the rule reads from the params rows, and every
    (run, key) the rule gives a value has one."""
    kept = {
        (run_id, key): tuple(value)
        for run_id, key, *value in rows(
            connection, "SELECT run_id, key, value, value_num, value_type FROM run_params"
        )
    }
    expected = expected_run_params(connection)
    assert kept == expected, f"run_params differ from the rule: {kept} != {expected}"


# The scalar series that may have several attempts: those a current summary must exist for.
_MAY_BE_RESUMED = (
    "SELECT s.id FROM series AS s JOIN series_summaries AS m ON m.series_id = s.id "
    "AND m.point_table = 'scalars' WHERE s.plugin = 'scalars' AND (m.maybe_resumed OR EXISTS ("
    "SELECT 1 FROM series AS l WHERE l.run_id = s.run_id AND l.context_id = s.context_id "
    "AND l.plugin = 'session_log'))"
)


def assert_current_summaries_exact(connection: Any) -> None:
    """Every ``current_summaries`` row equals the aggregates of its series' last attempt, as
    the reference rule (``store.attempts_rule``) finds it from the points, and every series
    that may have several attempts has a row."""
    from tbconvert.query.current_aggregates import mean_of
    from tbconvert.store.attempts_rule import is_start, last_attempt, summarise

    kept = {
        row[0]: row[1:]
        for row in rows(
            connection,
            "SELECT series_id, points, last_value, min_value, max_value, value_sum, "
            "value_count, argmin_step, argmax_step FROM current_summaries",
        )
    }
    needed = {row[0] for row in rows(connection, _MAY_BE_RESUMED)}
    assert needed <= set(kept), f"series without a current summary: {needed - set(kept)}"
    for series_id, (points, last, low, high, total, valued, argmin, argmax) in kept.items():
        written = rows(
            connection,
            "SELECT p.step, p.wall_time, p.value, f.path, p.record_offset, p.value_index "
            "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id WHERE p.series_id = ?",
            (series_id,),
        )
        starts = [
            (step, path, offset)
            for step, path, offset, data in rows(
                connection,
                "SELECT t.step, f.path, t.record_offset, b.data FROM tensors AS t "
                "JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id "
                "JOIN blobs AS b ON b.id = t.blob_id JOIN series AS mine ON mine.id = ? "
                "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
                "AND s.context_id = mine.context_id",
                (series_id,),
            )
            if is_start(bytes(data))
        ]
        written.sort(key=lambda point: (point[3].encode(), point[4], point[5]))
        expected = summarise([(point[0], point[2]) for point in last_attempt(written, starts)])
        found = {
            "last": last,
            "min": low,
            "max": high,
            "count": points,
            "argmin": argmin,
            "argmax": argmax,
        }
        mean = mean_of(low, high, total, valued)
        assert found == {k: v for k, v in expected.items() if k != "mean"}, (
            f"current summary of series {series_id}: {found} != {expected}"
        )
        assert mean == expected["mean"] or math.isclose(mean, expected["mean"], rel_tol=1e-9), (
            f"current mean of series {series_id}: {mean} != {expected['mean']}"
        )


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
