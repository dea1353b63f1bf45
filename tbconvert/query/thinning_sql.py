"""The SQL of :mod:`.thinning`: the statements that thin many scalar series at once, the same
on SQLite and PostgreSQL.

One statement answers a whole chart, in windows rather than joins, so that each database
reads each point in range once and sorts it twice: ``r`` the series and their ranges; ``pts``
their points in range, each with its bucket; ``t`` each point beside its series' totals and
its (series, bucket)'s first and last x, lowest and highest value and first NaN's x.  The rows
back are a series' every point when it holds few enough (``total <= :limit``), else the points
at those x values or holding those values, in order, which :mod:`.thinning` narrows to one per
role (a bucket's extremes where they first occur).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Each row: series, step, wall time, value, x, bucket, the series' total and NaN count, whether
# it comes whole, then its bucket's first x, last x, lowest, highest and first NaN's x.
_STATEMENT = """
WITH r(series_id, lo, hi) AS (VALUES {ranges}),
pts AS (
  SELECT p.series_id, p.step, p.wall_time, p.value, p.{x} AS x, {bucket} AS bucket,
    p.file_id, p.record_offset, p.value_index
  FROM r JOIN scalars AS p ON p.series_id = r.series_id
  WHERE p.{x} >= r.lo AND p.{x} <= r.hi{where}
),
t AS (
  SELECT q.*, count(*) OVER s AS total, count(*) OVER s - count(value) OVER s AS total_nan,
    min(x) OVER k AS first_x, max(x) OVER k AS last_x, min(value) OVER k AS low,
    max(value) OVER k AS high, min(CASE WHEN value IS NULL THEN x END) OVER k AS nan_x
  FROM pts AS q WINDOW k AS (PARTITION BY series_id, bucket), s AS (PARTITION BY series_id)
)
SELECT series_id, step, wall_time, value, x, bucket, total, total_nan,
  CASE WHEN total <= :limit THEN 1 ELSE 0 END, first_x, last_x, low, high, nan_x
FROM t
WHERE total <= :limit OR x IN (first_x, last_x, nan_x) OR value = low OR value = high
ORDER BY series_id, x, file_id, record_offset, value_index
"""
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
) -> tuple[str, dict[str, Any]]:
    """The statement thinning the series of ``ranges`` (id: (lo, hi) on ``x``), with
    ``:name`` parameters, and their values.  ``keeps``: per series, SQL true of the points of
    its last attempt (on ``scalars AS p``)."""
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
