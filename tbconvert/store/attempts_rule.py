"""A scalar series as its last attempt left it: one rule for the writer, which keeps the
aggregates of every series that may have several attempts (``current_summaries``), and for the
read side (``query.resumed``, ``v_scalars_current``), which a property test holds equal.

In write order (the series' files by path, records by offset, values by index), a point whose
step is less than the previous point's starts a new attempt and drops the earlier points at or
after its step; equal steps are no restart.  A ``SessionLog.START`` of the series' run and
context drops the earlier points at or after its step too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["is_start", "last_attempt", "summarise"]


def last_attempt(
    points: Sequence[tuple[Any, ...]], starts: Sequence[tuple[int, str, int]]
) -> list[tuple[Any, ...]]:
    """The points (in write order, each ``(step, wall_time, value, path, offset, index)``)
    that the last attempt left, sorted by step then write order; ``starts``: (step, path,
    offset) of the session starts."""
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
    # A SessionLog whose status (field 1, a varint) is START (1) serialises as 08 01 first.
    return bytes(data[:2]) == b"\x08\x01"


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
