"""A scalar series as its last attempt left it (``--resumed current``; the view
``v_scalars_current`` holds the same rows for SQL clients, and a property test holds the two
to one rule: the commands read through this module because the view is about three times
slower on big series: docs/performance.md, "A resumed run's current points").

In write order (the series' files by path, records by offset, values by index), a point whose
step is less than the previous point's starts a new attempt and drops the earlier points at or
after its step; equal steps are no restart.  A ``SessionLog.START`` of the series' run and
context drops the earlier points at or after its step too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RESUMED = ("current", "all")
# What plot, report and export read unless told: each series as its run ended, as TensorBoard
# shows a restarted run (docs/cli.md#resumed-runs says why export agrees).
RESUMED_DEFAULT = "current"
# Points of one series in write order: (step, wall_time, value, path, offset, index).
WRITE_ORDER_SQL = (
    "SELECT p.step, p.wall_time, p.value, f.path, p.record_offset, p.value_index "
    "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id WHERE p.series_id = :id "
    "ORDER BY f.path, p.record_offset, p.value_index"
)
# Session starts of one series' run and context: (step, path, offset).  A SessionLog whose
# status (field 1, a varint) is START (1) serialises as 08 01 first.
STARTS_SQL = (
    "SELECT t.step, f.path, t.record_offset, b.data FROM tensors AS t "
    "JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id "
    "JOIN blobs AS b ON b.id = t.blob_id JOIN series AS mine ON mine.id = :id "
    "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
    "AND s.context_id = mine.context_id"
)

ANY_SESSION_LOG_SQL = "SELECT 1 FROM series WHERE plugin = 'session_log' LIMIT 1"


def last_attempt(
    points: Sequence[tuple[Any, ...]], starts: Sequence[tuple[int, str, int]]
) -> list[tuple[Any, ...]]:
    """The points (in write order, as :data:`WRITE_ORDER_SQL` reads them) that the last
    attempt left, sorted by step then write order; ``starts``: (step, path, offset) of the
    session starts."""
    restarts = [index > 0 and point[0] < points[index - 1][0] for index, point in enumerate(points)]
    kept: list[tuple[Any, ...]] = []
    lowest_later = None  # the lowest step of a restart after the point
    for index in range(len(points) - 1, -1, -1):
        point = points[index]
        dropped = lowest_later is not None and lowest_later <= point[0]
        dropped = dropped or (
            bool(starts)
            and any(
                step <= point[0] and (path, offset) > (point[3], point[4])
                for step, path, offset in starts
            )
        )
        if not dropped:
            kept.append(point)
        if restarts[index]:
            lowest_later = point[0] if lowest_later is None else min(lowest_later, point[0])
    kept.reverse()
    return sorted(kept, key=lambda point: point[0])  # stable: write order within a step


def is_start(data: bytes) -> bool:
    """Whether a stored ``SessionLog`` says START."""
    return bytes(data[:2]) == b"\x08\x01"
