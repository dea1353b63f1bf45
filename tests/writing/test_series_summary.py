"""Series summaries (#16): exact, cheap to read, and read by everything that lists series.

Exactness after any history is checked wherever stores are compared: ``snapshots.view_rows``
recounts the summaries from the points on a copy of the store (crash points, the Hypothesis
state machine, incremental and concurrency tests).  Here: the NumPy aggregation against a
plain-Python one on random rows, ``v_series`` against the point views, the query plans, and
``runs``/``show`` never counting points.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from tbconvert import open_store
from tbconvert.query.inventory import TREND_SAMPLE
from tbconvert.rows import PACKED_ROW, FileRows
from tbconvert.writing import series_summaries
from tests.support.snapshots import StoreFactory, assert_summaries_exact, connect, is_server, rows
from tests.support.sweep import build_store

_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, -0.0])
)


@st.composite
def scalar_rows(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Scalar rows of one file: few series, clashing steps, NaN, offsets in record order."""
    count = draw(st.integers(1, 40))
    result = []
    offset = 0
    for _ in range(count):
        offset += draw(st.integers(1, 50))
        for index in range(draw(st.integers(1, 2))):
            result.append(
                (
                    draw(st.integers(1, 4)),
                    draw(st.integers(-3, 3)),
                    7,
                    offset,
                    index,
                    draw(st.one_of(st.none(), _FLOATS)),
                    draw(_FLOATS),
                )
            )
    return result


def _brute(rows_: list[tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """The summary of each series, the slow obvious way (NaN and None are no value)."""
    by_series: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows_:
        by_series[row[0]].append(row)

    def real(values: list[Any]) -> list[float]:
        return [v for v in values if v is not None and not math.isnan(v)]

    result = {}
    for series, group in by_series.items():
        last = max(group, key=lambda row: (row[1], row[3], row[4]))
        walls, values = real([r[5] for r in group]), real([r[6] for r in group])
        result[series] = (
            len(group),
            min(r[1] for r in group),
            max(r[1] for r in group),
            min(walls, default=None),
            max(walls, default=None),
            last[3],
            last[4],
            None if last[5] is None or math.isnan(last[5]) else last[5],
            None if math.isnan(last[6]) else last[6],
            min(values, default=None),
            max(values, default=None),
        )
    return result


@settings(max_examples=200, deadline=None)
@given(scalar_rows(), st.booleans())
def test_chunk_aggregates_equal_a_plain_count(generated: list[tuple[Any, ...]], pack: bool) -> None:
    data = FileRows.of(generated, 7)
    if pack:  # the block path's packed rows (value index 0 only), mixed with tuples
        packed = [row for row in generated if row[4] == 0 and row[5] is not None]
        tuples = [row for row in generated if row not in packed]
        blob = b"".join(PACKED_ROW.pack(r[0], r[1], r[3], r[5], r[6]) for r in packed)
        merged = FileRows.merge(tuples, [(len(tuples), blob)] if packed else [])
        data = FileRows(merged.parts(), len(merged), 7)
    got = {
        s.series_id: (
            s.points,
            s.first_step,
            s.last_step,
            s.first_wall_time,
            s.last_wall_time,
            s.last_record_offset,
            s.last_value_index,
            s.last_point_wall_time,
            s.last_value,
            s.min_value,
            s.max_value,
        )
        for s in series_summaries._aggregate("scalars", data)
    }
    assert all(s.last_file_id == 7 for s in series_summaries._aggregate("scalars", data))
    assert got == _brute(list(data))


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("summaries"), make_store)


def test_v_series_equals_the_point_views(store_path: str) -> None:
    assert_summaries_exact(store_path)
    expected: dict[tuple[Any, ...], list[Any]] = {}
    views = {
        "v_scalars": "value",
        "v_images": "NULL",
        "v_histograms": "NULL",
        "v_texts": "NULL",
        "v_audio": "NULL",
        "v_tensors": "NULL",
    }
    with connect(store_path) as db:
        plugins = {
            (run, context, tag): plugin
            for run, context, tag, plugin in rows(
                db,
                "SELECT r.run_path, c.name, s.name, s.plugin FROM series AS s "
                "JOIN runs AS r ON r.id = s.run_id JOIN contexts AS c ON c.id = s.context_id",
            )
        }
        for view, value in views.items():
            points = rows(
                db, f"SELECT run_path, context, tag, step, wall_time, {value} FROM {view}"
            )
            for run, context, tag, step, wall, number in points:
                expected.setdefault((run, context, tag), []).append((step, wall, number))
        last = {
            (run, context, tag): value
            for run, context, tag, value in rows(
                db, "SELECT run_path, context, tag, value FROM v_last_scalars"
            )
        }
        got = {(row[1], row[2], row[3]): row[4:] for row in rows(db, "SELECT * FROM v_series")}
        # A point is a row of a point table (an image or text element each).
        element_points = {
            (row[0], row[1], row[2]): row[3]
            for row in rows(
                db,
                "SELECT r.run_path, c.name, s.name, count(*) FROM ("
                + " UNION ALL ".join(
                    f"SELECT series_id FROM {table}"
                    for table in (
                        "scalars",
                        "images",
                        "histograms",
                        "texts",
                        "params",
                        "audio",
                        "tensors",
                    )
                )
                + ") AS p JOIN series AS s ON s.id = p.series_id JOIN runs AS r ON r.id = s.run_id "
                "JOIN contexts AS c ON c.id = s.context_id GROUP BY r.run_path, c.name, s.name",
            )
        }
    assert set(got) == set(element_points)
    for key, (plugin, count, first, final, first_wall, last_wall, value, low, high) in got.items():
        assert plugin == plugins[key] and count == element_points[key]
        points = expected.get(key, [])
        if not points:  # params have no view of steps
            continue
        steps = [p[0] for p in points]
        walls = [p[1] for p in points if p[1] is not None]
        assert (first, final) == (min(steps), max(steps))
        assert (first_wall, last_wall) == (min(walls, default=None), max(walls, default=None))
        if plugin == "scalars":
            values = [p[2] for p in points if p[2] is not None]
            assert (low, high) == (min(values, default=None), max(values, default=None))
            assert value == last[key] or (value is None and last[key] is None)
        else:
            assert (value, low, high) == (None, None, None)


def _plan(store: str, sql: str, analyze: bool = False) -> str:
    with connect(store) as db:
        if is_server(store):
            db.execute("ANALYZE")
            explain = "EXPLAIN ANALYZE" if analyze else "EXPLAIN"
            return "\n".join(row[0] for row in rows(db, f"{explain} {sql}"))
        return "\n".join(str(row[-1]) for row in rows(db, f"EXPLAIN QUERY PLAN {sql}"))


@pytest.fixture(scope="module")
def many_points(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    """A store of 2 runs of 100 scalar series of 1,000 points, which the plan tests only read."""
    store = make_store(tmp_path_factory.mktemp("many-points"))
    _many_points(store, runs=2, steps=1_000)
    return store


@pytest.mark.parametrize("view", ["v_last_scalars", "v_series"])
def test_listing_views_never_scan_a_point_table(many_points: str, view: str) -> None:
    store = many_points
    plan = _plan(store, f"SELECT * FROM {view}")
    # Not even a seek: the summaries hold the last point (a join on the five key columns
    # made PostgreSQL expect one row in all and loop over the series for each of them).
    for table in ("scalars", "images", "histograms", "texts", "params", "audio", "tensors"):
        assert f" on {table} " not in plan and f" {table} " not in plan, plan
    if not is_server(store):
        scans = [line.split()[1] for line in plan.splitlines() if line.startswith("SCAN")]
        assert set(scans) <= {"m", "t", "series_summaries"}, plan
    else:
        # Each series row is found once, not once per summary row.
        assert "Rows Removed by Join Filter" not in _plan(store, f"SELECT * FROM {view}", True)


def test_shows_trends_are_one_statement_of_key_seeks(many_points: str) -> None:
    store = many_points
    statements: list[str] = []
    with open_store(store) as opened:
        event.listen(opened.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        shown = opened.describe("run_001")
    assert len(shown["series"]) == 100 and all(len(s["trend"]) == 24 for s in shown["series"])
    # A statement per series cost a round trip and a plan each: most of `show` on a server.
    trends = [s for s in statements if f"LIMIT {TREND_SAMPLE}" in s]
    assert len(trends) == 1
    plan = _plan(store, trends[0])
    if is_server(store):
        assert "Seq Scan on scalars" not in plan, plan
    else:
        assert "SEARCH p USING PRIMARY KEY" in plan and "SCAN p" not in plan, plan


def _many_points(store: str, runs: int, steps: int) -> None:
    """A store of ``runs`` runs of 100 scalar series of ``steps`` points, written by SQL
    (a plan depends on the sizes, not on how the rows came)."""
    from benchmarks import query

    if is_server(store):
        query.build_postgres(store, runs, steps)
    else:
        query.build_sqlite(Path(store), runs, steps)


def test_runs_and_show_read_summaries_not_points(store_path: str) -> None:
    statements: list[str] = []
    opened = open_store(store_path)

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(opened.engine, "before_cursor_execute", seen)
    try:
        listed = opened.runs()
        shown = opened.describe("sweep/lr_0.1")
    finally:
        event.remove(opened.engine, "before_cursor_execute", seen)
        opened.close()
    assert listed and shown["series"]
    tables = "scalars|images|histograms|texts|params|audio|tensors"
    reads = [s for s in statements if re.search(rf"\b(FROM|JOIN) ({tables})\b", s)]
    # Only seeks of last values by their whole key, a few points per range of each trend,
    # and the hparams sessions (one row per key).
    allowed = ("AND value_index = ", f"ORDER BY step LIMIT {TREND_SAMPLE}", "FROM params")
    assert reads and all(any(mark in s for mark in allowed) for s in reads), reads


def test_a_sqlite_store_of_revision_0005_gets_summaries(tmp_path: Path) -> None:
    """Migration 0006 fills the summaries from the points a store already holds."""
    from benchmarks import query
    from tbconvert.store.engine import create_store_engine, store_url
    from tbconvert.store.migrate import alembic_config

    path = tmp_path / "old.db"
    query.build_sqlite(path, 1, 300)
    expected = sqlite3.connect(path).execute("SELECT * FROM v_series ORDER BY tag").fetchall()
    engine = create_store_engine(store_url(str(path)))
    try:
        from alembic import command

        with engine.begin() as conn:
            config = alembic_config(conn)
            command.downgrade(config, "0005")
            command.upgrade(config, "head")
    finally:
        engine.dispose()
    after = sqlite3.connect(path).execute("SELECT * FROM v_series ORDER BY tag").fetchall()
    assert after == expected and len(after) == 100
    assert_summaries_exact(str(path))


def test_revision_0017_copies_each_series_key_and_its_downgrade_drops_it(
    store: str, tmp_path: Path
) -> None:
    from alembic import command
    from sqlalchemy import inspect, text

    from tbconvert import convert
    from tbconvert.query.selection import RunSelection, select_runs
    from tbconvert.store import migrate
    from tbconvert.store.engine import create_store_engine, store_url
    from tests.support.eventfiles import scalar_events, write_events

    for run, context in (("a", ""), ("b", ""), ("b", "val")):
        folder = tmp_path / "logs" / run / context
        write_events(folder / "events.out.tfevents.1.h", scalar_events("loss", range(4)))
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    key = (
        "SELECT s.run_id, s.context_id, s.name, s.plugin, m.run_id, m.context_id, m.name, "
        "m.plugin FROM series_summaries AS m JOIN series AS s ON s.id = m.series_id"
    )
    engine = create_store_engine(store_url(store))
    try:
        with engine.begin() as conn:
            command.downgrade(migrate.alembic_config(conn), "0016")
            columns = {c["name"] for c in inspect(conn).get_columns("series_summaries")}
            assert not columns & {"run_id", "context_id", "name", "plugin"}
        with engine.begin() as conn:
            command.upgrade(migrate.alembic_config(conn), "head")
            found = conn.execute(text(key)).all()
            chosen = select_runs(conn, RunSelection(where='count(loss, context="val") == 4'))
        migrate.check(engine)
    finally:
        engine.dispose()
    assert len(found) == 3 and all(row[:4] == row[4:] for row in found)
    assert [row["run_path"] for row in chosen] == ["b"]
    assert_summaries_exact(store)
