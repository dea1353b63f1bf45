"""Aggregates of scalar series as their last attempt left them (``--resumed current``), for
the series whose summary does not answer that: a resumed run's (docs/cli.md, "Selecting runs
by expression").

A series' summary (``series_summaries``) is over every point it holds.  Where the series has
one attempt, that is what its last attempt left; where it may have several, its current points
are read (``query.resumed``, through ``lookups``) and summarised here.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.query import lookups
from tbconvert.query.results import SeriesRef

# Which series of some tags may have several attempts, so that their summary does not answer
# for ``--resumed current``: those whose run and context hold several event files (a resumed
# run's second writer) or a SessionLog (a START may drop points), by the event files alone;
# and those of one file whose points, in step order (the order of the scalars' key, read
# without a sort), go back in the file: a step lower than one written before it.
_TAG_SERIES_SQL = "SELECT s.id FROM series AS s WHERE s.plugin = 'scalars' AND s.name IN ({tags})"
_SEVERAL_FILES_SQL = (
    "SELECT s.id FROM series AS s JOIN (SELECT run_id, context_id FROM event_files "
    "GROUP BY run_id, context_id HAVING count(*) > 1) AS f "
    "ON f.run_id = s.run_id AND f.context_id = s.context_id "
    "WHERE s.plugin = 'scalars' AND s.name IN ({tags}) "
    "UNION SELECT s.id FROM series AS s JOIN series AS l ON l.run_id = s.run_id "
    "AND l.context_id = s.context_id AND l.plugin = 'session_log' "
    "WHERE s.plugin = 'scalars' AND s.name IN ({tags})"
)
_BACK_IN_A_FILE_SQL = (
    "SELECT DISTINCT w.series_id FROM (SELECT series_id, file_id, record_offset, value_index, "
    "LAG(file_id) OVER k AS file_before, LAG(record_offset) OVER k AS offset_before, "
    "LAG(value_index) OVER k AS index_before FROM scalars WHERE series_id IN ({series}) "
    "WINDOW k AS (PARTITION BY series_id ORDER BY step, file_id, record_offset, value_index)"
    ") AS w WHERE w.file_id = w.file_before AND (w.record_offset < w.offset_before "
    "OR (w.record_offset = w.offset_before AND w.value_index < w.index_before))"
)


def current_values(conn: Connection, tags: Sequence[str]) -> dict[int, dict[str, Any]]:
    """The aggregates of every scalar series of ``tags`` that has more than one attempt
    (or may), over the points its last attempt left; ``{series_id: {function: value}}``."""
    names = ", ".join(f":t{index}" for index in range(len(tags)))
    bound = {f"t{index}": tag for index, tag in enumerate(tags)}
    ids = set(conn.execute(text(_SEVERAL_FILES_SQL.format(tags=names)), bound).scalars())
    series = _TAG_SERIES_SQL.format(tags=names)
    ids |= set(conn.execute(text(_BACK_IN_A_FILE_SQL.format(series=series)), bound).scalars())
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
        "mean": sum(value for value, _ in values) / len(values) if values else None,
        "argmin": min((step for value, step in values if value == low), default=None),
        "argmax": min((step for value, step in values if value == high), default=None),
    }


class _Pinned:
    """A connection as the ``Connectable`` ``lookups`` reads through."""

    display = "store"

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def connect(self) -> AbstractContextManager[Connection]:
        return nullcontext(self.conn)
