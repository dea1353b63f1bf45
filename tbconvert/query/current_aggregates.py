"""Aggregates of scalar series as their last attempt left them (``--resumed current``), for
the series whose summary does not answer that: a resumed run's (docs/cli.md, "Selecting runs
by expression").

A series' summary (``series_summaries``) is over every point it holds.  Where the series has
one attempt, that is what its last attempt left; where it may have several (its summary's
``maybe_resumed``, or a SessionLog beside it), the writer keeps the aggregates of its current
points in ``current_summaries`` (``writing.current_summaries``, the rule of
``store.attempts_rule``), read here without a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.store.attempts_rule import summarise

__all__ = ["current_values", "summarise"]

_CURRENT_SQL = (
    "SELECT c.series_id, c.points, c.last_value, c.min_value, c.max_value, c.value_sum, "
    "c.value_count, c.argmin_step, c.argmax_step FROM current_summaries AS c "
    "JOIN series AS s ON s.id = c.series_id WHERE s.plugin = 'scalars' AND s.name IN ({tags})"
)


def current_values(conn: Connection, tags: Sequence[str]) -> dict[int, dict[str, Any]]:
    """The aggregates of every scalar series of ``tags`` that has more than one attempt
    (or may), over the points its last attempt left; ``{series_id: {function: value}}``."""
    if not tags:
        return {}
    names = ", ".join(f":t{index}" for index in range(len(tags)))
    bound = {f"t{index}": tag for index, tag in enumerate(tags)}
    found = {}
    for row in conn.execute(text(_CURRENT_SQL.format(tags=names)), bound):
        series_id, points, last, low, high, total, valued, argmin, argmax = row
        found[series_id] = {
            "last": last,
            "min": low,
            "max": high,
            "count": points,
            "mean": mean_of(low, high, total, valued),
            "argmin": argmin,
            "argmax": argmax,
        }
    return found


def mean_of(
    low: float | None, high: float | None, total: float | None, valued: int | None
) -> float | None:
    """The mean of a summary's values as SQL's ``avg`` has it (the selection's rule): an
    infinity wins, and both are missing; ``total`` is the sum of the finite values."""
    if low == float("-inf") and high == float("inf"):
        return None
    if high == float("inf") or low == float("-inf"):
        return high if high == float("inf") else low
    return None if total is None or not valued else total / valued
