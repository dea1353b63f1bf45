"""A store holding one long scalar series, written straight by SQL on either backend.

Converting a million events takes most of a minute (tensorboardX is slower still), and what
the thinning tests and benchmark read is the store: the schema of the migrations, one run,
one event file, the points in write order, and the series summaries recounted by
``tbconvert.writing.series_summaries.recount_sql`` (what the tests check the writer against),
with the current summary of a series whose steps go back (``writing.current_summaries.fill``).
NaN values are stored as NULL, as the writer stores them.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence

import numpy as np

from tbconvert.rows import POINT_TABLES
from tbconvert.store.engine import create_store_engine, store_url
from tbconvert.store.migrate import ensure_schema
from tbconvert.writing.current_summaries import fill
from tbconvert.writing.series_summaries import recount_sql
from tbconvert.writing.statements import Statements

RUN = "long"
TAG = "loss"
_OWNERS = (
    "INSERT INTO runs (id, source, host, logdir, run_path, group_path, name) "
    "VALUES (1, 'big', 'host', '/big', 'long', '', 'long')",
    "INSERT INTO contexts (id, name) VALUES (1, '')",
    "INSERT INTO series (id, run_id, context_id, name, plugin, dtype) "
    "VALUES (1, 1, 1, 'loss', 'scalars', 'float32')",
)
_FILE = (
    "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, offset_consumed, "
    "records, damaged_records, status) VALUES (1, 1, 1, 'events.out.tfevents.1.host', "
    "{size}, 0, {size}, {records}, 0, 'ok')"
)
_COLUMNS = "series_id, step, file_id, record_offset, value_index, wall_time, value"


def curve(points: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, wall times and values of a noisy decaying loss with a few NaN and infinite
    points and one spike, in write order."""
    rng = np.random.default_rng(seed)
    steps = np.arange(points, dtype=np.int64) * 10
    walls = 1.7e9 + np.arange(points) * 0.05
    values = np.exp(-np.arange(points) / (points / 5 + 1)) + 0.01 * rng.standard_normal(points)
    if points >= 100:
        values[rng.choice(points, 5, replace=False)] = np.nan
        values[points // 3] = math.inf
        values[points // 2] = -math.inf
        values[2 * points // 3] = 50.0
    return steps, walls, values


def build_series_store(
    store: str, steps: Sequence[int], walls: Sequence[float], values: Sequence[float]
) -> None:
    """Write an empty store (a path or URL) holding one series, ``long``/``loss``, of these
    points in write order (steps may repeat or go back)."""
    engine = create_store_engine(store_url(store))
    try:
        ensure_schema(engine)
    finally:
        engine.dispose()
    size = 40 * len(steps) + 24
    rows = [
        (1, int(step), 1, 24 + 40 * index, 0, float(wall), None if math.isnan(v) else float(v))
        for index, (step, wall, v) in enumerate(zip(steps, walls, values, strict=True))
    ]
    statements = [*_OWNERS, _FILE.format(size=size, records=len(rows))]
    if "://" in store:
        _write_postgres(store, statements, rows)
    else:
        _write_sqlite(store, statements, rows)


def _write_sqlite(path: str, statements: list[str], rows: list[tuple[object, ...]]) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN")
        for statement in statements:
            db.execute(statement)
        db.executemany(f"INSERT INTO scalars ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        for statement in recount_sql("sqlite", POINT_TABLES):
            db.execute(statement)
        fill(Statements(lambda: db, pyformat=False))
        db.execute("COMMIT")
    finally:
        db.close()


def _write_postgres(url: str, statements: list[str], rows: list[tuple[object, ...]]) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as db:
        for statement in statements:
            db.execute(statement)  # type: ignore[arg-type]
        with db.cursor().copy(f"COPY scalars ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int8", "int8", "int4", "float8", "float8"])
            for row in rows:
                copy.write_row(row)
        for statement in recount_sql("postgresql", POINT_TABLES):
            db.execute(statement)  # type: ignore[arg-type]
        fill(Statements(lambda: db, pyformat=True))
