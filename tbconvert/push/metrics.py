"""Scalar points into metric batches, and marks advanced only over what the tracker holds.

The tracker's writes are not in the store's transaction.  So a batch is marked only after
the tracker acknowledged it, and each (series, file) mark only ever moves over a prefix of
that file's points that are all in the tracker: a push killed between the two leaves points
sent but not marked, never marked but not sent.  The run stays ``pending`` until its push
ends; the next push of a pending run first reads back what the tracker holds beyond the
marks (:func:`already_there`) and sends only the rest.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.push.state import Point, save_marks

Identity = tuple[int, int, Any]


def timestamp_ms(wall_time: float | None) -> int:
    """MLflow's timestamp of a point: its wall time in milliseconds, to the nearest; 0 when
    the point has none (a NaN wall time)."""
    return 0 if wall_time is None else round(wall_time * 1000)


def metric_value(value: float | None) -> float:
    """The value sent: the store's NULL is the NaN that was logged."""
    return math.nan if value is None else float(value)


def identity(step: int, timestamp: int, value: float | None) -> Identity:
    """What tells two metric points apart in a history.  NaN equals NaN, and an infinity
    equals the largest double, which MLflow's SQL stores keep in its place."""
    if value is None or math.isnan(value):
        return step, timestamp, "nan"
    if math.isinf(value) or abs(value) == sys.float_info.max:
        return step, timestamp, "inf" if value > 0 else "-inf"
    return step, timestamp, float(value)


def point_identity(point: Point) -> Identity:
    """The identity of a store point once sent."""
    return identity(point.step, timestamp_ms(point.wall_time), point.value)


def already_there(
    covered: Sequence[bool],
    points: Sequence[Point],
    history: Iterable[Identity],
    identify: Callable[[Point], Identity] = point_identity,
) -> list[bool]:
    """Which of the points no mark covers a crashed push had sent: the tracker's history
    of their series, less the points the marks cover, matched point for point (equal
    points are interchangeable, so counting them is exact); ``identify`` is what the
    tracker's history shows of a point."""
    extra = Counter(history)
    extra.subtract(identify(p) for p, done in zip(points, covered, strict=True) if done)
    found: list[bool] = []
    for point, done in zip(points, covered, strict=True):
        key = identify(point)
        there = done or extra[key] > 0
        if not done and there:
            extra[key] -= 1
        found.append(there)
    return found


class Marks:
    """The marks of one run's points at one destination, advanced as batches are acknowledged.

    ``points`` are in mark order (series, file, record offset, value index); ``done[i]``
    says the tracker holds point i.
    """

    def __init__(
        self,
        engine: Engine,
        where: str,
        points: Sequence[Point],
        done: list[bool],
        point_table: str = "scalars",
    ) -> None:
        """Start with the marks at the first point of each (series, file) not yet marked."""
        self.engine, self.where, self.points, self.done = engine, where, points, done
        self.point_table = point_table
        self.cursor: dict[tuple[int, int], int] = {}
        self.end: dict[tuple[int, int], int] = {}
        for index, point in enumerate(points):
            group = (point.series_id, point.file_id)
            self.cursor.setdefault(group, index)
            self.end[group] = index + 1

    def advance(self, groups: Iterable[tuple[int, int]]) -> None:
        """Move the marks of ``groups`` over the points now done, in one transaction."""
        reached: list[tuple[Point, int]] = []
        for group in groups:
            start = index = self.cursor[group]
            while index < self.end[group] and self.done[index]:
                index += 1
            if index > start:
                reached.append((self.points[index - 1], index - start))
                self.cursor[group] = index
        if reached:
            with self.engine.begin() as conn:
                save_marks(conn, self.where, self.point_table, reached)


def send_points(marks: Marks, send: Callable[[list[Point]], None], batch_size: int) -> int:
    """Send the points not done in batches of ``batch_size``, marking each batch once
    ``send`` returns (the tracker acknowledged it); returns how many were sent."""
    marks.advance(list(marks.cursor))  # what a crashed push had sent
    todo = [index for index, done in enumerate(marks.done) if not done]
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        send([marks.points[index] for index in batch])
        for index in batch:
            marks.done[index] = True
        marks.advance(
            dict.fromkeys((marks.points[i].series_id, marks.points[i].file_id) for i in batch)
        )
    return len(todo)
