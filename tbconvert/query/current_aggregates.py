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
# The points of several series, each row led by its series, in no order: sorted here into
# write order (the files' paths read apart), which spares the database a join per point and a
# sort (resumed.WRITE_ORDER_SQL reads one series).
_POINTS_SQL = (
    "SELECT series_id, step, value, file_id, record_offset, value_index FROM scalars "
    "WHERE series_id IN ({series})"
)
_PATHS_SQL = (
    "SELECT f.id, f.path FROM event_files AS f WHERE f.run_id IN ("
    "SELECT s.run_id FROM series AS s WHERE s.id IN ({series}))"
)
# resumed.STARTS_SQL for several series at once, each row led by its series.
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
    """The aggregates of some series over their current points: three statements for all
    of them (a statement per series costs a round trip each: a millisecond on SQLite)."""
    marks = ", ".join(str(int(i)) for i in ids)
    paths = {file_id: path for file_id, path in conn.execute(text(_PATHS_SQL.format(series=marks)))}
    points: dict[int, list[tuple[Any, ...]]] = {i: [] for i in ids}
    for series_id, step, value, file_id, offset, index in conn.execute(
        text(_POINTS_SQL.format(series=marks))
    ):
        points[series_id].append((step, None, value, paths[file_id], offset, index))
    starts: dict[int, list[tuple[int, str, int]]] = {i: [] for i in ids}
    for series_id, step, path, offset, data in conn.execute(text(_STARTS_SQL.format(series=marks))):
        if is_start(data):
            starts[series_id].append((step, path, offset))
    found = {}
    for i in ids:
        written = sorted(points[i], key=_write_order)
        found[i] = summarise([(point[0], point[2]) for point in last_attempt(written, starts[i])])
    return found


def _write_order(point: tuple[Any, ...]) -> tuple[str, int, int]:
    """A point's place in write order: its file's path, its record's offset, its index."""
    return point[3], point[4], point[5]


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
