"""``tbconvert.query.sql.run_read_only``: one statement, read-only, on SQLite and PostgreSQL.

Results are checked against the same SQL run through the database driver itself (sqlite3,
psycopg); refusals against the store's views, row counts and schema before and after.
"""

from __future__ import annotations

import decimal
import math
from pathlib import Path
from typing import Any

import pytest

import tbconvert
from tbconvert.errors import StoreError, UsageError
from tbconvert.query.sql import RefusedStatement, run_read_only, statement_words
from tests.support.pgserver import PostgresServer
from tests.support.snapshots import is_server, query_rows, view_rows


def _plain(value: Any) -> Any:
    """What the driver gives, as run_read_only promises it (numerics as int or float)."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def _same_rows(found: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> bool:
    def key(value: Any) -> Any:
        return "NaN" if isinstance(value, float) and math.isnan(value) else _plain(value)

    return [tuple(map(key, row)) for row in found] == [tuple(map(key, row)) for row in expected]


ORACLE_STATEMENTS = [
    "SELECT * FROM v_runs ORDER BY run_id",
    "SELECT run_path, context, tag, step, value FROM v_scalars "
    "ORDER BY run_path, context, tag, step",
    "SELECT tag, count(*) AS n, min(value) AS low, max(value) AS high, avg(step) AS mean "
    "FROM v_scalars GROUP BY tag ORDER BY tag",
    "SELECT * FROM v_params ORDER BY run_id, context, key",
    "SELECT id, data FROM blobs ORDER BY id",
    "WITH last AS (SELECT run_path, max(step) AS step FROM v_scalars GROUP BY run_path) "
    "SELECT * FROM last ORDER BY run_path",
]


@pytest.mark.parametrize("sql", ORACLE_STATEMENTS)
def test_rows_equal_the_driver(store: Any, store_path: str, sql: str) -> None:
    result = run_read_only(store, sql)
    expected = query_rows(store_path, sql)
    assert expected, "the oracle statement should return rows"
    assert _same_rows(result.rows, expected)
    assert not result.truncated
    assert len(result.columns) == len(expected[0])


def test_columns_are_named_as_selected(store: Any) -> None:
    result = run_read_only(store, "SELECT run_id, run_path AS path FROM v_runs")
    assert result.columns == ("run_id", "path")


def test_parameters_are_named(store: Any, store_path: str) -> None:
    sql = "SELECT run_path, step, value FROM v_scalars WHERE tag = {} AND step >= {} "
    sql += "ORDER BY run_path, step"
    found = run_read_only(store, sql.format(":tag", ":step"), {"tag": "loss", "step": 5})
    expected = query_rows(store_path, sql.format("?", "?"), "loss", 5)
    assert expected and _same_rows(found.rows, expected)


def test_max_rows_caps_and_says_so(store: Any, store_path: str) -> None:
    sql = "SELECT run_id FROM v_runs ORDER BY run_id"
    everything = query_rows(store_path, sql)
    capped = run_read_only(store, sql, max_rows=2)
    assert capped.rows == everything[:2] and capped.truncated
    whole = run_read_only(store, sql, max_rows=len(everything))
    assert whole.rows == everything and not whole.truncated
    assert run_read_only(store, sql, max_rows=0).rows == []


def test_a_missing_parameter_is_a_usage_error(store: Any) -> None:
    with pytest.raises(UsageError) as error:
        run_read_only(store, "SELECT run_id FROM v_runs WHERE run_path = :run")
    assert "run" in str(error.value) and not isinstance(error.value, RefusedStatement)


def test_a_database_error_is_a_store_error(store: Any, store_path: str) -> None:
    with pytest.raises(StoreError) as error:
        run_read_only(store, "SELECT * FROM no_such_table")
    assert "no_such_table" in str(error.value) and store.display in str(error.value)


def test_statement_words_skip_strings_and_comments() -> None:
    sql = "-- DELETE\n/* DROP */ SELECT 'UPDATE', \"INSERT\" FROM $x$ CREATE $x$; x"
    assert statement_words(sql) == ["SELECT", "FROM", ";", "X"]


# ---------------------------------------------------------------------------- refusals

# (statement, what the refusal names) on both backends.
WRITES = [
    ("DELETE FROM runs", "DELETE"),
    ("delete from scalars where step > 0", "DELETE"),
    ("UPDATE runs SET name = 'x'", "UPDATE"),
    ("INSERT INTO contexts (name) VALUES ('x')", "INSERT"),
    ("DROP TABLE scalars", "DROP"),
    ("DROP VIEW v_runs", "DROP"),
    ("CREATE TABLE notes (body TEXT)", "CREATE"),
    ("CREATE TEMP TABLE notes (body TEXT)", "CREATE"),
    ("CREATE INDEX extra ON runs (name)", "CREATE"),
    ("ALTER TABLE runs ADD COLUMN extra INTEGER", "ALTER"),
    ("ANALYZE", "ANALYZE"),
    ("REINDEX", "REINDEX"),
    ("BEGIN", "BEGIN"),
    ("  /* a comment first */ (DELETE FROM runs)", "DELETE"),
    ("SELECT 1; DELETE FROM runs", "several statements"),
    ("SELECT 1; SELECT 2", "several statements"),
    ("", "no SQL statement"),
    ("-- only a comment", "no SQL statement"),
]
SQLITE_WRITES = [
    ("WITH gone AS (SELECT 1) DELETE FROM runs", "DELETE on runs"),
    ("WITH x AS (SELECT 1) UPDATE sqlite_master SET sql = NULL", "UPDATE"),
    ("EXPLAIN DELETE FROM runs", "DELETE on runs"),
    ("PRAGMA writable_schema = ON", "PRAGMA writable_schema = ON"),
    ("PRAGMA query_only = OFF", "PRAGMA query_only = OFF"),
    ("PRAGMA user_version = 7", "PRAGMA user_version = 7"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode = DELETE"),
    ("ATTACH DATABASE '{tmp}/attached.db' AS other", "ATTACH"),
    ("VACUUM INTO '{tmp}/copy.db'", "VACUUM"),
    ("REPLACE INTO contexts (name) VALUES ('x')", "REPLACE"),
]
POSTGRES_WRITES = [
    ("WITH gone AS (DELETE FROM runs RETURNING id) SELECT * FROM gone", "DELETE"),
    ("WITH made AS (INSERT INTO contexts (name) VALUES ('x') RETURNING id) SELECT 1", "INSERT"),
    ("SELECT * INTO copied FROM runs", "writing"),
    ("EXPLAIN ANALYZE DELETE FROM scalars", "DELETE"),
    ("COPY runs TO STDOUT", "COPY"),
    ("TRUNCATE scalars", "TRUNCATE"),
    ("SET default_transaction_read_only = off", "SET"),
    ("DO $$ BEGIN DELETE FROM runs; END $$", "DO"),
]


def _schema(store_path: str) -> list[tuple[Any, ...]]:
    if is_server(store_path):
        sql = (
            "SELECT table_name, table_type FROM information_schema.tables "
            "WHERE table_schema = 'public' ORDER BY table_name"
        )
        return query_rows(store_path, sql)
    return query_rows(store_path, "SELECT type, name, sql FROM sqlite_master ORDER BY name")


def _counts(store_path: str) -> list[tuple[Any, ...]]:
    tables = ("runs", "contexts", "series", "scalars", "images", "blobs", "event_files")
    return [query_rows(store_path, f"SELECT count(*) FROM {table}")[0] for table in tables]


def test_every_write_is_refused_and_the_store_is_unchanged(
    store: Any, store_path: str, tmp_path: Path
) -> None:
    writes = WRITES + (POSTGRES_WRITES if is_server(store_path) else SQLITE_WRITES)
    before = (view_rows(store_path), _counts(store_path), _schema(store_path))
    for sql, named in writes:
        with pytest.raises(RefusedStatement) as error:
            run_read_only(store, sql.format(tmp=tmp_path))
        message = str(error.value)
        assert named in message, (sql, message)
        assert "\n" not in message and store.display in message
    assert (view_rows(store_path), _counts(store_path), _schema(store_path)) == before
    assert list(tmp_path.iterdir()) == []  # neither ATTACH nor VACUUM INTO made a file
    # The connection the refusals ran on still reads.
    assert run_read_only(store, "SELECT count(*) FROM v_runs").rows == [(10,)]


def test_reading_pragmas_and_describing_ones_run(store: Any, store_path: str) -> None:
    if is_server(store_path):
        assert run_read_only(store, "SHOW transaction_read_only").rows == [("on",)]
        assert run_read_only(store, "TABLE v_runs").rows == query_rows(
            store_path, "SELECT * FROM v_runs"
        )
        return
    info = run_read_only(store, "PRAGMA table_info(runs)")
    assert info.rows == query_rows(store_path, "PRAGMA table_info(runs)")
    assert run_read_only(store, "PRAGMA query_only").rows == [(1,)]
    function = "SELECT name FROM pragma_table_info('runs') ORDER BY cid"
    assert run_read_only(store, function).rows == query_rows(store_path, function)


def test_server_values_become_plain(pg_server: PostgresServer) -> None:
    """Numeric, date, timestamp and bytea columns exist on PostgreSQL only: a store of its own
    there, whichever backend the module's store is on."""
    url = pg_server.new_database("plain_values")
    with tbconvert.open_store(url, upgrade=True) as store:
        sql = (
            "SELECT 2::numeric AS whole, 1.5::numeric AS part, 'NaN'::float8 AS nan, "
            "date '2026-01-02' AS day, timestamp '2026-01-02 03:04:05' AS at, "
            "'\\x00ff'::bytea AS data, count(*) AS runs FROM v_runs"
        )
        ((whole, part, nan, day, at, data, runs),) = run_read_only(store, sql).rows
    assert (whole, part, day, at, data) == (2, 1.5, "2026-01-02", "2026-01-02T03:04:05", b"\0\xff")
    assert type(whole) is int and math.isnan(nan)
    assert runs == query_rows(url, "SELECT count(*) FROM v_runs")[0][0] == 0


def test_the_python_api_page_example_runs(store: Any, capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "python-api.md").read_text()
    (block,) = [
        part.split("```", 1)[0]
        for part in page.split("```python\n")[1:]
        if "run_read_only(store" in part.split("```", 1)[0]
    ]
    namespace: dict[str, Any] = {"store": store}
    exec(compile(block, "docs/python-api.md", "exec"), namespace)  # our own docs
    result = namespace["result"]
    assert result.columns == ("run_path", "value") and result.rows and not result.truncated
    assert str(result.columns) in capsys.readouterr().out
