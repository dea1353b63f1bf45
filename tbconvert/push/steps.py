"""One point per step, for trackers whose steps only grow (W&B, Aim).

A series goes as its last attempt, the rule of ``v_scalars_current``
(:func:`tbconvert.query.resumed.last_attempt`), and a step its last attempt logged more than
once as the last point written at it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.push.state import Point
from tbconvert.query.resumed import ANY_SESSION_LOG_SQL, STARTS_SQL, is_start, last_attempt


def current_points(conn: Connection, series_id: int, points: Sequence[Point]) -> list[Point]:
    """The points of one series (all of them, any order) its last attempt left, by step
    then write order."""
    written = sorted(points, key=lambda p: (p.file_path, p.record_offset, p.value_index))
    rows = [
        (p.step, p.wall_time, p.value, p.file_path, p.record_offset, p.value_index, p)
        for p in written
    ]
    starts: list[tuple[int, str, int]] = []
    if rows and conn.execute(text(ANY_SESSION_LOG_SQL)).first() is not None:
        starts = [
            (step, path, offset)
            for step, path, offset, data in conn.execute(text(STARTS_SQL), {"id": series_id})
            if is_start(data)
        ]
    return [row[6] for row in last_attempt(rows, starts)]


def last_per_step(points: Sequence[Point]) -> list[Point]:
    """Of points sorted by step then write order, the last written at each step."""
    kept: list[Point] = []
    for point in points:
        if kept and kept[-1].step == point.step:
            kept[-1] = point
        else:
            kept.append(point)
    return kept
