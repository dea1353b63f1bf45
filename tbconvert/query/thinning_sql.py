"""The SQL of :mod:`.thinning`: the statement that thins many scalar series at once, the same
on SQLite and PostgreSQL but for how a bucket's points are read (``_BUCKET_POINTS``).

One statement answers a whole chart: ``r`` the series and their ranges; ``g`` one row per
(series, bucket), a ``GROUP BY`` of the points in range (their count, first and last step and
x, lowest and highest value, first NaN's x); ``t`` each series' totals.  A series holding few
enough points (``total <= :limit``) comes back whole, by one range read of the key; the others
come back as the points of each bucket at its first, last or NaN's x or holding its lowest or
highest value, each bucket read again by its own step range of the key (``g`` joined to the
points by ``series_id`` and a step range, never by the bucket: a join on a computed bucket has
no index, and SQLite then loops over one side for every row of the other; measured in
docs/performance.md, "The viewer (#46)").  The rows come in
order, by x then in write order, and :mod:`.thinning` narrows them to one per role (a bucket's
extremes where they first occur).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Each row: series, step, wall time, value, bucket, the series' total and NaN count, whether it
# comes whole, then its bucket's lowest and highest value and whether it holds a NaN (the
# bucket and after NULL for a series that comes whole).
_STATEMENT = """
WITH r(series_id, lo, hi) AS (VALUES {ranges}),
g AS (
  SELECT p.series_id, {bucket} AS bucket, count(*) AS n, count(p.value) AS finite,
    min(p.step) AS first_step, max(p.step) AS last_step, min(p.{x}) AS first_x,
    max(p.{x}) AS last_x, min(p.value) AS low, max(p.value) AS high,
    min(CASE WHEN p.value IS NULL THEN p.{x} END) AS nan_x
  FROM r JOIN scalars AS p ON p.series_id = r.series_id
  WHERE p.{x} >= r.lo AND p.{x} <= r.hi{where}
  GROUP BY 1, 2
),
t AS (
  SELECT series_id, CAST(sum(n) AS BIGINT) AS total,
    CAST(sum(n) - sum(finite) AS BIGINT) AS total_nan
  FROM g
  GROUP BY series_id
)
SELECT series_id, step, wall_time, value, bucket, total, total_nan, whole, low, high, nan_x
FROM (
  SELECT p.series_id, p.step, p.wall_time, p.value, p.{x} AS x, NULL AS bucket, t.total,
    t.total_nan, 1 AS whole, NULL AS low, NULL AS high, NULL AS nan_x, p.file_id,
    p.record_offset, p.value_index
  FROM t CROSS JOIN r CROSS JOIN scalars AS p
  WHERE r.series_id = t.series_id AND t.total <= :limit AND p.series_id = t.series_id
    AND p.{x} >= r.lo AND p.{x} <= r.hi{where}
  UNION ALL
  SELECT p.series_id, p.step, p.wall_time, p.value, p.{x}, g.bucket, t.total, t.total_nan, 0,
    g.low, g.high, g.nan_x, p.file_id, p.record_offset, p.value_index
  FROM t CROSS JOIN g CROSS JOIN {bucket_points}
  WHERE g.series_id = t.series_id AND t.total > :limit AND p.series_id = g.series_id
    AND p.step >= g.first_step AND p.step <= g.last_step AND p.{x} >= g.first_x
    AND p.{x} <= g.last_x{where}
    AND (p.{x} IN (g.first_x, g.last_x, g.nan_x) OR p.value = g.low OR p.value = g.high)
) AS kept
ORDER BY series_id, x, file_id, record_offset, value_index
"""
# A bucket's points, read by its step range of the key: SQLite keeps the order of a CROSS JOIN,
# while PostgreSQL, guessing thousands of buckets, would sort every point to merge them with the
# buckets unless the read is a LATERAL subquery, which SQLite does not have.
_BUCKET_POINTS = {
    "sqlite": "scalars AS p",
    "postgresql": "LATERAL (SELECT * FROM scalars AS q WHERE q.series_id = g.series_id "
    "AND q.step >= g.first_step AND q.step <= g.last_step) AS p",
}
# Integer arithmetic on steps; on wall time the last bucket holds ``hi``.
_STEP_BUCKET = "(p.step - r.lo) * :buckets / (r.hi - r.lo + 1)"
_WALL_BUCKET = (
    "CASE WHEN r.hi <= r.lo THEN 0 WHEN p.wall_time >= r.hi THEN :buckets - 1 ELSE "
    "CAST(floor((p.wall_time - r.lo) * :buckets / (r.hi - r.lo)) AS BIGINT) END"
)


def statement(
    ranges: Mapping[int, tuple[Any, Any]],
    keeps: Mapping[int, str],
    x: str,
    buckets: int,
    limit: int,
    dialect: str = "sqlite",
) -> tuple[str, dict[str, Any]]:
    """The statement thinning the series of ``ranges`` (id: (lo, hi) on ``x``), with
    ``:name`` parameters, and their values.  ``keeps``: per series, SQL true of the points of
    its last attempt (on ``scalars AS p``); ``dialect``: ``sqlite`` or ``postgresql``."""
    kind = "BIGINT" if x == "step" else "DOUBLE PRECISION"
    values: dict[str, Any] = {"buckets": buckets, "limit": limit}
    rows = []
    for index, (series_id, (lo, hi)) in enumerate(ranges.items()):
        values.update({f"s{index}": series_id, f"l{index}": lo, f"h{index}": hi})
        rows.append(
            f"(CAST(:s{index} AS BIGINT), CAST(:l{index} AS {kind}), CAST(:h{index} AS {kind}))"
        )
    sql = _STATEMENT.format(
        ranges=", ".join(rows),
        x=x,
        bucket=_STEP_BUCKET if x == "step" else _WALL_BUCKET,
        where=_where(keeps, x),
        bucket_points=_BUCKET_POINTS[dialect],
    )
    return sql, values


def ends(series_ids: Sequence[int], keeps: Mapping[int, str], x: str) -> str:
    """A statement of each series' first and last x (of its last attempt when ``keeps`` has
    it): two probes of the key a series, whatever their number."""
    parts = []
    for series_id in series_ids:
        where = f"p.series_id = {int(series_id)}{_where(keeps, x, series_id)}"
        parts.append(
            f"SELECT {int(series_id)}, (SELECT min(p.{x}) FROM scalars AS p WHERE {where}), "
            f"(SELECT max(p.{x}) FROM scalars AS p WHERE {where})"
        )
    return " UNION ALL ".join(parts)


def _where(keeps: Mapping[int, str], x: str, only: int | None = None) -> str:
    """The conditions beyond the range: a wall time logged, and each resumed series' last
    attempt (``only``: of that series alone)."""
    where = " AND p.wall_time IS NOT NULL" if x != "step" else ""
    for series_id, keep in keeps.items():
        if only is None:
            where += f" AND (p.series_id <> {int(series_id)} OR {keep})"
        elif series_id == only:
            where += f" AND {keep}"
    return where
