"""Aggregates of scalar series as their last attempt left them (``--resumed current``), for
the series whose summary does not answer that: a resumed run's (docs/cli.md, "Selecting runs
by expression").

A series' summary (``series_summaries``) is over every point it holds.  Where the series has
one attempt, that is what its last attempt left; where it may have several (its summary's
``maybe_resumed``, or a SessionLog beside it), its current points are read (``query.resumed``,
through ``lookups``) and summarised here.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.query import lookups
from tbconvert.query.results import SeriesRef
from tbconvert.query.resumed import SESSION_LOG_TAG

# Which series of some tags may have several attempts, so that their summary does not answer
# for ``--resumed current``: those whose summary says their points come from several files or
# go back in step (``maybe_resumed``, kept by the writer: a few rows of a partial index), and
# those whose run and context hold a SessionLog (a START may drop points; its series are
# found by their name).  Neither reads a point.
_MAYBE_RESUMED_SQL = (
    "SELECT s.id FROM series_summaries AS m JOIN series AS s ON s.id = m.series_id "
    "WHERE m.maybe_resumed AND m.point_table = 'scalars' AND s.plugin = 'scalars' "
    "AND s.name IN ({tags}) "
    "UNION SELECT s.id FROM series AS l JOIN series AS s ON s.run_id = l.run_id "
    "AND s.context_id = l.context_id AND s.plugin = 'scalars' AND s.name IN ({tags}) "
    f"WHERE l.name = '{SESSION_LOG_TAG}' AND l.plugin = 'session_log'"
)


def current_values(conn: Connection, tags: Sequence[str]) -> dict[int, dict[str, Any]]:
    """The aggregates of every scalar series of ``tags`` that has more than one attempt
    (or may), over the points its last attempt left; ``{series_id: {function: value}}``."""
    names = ", ".join(f":t{index}" for index in range(len(tags)))
    bound = {f"t{index}": tag for index, tag in enumerate(tags)}
    ids = set(conn.execute(text(_MAYBE_RESUMED_SQL.format(tags=names)), bound).scalars())
    if not ids:
        return {}
    refs = [SeriesRef(i, 0, "", "", "", "scalars") for i in sorted(ids)]
    pinned = _Pinned(conn)
    return {
        ref.id: summarise([(row[4], row[6]) for row in points])
        for ref, points in lookups.points_by_series(pinned, "scalars", refs, "current")
    }


def summarise(points: Sequence[tuple[int, float | None]]) -> dict[str, Any]:
    """Every aggregate of a series' points, ``(step, value or None for NaN)`` by step."""
    values = [(value, step) for step, value in points if value is not None]
    low = min((value for value, _ in values), default=None)
    high = max((value for value, _ in values), default=None)
    return {
        "last": points[-1][1] if points else None,
        "min": low,
        "max": high,
        "count": len(points),
        "mean": _mean([value for value, _ in values]),
        "argmin": min((step for value, step in values if value == low), default=None),
        "argmax": min((step for value, step in values if value == high), default=None),
    }


def _mean(values: list[float]) -> float | None:
    """The mean as SQL's ``avg`` has it: an infinity wins, and both are missing (NaN)."""
    mean = sum(values) / len(values) if values else None
    return None if mean is None or mean != mean else mean


class _Pinned:
    """A connection as the ``Connectable`` ``lookups`` reads through."""

    display = "store"

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def connect(self) -> AbstractContextManager[Connection]:
        return nullcontext(self.conn)
