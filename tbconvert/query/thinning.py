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

All the series of a chart are thinned by one statement (:func:`thin_many`,
:mod:`.thinning_sql`), each as if alone; :func:`thin_series` is that of one series.

The points are those ``resumed`` names (:mod:`tbconvert.query.resumed`): ``current``, the
default, each series as its last attempt left it (a predicate of the queries:
:mod:`tbconvert.query.attempts`), or ``all``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.query import thinning_sql
from tbconvert.query.attempts import LastAttempt, last_attempts
from tbconvert.query.resumed import RESUMED, RESUMED_DEFAULT

X_AXES = ("step", "wall_time")
# Points a bucket keeps at most (first, last, min, max), and with its first NaN point, five.
KEPT_PER_BUCKET = 4
_PARAMETER = re.compile(r":([A-Za-z_][A-Za-z_0-9]*)")


class ThinPoint(NamedTuple):
    """One point kept (a named tuple: a chart builds tens of thousands).

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
    attempt: LastAttempt | None = None,
    **options: Any,
) -> Thinned:
    """The points of one scalar series over ``[lo, hi]`` that keep its shape:
    :func:`thin_many` of one series (``options`` are its keywords).

    Args:
        attempt: The series' last attempt as an earlier answer read it (``Thinned.attempt``).
    """
    known = {series_id: attempt} if attempt is not None else None
    return thin_many(conn, [series_id], buckets, attempts=known, **options)[series_id]


def thin_many(
    conn: Connection,
    series_ids: Sequence[int],
    buckets: int,
    *,
    lo: float | None = None,
    hi: float | None = None,
    x: str = "step",
    resumed: str = RESUMED_DEFAULT,
    exact_up_to: int | None = None,
    attempts: Mapping[int, LastAttempt] | None = None,
    shifts: Mapping[int, float] | None = None,
) -> dict[int, Thinned]:
    """The points of scalar series over ``[lo, hi]`` that keep their shape, all the series in
    one statement (grouped by series and bucket), each as if thinned alone.

    Args:
        conn: A read connection (``Store.connect()``); the answer is of its snapshot.
        series_ids: The series (``SeriesRef.id``, scalars series).
        buckets: How many buckets each series' range is cut into (1 or more).
        lo, hi: The range, inclusive, on ``x``; None: each series' own first or last.
        x: ``step`` or ``wall_time``.
        resumed: ``current`` (the last attempt) or ``all`` (every point).
        exact_up_to: Give a series whole when its range holds at most this many points
            (default ``KEPT_PER_BUCKET * buckets``).
        attempts: Each series' last attempt as an earlier answer read it
            (``Thinned.attempt``): reused while the series is unchanged, which spares a
            scan of the series.
        shifts: Per series, an amount added to ``lo`` and ``hi`` (a range in time since each
            series' own start).

    Returns:
        Each series' answer, by id.

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
    ids = list(dict.fromkeys(series_ids))
    read: dict[int, LastAttempt] = {}
    if resumed == "current":
        read = last_attempts(conn, ids, attempts)
    keeps = {i: read[i].predicate() for i in ids if i in read and read[i].cuts}
    wanted = {i: _shifted(lo, hi, (shifts or {}).get(i, 0.0)) for i in ids}
    ranges = _ranges(conn, wanted, keeps, x)
    found = {
        i: Thinned([], True, 0, 0, None, None, x, buckets, read.get(i))
        for i in ids
        if i not in ranges
    }
    rows: dict[int, list[Any]] = {i: [] for i in ranges}
    if ranges:
        sql = thinning_sql.statement(ranges, keeps, x, buckets, limit, conn.dialect.name)
        for row in _run(conn, *sql):
            rows[row[0]].append(row)
    for i, (first, last) in ranges.items():
        found[i] = _thinned(rows[i], first, last, x, buckets, read.get(i))
    return {i: found[i] for i in ids}


def _thinned(
    rows: list[Any], lo: Any, hi: Any, x: str, buckets: int, attempt: LastAttempt | None
) -> Thinned:
    """One series' answer from its rows of the statement (:mod:`.thinning_sql`), in order."""
    if not rows:
        return Thinned([], True, 0, 0, lo, hi, x, buckets, attempt)
    total, nan, exact = rows[0][5], rows[0][6], bool(rows[0][7])
    if exact:
        whole = [ThinPoint(row[1], row[2], _float(row[3])) for row in rows]
        return Thinned(whole, True, total, nan, lo, hi, x, buckets, attempt)
    points: list[ThinPoint] = []
    start = 0
    for index in range(1, len(rows) + 1):
        if index == len(rows) or rows[index][4] != rows[start][4]:
            points += _kept(rows, start, index)
            start = index
    return Thinned(points, False, total, nan, lo, hi, x, buckets, attempt)


def _kept(rows: Sequence[Any], start: int, end: int) -> list[ThinPoint]:
    """The points one bucket keeps, from its rows ``rows[start:end]`` (at its first, last or
    NaN's x, or holding its lowest or highest value, in order): its first and last row, the
    first rows holding its extremes and the first NaN."""
    low, high, has_nan = rows[start][8], rows[start][9], rows[start][10] is not None
    chosen: dict[int, list[str]] = {start: ["first"]}
    chosen.setdefault(end - 1, []).append("last")
    found_low = found_high = found_nan = -1
    for index in range(start, end):
        value = rows[index][3]
        if value is None:
            if found_nan < 0 and has_nan:
                found_nan = index
            continue
        if found_low < 0 and value == low:
            found_low = index
        if found_high < 0 and value == high:
            found_high = index
    for role, index in (("min", found_low), ("max", found_high), ("nan", found_nan)):
        if index >= 0:
            chosen.setdefault(index, []).append(role)
    return [
        ThinPoint(rows[i][1], rows[i][2], _float(rows[i][3]), tuple(chosen[i]))
        for i in sorted(chosen)
    ]


def _run(conn: Connection, sql: str, values: dict[str, Any]) -> list[Any]:
    """The rows of ``sql`` (``:name`` parameters) as the driver's tuples, on the driver's own
    cursor: compiling a statement of thousands of parameters costs SQLAlchemy more than
    running it, and a SQLAlchemy row a point more than reading it."""
    order: list[Any] = []

    def placeholder(match: re.Match[str]) -> str:
        order.append(values[match[1]])
        return "?" if conn.dialect.paramstyle == "qmark" else "%s"

    positional = _PARAMETER.sub(placeholder, sql)
    cursor = conn.connection.cursor()
    try:
        if conn.dialect.name == "postgresql":
            # Guessing thousands of buckets, PostgreSQL would compile the statement first (JIT),
            # half a second where the statement takes milliseconds; for this transaction only.
            cursor.execute("SET LOCAL jit = off")
        cursor.execute(positional, tuple(order))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _shifted(lo: float | None, hi: float | None, shift: float) -> tuple[Any, Any]:
    return (None if lo is None else lo + shift, None if hi is None else hi + shift)


def _ranges(
    conn: Connection,
    wanted: dict[int, tuple[Any, Any]],
    keeps: dict[int, str],
    x: str,
) -> dict[int, tuple[Any, Any]]:
    """The ranges asked for (steps: the whole steps in them), open ends filled by each series'
    own first and last x, in one statement; series with an empty range left out."""
    open_ended = [i for i, (lo, hi) in wanted.items() if lo is None or hi is None]
    ends: dict[int, tuple[Any, Any]] = {}
    if open_ended:
        sql = thinning_sql.ends(open_ended, keeps, x)
        ends = {row[0]: (row[1], row[2]) for row in conn.execute(text(sql))}
    found: dict[int, tuple[Any, Any]] = {}
    for i, (lo, hi) in wanted.items():
        first, last = ends.get(i, (None, None))
        lo = first if lo is None else lo
        hi = last if hi is None else hi
        if lo is None or hi is None:
            continue
        lo, hi = (math.ceil(lo), math.floor(hi)) if x == "step" else (float(lo), float(hi))
        if lo <= hi:
            found[i] = (lo, hi)
    return found


def _float(value: float | None) -> float:
    return math.nan if value is None else float(value)
