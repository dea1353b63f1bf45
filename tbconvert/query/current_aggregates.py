"""Aggregates of scalar series as their last attempt left them (``--resumed current``), for
the series whose summary does not answer that: a resumed run's (docs/cli.md, "Selecting runs
by expression").

A series' summary (``series_summaries``) is over every point it holds.  Where the series has
one attempt, that is what its last attempt left; where it may have several (its summary's
``maybe_resumed``, or a SessionLog beside it), its current points are read (the rule of
``query.resumed``, over the points of every such series at once) and summarised here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.plugins.names import SESSION_LOG_TAG
from tbconvert.query.resumed import is_start, last_attempt

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


# The series read per statement.
_BATCH = 5000
# resumed.WRITE_ORDER_SQL and STARTS_SQL for several series at once, each row led by its series.
_WRITE_ORDER_SQL = (
    "SELECT p.series_id, p.step, p.wall_time, p.value, f.path, p.record_offset, p.value_index "
    "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id "
    "WHERE p.series_id IN ({series}) "
    "ORDER BY p.series_id, f.path, p.record_offset, p.value_index"
)
_STARTS_SQL = (
    "SELECT mine.id, t.step, f.path, t.record_offset, b.data FROM tensors AS t "
    "JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id "
    "JOIN blobs AS b ON b.id = t.blob_id JOIN series AS mine ON mine.run_id = s.run_id "
    "AND mine.context_id = s.context_id "
    "WHERE s.plugin = 'session_log' AND mine.id IN ({series})"
)


def current_values(conn: Connection, tags: Sequence[str]) -> dict[int, dict[str, Any]]:
    """The aggregates of every scalar series of ``tags`` that has more than one attempt
    (or may), over the points its last attempt left; ``{series_id: {function: value}}``."""
    names = ", ".join(f":t{index}" for index in range(len(tags)))
    bound = {f"t{index}": tag for index, tag in enumerate(tags)}
    ids = sorted(set(conn.execute(text(_MAYBE_RESUMED_SQL.format(tags=names)), bound).scalars()))
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), _BATCH):
        found.update(_current_of(conn, ids[start : start + _BATCH]))
    return found


def _current_of(conn: Connection, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The aggregates of some series over their current points: two statements for all of
    them (a statement per series costs a round trip each: a millisecond on SQLite)."""
    marks = ", ".join(str(int(i)) for i in ids)
    points: dict[int, list[tuple[Any, ...]]] = {i: [] for i in ids}
    for series_id, *point in conn.execute(text(_WRITE_ORDER_SQL.format(series=marks))):
        points[series_id].append(tuple(point))
    starts: dict[int, list[tuple[int, str, int]]] = {i: [] for i in ids}
    for series_id, step, path, offset, data in conn.execute(text(_STARTS_SQL.format(series=marks))):
        if is_start(data):
            starts[series_id].append((step, path, offset))
    return {
        i: summarise([(point[0], point[2]) for point in last_attempt(points[i], starts[i])])
        for i in ids
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
