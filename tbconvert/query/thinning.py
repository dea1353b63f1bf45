"""A scalar series thinned to a few points per bucket, computed in SQL on the store side, that
keeps its shape exactly: nothing a line through all its points shows is lost.

The range ``[lo, hi]`` of the x axis (``step`` or ``wall_time``) is cut into ``buckets``
equal buckets, by one expression both backends compute alike (integer arithmetic on steps):

    bucket = (step - lo) * buckets / (hi - lo + 1)                      (steps)
    bucket = floor((wall_time - lo) * buckets / (hi - lo)), hi's in the last one   (wall time)

Each bucket keeps its first and last point (by x, then in write order), its lowest and highest
value (the first point holding it) and its first NaN point, so that no spike, infinity or NaN
is hidden; ``v_series`` min and max are those of the kept points.  A range that holds at most
``exact_up_to`` points (by default four per bucket, what thinning would keep anyway) comes back
whole, unthinned.

The points are those ``resumed`` names (:mod:`tbconvert.query.resumed`): ``current``, the
default, each series as its last attempt left it (a predicate of the queries:
:mod:`tbconvert.query.attempts`), or ``all``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.query.attempts import LastAttempt, last_attempt_of
from tbconvert.query.resumed import RESUMED, RESUMED_DEFAULT

X_AXES = ("step", "wall_time")
# Points a bucket keeps at most (first, last, min, max), and with its first NaN point, five.
KEPT_PER_BUCKET = 4
_PARAMETER = re.compile(r":([A-Za-z_][A-Za-z_0-9]*)")
_POINT = "p.step, p.wall_time, p.value, p.file_id, p.record_offset, p.value_index"


@dataclass(frozen=True)
class ThinPoint:
    """One point kept.

    Attributes:
        step, wall_time: Where it was logged (``wall_time`` None when logged as NaN).
        value: Its value; NaN for a NaN point, infinities as logged.
        roles: Why a thinned range kept it: any of ``first``, ``last``, ``min``, ``max`` (in
            its bucket) and ``nan``; empty in an exact answer.
    """

    step: int
    wall_time: float | None
    value: float
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Thinned:
    """A series over a range, thinned or whole.

    Attributes:
        points: The points kept, by x then in write order.
        exact: True when ``points`` are every point of the range.
        total: The points in the range; ``nan``: how many of them are NaN.
        lo, hi: The range (None when the series has no point in it).
        x: ``step`` or ``wall_time``.
        buckets: The buckets asked for.
        attempt: The last attempt read (``resumed="current"``), to pass to the next call.
    """

    points: list[ThinPoint]
    exact: bool
    total: int
    nan: int
    lo: float | None
    hi: float | None
    x: str
    buckets: int
    attempt: LastAttempt | None = None


def thin_series(
    conn: Connection,
    series_id: int,
    buckets: int,
    *,
    lo: float | None = None,
    hi: float | None = None,
    x: str = "step",
    resumed: str = RESUMED_DEFAULT,
    exact_up_to: int | None = None,
    attempt: LastAttempt | None = None,
) -> Thinned:
    """The points of one scalar series over ``[lo, hi]`` that keep its shape.

    Args:
        conn: A read connection (``Store.connect()``); the answer is of its snapshot.
        series_id: The series (``SeriesRef.id``, a scalars series).
        buckets: How many buckets the range is cut into (1 or more).
        lo, hi: The range, inclusive, on ``x``; None: the series' own first or last.
        x: ``step`` or ``wall_time``.
        resumed: ``current`` (the last attempt) or ``all`` (every point).
        exact_up_to: Give the range whole when it holds at most this many points (default
            ``KEPT_PER_BUCKET * buckets``).
        attempt: The series' last attempt as an earlier answer read it
            (``Thinned.attempt``): reused while the series is unchanged, which spares a
            scan of the series.

    Raises:
        UsageError: an unknown ``x`` or ``resumed``, or ``buckets`` under 1.
    """
    if x not in X_AXES:
        raise UsageError(f"unknown x axis {x!r}", hint=" or ".join(X_AXES))
    if resumed not in RESUMED:
        raise UsageError(f"unknown --resumed {resumed!r}", hint="all or current")
    if buckets < 1:
        raise UsageError(f"buckets must be 1 or more, not {buckets}")
    limit = KEPT_PER_BUCKET * buckets if exact_up_to is None else exact_up_to
    if resumed == "current":
        attempt = last_attempt_of(conn, series_id, attempt)
    where = "p.series_id = :id"
    if resumed == "current" and attempt is not None and attempt.cuts:
        where += f" AND {attempt.predicate()}"
    where += " AND p.wall_time IS NOT NULL" if x != "step" else ""
    values: dict[str, Any] = {"id": series_id}
    lo, hi = _range(conn, where, values, x, lo, hi)
    if lo is None or hi is None or lo > hi:
        return Thinned([], True, 0, 0, None, None, x, buckets, attempt)
    where += f" AND p.{x} >= :lo AND p.{x} <= :hi"
    values.update(lo=lo, hi=hi, buckets=buckets)
    query = _Query(conn, where, values, x)
    bounds = query.bounds()
    total = sum(bound.points for bound in bounds)
    nan = sum(bound.nan for bound in bounds)
    if total <= limit:
        points = [ThinPoint(row[0], row[1], _float(row[2])) for row in query.points()]
        return Thinned(points, True, total, nan, lo, hi, x, buckets, attempt)
    return Thinned(query.thinned(bounds), False, total, nan, lo, hi, x, buckets, attempt)


@dataclass(frozen=True)
class _Bounds:
    """One bucket's count, NaN count, first and last x, extreme values and first NaN's x."""

    bucket: int
    points: int
    nan: int
    first_x: Any
    last_x: Any
    low: float | None
    high: float | None
    nan_x: Any


class _Query:
    """The statements over one range: the buckets' bounds (one GROUP BY), the x of each
    bucket's extremes (a scan for the extreme values only), the points at the chosen x."""

    def __init__(self, conn: Connection, where: str, values: dict[str, Any], x: str) -> None:
        self.conn, self.where, self.values, self.x = conn, where, values, x
        self.order = f"ORDER BY p.{x}, p.file_id, p.record_offset, p.value_index"
        if x == "step":
            self.bucket = "(p.step - :lo) * :buckets / (:hi - :lo + 1)"
        elif values["hi"] > values["lo"]:
            self.bucket = (
                "CASE WHEN p.wall_time >= :hi THEN :buckets - 1 ELSE "
                "CAST(floor((p.wall_time - :lo) * :buckets / (:hi - :lo)) AS BIGINT) END"
            )
        else:
            self.bucket = "0"

    def bounds(self) -> list[_Bounds]:
        """Every bucket holding a point, by bucket."""
        x = f"p.{self.x}"
        sql = (
            f"SELECT {self.bucket} AS bucket, count(*), count(*) - count(p.value), min({x}), "
            f"max({x}), min(p.value), max(p.value), min(CASE WHEN p.value IS NULL THEN {x} END) "
            f"FROM scalars AS p WHERE {self.where} GROUP BY 1 ORDER BY 1"
        )
        return [_Bounds(*row) for row in self.run(sql, self.values)]

    def points(self, at: Sequence[Any] | None = None) -> list[Any]:
        """The points of the range (or those at the x values ``at``), in order."""
        values = dict(self.values)
        only = ""
        if at is not None:
            only = f" AND p.{self.x} IN ({_placeholders('at', len(at))})"
            values.update(_named("at", at))
        sql = f"SELECT {_POINT}, p.{self.x} FROM scalars AS p WHERE {self.where}{only} {self.order}"
        return self.run(sql, values)

    def run(self, sql: str, values: dict[str, Any]) -> list[Any]:
        """The rows of ``sql`` (``:name`` parameters) run by the driver itself: compiling a
        statement of thousands of parameters costs SQLAlchemy more than running it."""
        order: list[Any] = []

        def placeholder(match: re.Match[str]) -> str:
            order.append(values[match[1]])
            return "?" if self.conn.dialect.paramstyle == "qmark" else "%s"

        positional = _PARAMETER.sub(placeholder, sql)
        return list(self.conn.exec_driver_sql(positional, tuple(order)))

    def thinned(self, bounds: list[_Bounds]) -> list[ThinPoint]:
        """The points each bucket keeps, with their roles."""
        extremes = sorted({v for b in bounds for v in (b.low, b.high) if v is not None})
        holders: dict[tuple[int, float], Any] = {}
        if extremes:
            values = {**self.values, **_named("v", extremes)}
            sql = (
                f"SELECT {self.bucket} AS bucket, p.value, min(p.{self.x}) FROM scalars AS p "
                f"WHERE {self.where} AND p.value IN ({_placeholders('v', len(extremes))}) "
                "GROUP BY 1, 2"
            )
            for bucket, value, first in self.run(sql, values):
                holders[(bucket, value)] = first
        # What each bucket keeps, as (role, x, value wanted: a number, None for NaN, or any).
        wanted: list[tuple[str, Any, Any]] = []
        for b in bounds:
            wanted += [("first", b.first_x, ...), ("last", b.last_x, ...)]
            wanted += [
                (r, holders[(b.bucket, v)], v)
                for r, v in (("min", b.low), ("max", b.high))
                if v is not None
            ]
            wanted += [("nan", b.nan_x, None)] if b.nan_x is not None else []
        rows = self.points(sorted({at for _, at, _ in wanted}))
        return _roles(rows, wanted)


def _roles(rows: Sequence[Any], wanted: list[tuple[str, Any, Any]]) -> list[ThinPoint]:
    """The rows at the chosen x (in order) narrowed to one per role: the first row at its x
    holding the value wanted; ``last``, the last row at its x."""
    at_x: dict[Any, list[int]] = {}
    for index, row in enumerate(rows):
        at_x.setdefault(row[6], []).append(index)
    chosen: dict[int, list[str]] = {}
    for role, x, value in wanted:
        indices = at_x[x][::-1] if role == "last" else at_x[x]
        index = next(
            i for i in indices if value is ... or rows[i][2] == value or rows[i][2] is value
        )
        chosen.setdefault(index, []).append(role)
    return [
        ThinPoint(rows[index][0], rows[index][1], _float(rows[index][2]), tuple(roles))
        for index, roles in sorted(chosen.items())
    ]


def _placeholders(name: str, count: int) -> str:
    return ", ".join(f":{name}{index}" for index in range(count))


def _named(name: str, values: Sequence[Any]) -> dict[str, Any]:
    return {f"{name}{index}": value for index, value in enumerate(values)}


def _range(
    conn: Connection,
    where: str,
    values: dict[str, Any],
    x: str,
    lo: float | None,
    hi: float | None,
) -> tuple[Any, Any]:
    """The range asked for (steps: the whole steps in it), its open ends filled by the series'
    own first and last x."""
    first = last = None
    if lo is None or hi is None:
        first, last = conn.execute(
            # Two subqueries, so that each is one probe of the key on steps.
            text(
                f"SELECT (SELECT min(p.{x}) FROM scalars AS p WHERE {where}), "
                f"(SELECT max(p.{x}) FROM scalars AS p WHERE {where})"
            ),
            values,
        ).one()
    lo = first if lo is None else lo
    hi = last if hi is None else hi
    if lo is None or hi is None:
        return None, None
    if x == "step":
        return math.ceil(lo), math.floor(hi)
    return float(lo), float(hi)


def _float(value: float | None) -> float:
    return math.nan if value is None else float(value)
