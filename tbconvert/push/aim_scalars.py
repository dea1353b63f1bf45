"""A run's scalar series into Aim metrics: each series as its last attempt left it.

Aim keeps one point per step, so a series goes as ``v_scalars_current`` shows it (a resumed
run's last attempt, :mod:`tbconvert.query.resumed`), and a step written several times in it
as the last point written.  The points no mark covers say which series changed; only those
are read again, whole, and compared with what Aim holds of them: Aim gets the points it
lacks or holds otherwise, loses the steps the series no longer has (a later attempt went
back), and the marks move over every point of the series once Aim holds the series as it
should be.  The points left out (earlier attempts, a step's earlier points) are counted.

A push killed at any moment leaves the marks behind Aim, never ahead of it: the next push
compares the changed series with Aim again and sends what is still missing, so no point is
lost or doubled (:mod:`tbconvert.push.aim_metrics` says why Aim's summary of a series stays
right too).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from tbconvert.push.aim_metrics import MetricPoint, MetricWriter, same
from tbconvert.push.metrics import Marks, send_points
from tbconvert.push.source import SeriesRow
from tbconvert.push.state import Point, new_scalars
from tbconvert.query.resumed import ANY_SESSION_LOG_SQL, STARTS_SQL, is_start, last_attempt

CONTEXT_KEY = "subset"


def aim_context(context: str) -> dict[str, Any]:
    """The Aim context of a store context: none for the run directory itself, else
    ``{"subset": NAME}`` (one context per name, so two series never meet)."""
    return {} if context == "" else {CONTEXT_KEY: context}


@dataclass
class ScalarsPushed:
    """What pushing one run's scalars did."""

    sent: int = 0  # points written into Aim
    found: int = 0  # points no mark covered that Aim already held (a killed push sent them)
    left_out: int = 0  # points not in the series' last attempt, or a step's earlier points
    removed: int = 0  # steps Aim held that the series' last attempt no longer has


@dataclass
class _Plan:
    series: SeriesRow
    wanted: list[MetricPoint]  # the series in Aim, in step order
    stale: list[int]  # steps to remove from Aim


def push_scalars(
    engine: Engine,
    where: str,
    writer: MetricWriter,
    series: Sequence[SeriesRow],
    *,
    batch_size: int,
    fresh_run: bool,
) -> ScalarsPushed:
    """Bring the Aim metrics of a run's scalar ``series`` to what the store holds.

    ``fresh_run``: the Aim run was created by this push (it holds nothing to read).
    """
    chosen = {one.id: one for one in series if one.plugin == "scalars"}
    pushed = ScalarsPushed()
    with engine.connect() as conn:
        changed = sorted({point.series_id for point, _ in new_scalars(conn, where, list(chosen))})
        every = new_scalars(conn, where, changed, covered=True)
        starts = _session_starts(conn, changed)
    points = [point for point, _ in every]
    done = [covered for _, covered in every]
    by_series: dict[int, list[int]] = {}
    for index, point in enumerate(points):
        by_series.setdefault(point.series_id, []).append(index)
    plans: list[_Plan] = []
    for series_id, indices in by_series.items():
        wanted = _current(points, indices, starts.get(series_id, []))
        plan = _plan(writer, chosen[series_id], points, indices, wanted, done, pushed, fresh_run)
        if plan is not None:
            plans.append(plan)
    for plan in plans:
        context = aim_context(plan.series.context)
        writer.describe(context, plan.series.tag, plan.wanted)
        writer.delete(context, plan.series.tag, plan.stale)
        pushed.removed += len(plan.stale)
    writer.commit()

    def send(batch: list[Point]) -> None:
        # A batch holds the points of a few series, each series' together (mark order).
        for series_id, group in itertools.groupby(batch, key=lambda point: point.series_id):
            one = chosen[series_id]
            writer.put(aim_context(one.context), one.tag, map(_metric_point, group))
        writer.commit()

    pushed.sent = send_points(Marks(engine, where, points, done), send, batch_size)
    return pushed


def _plan(
    writer: MetricWriter,
    series: SeriesRow,
    points: list[Point],
    indices: list[int],
    wanted: dict[int, int],
    done: list[bool],
    pushed: ScalarsPushed,
    fresh_run: bool,
) -> _Plan | None:
    """What Aim must get of one changed series whose points Aim keeps are ``wanted`` (step
    -> index); marks ``done`` the points it needs not."""
    held = {} if fresh_run else writer.history(aim_context(series.context), series.tag)
    for index in indices:
        if done[index]:
            continue
        point = points[index]
        if wanted.get(point.step) != index:
            pushed.left_out += 1
            done[index] = True
        elif point.step in held and same(held[point.step], _metric_point(point)):
            pushed.found += 1
            done[index] = True
    stale = sorted(step for step in held if step not in wanted)
    mine = [_metric_point(points[wanted[step]]) for step in sorted(wanted)]
    return _Plan(series, mine, stale) if mine else None


def _current(
    points: list[Point], indices: list[int], starts: list[tuple[int, str, int]]
) -> dict[int, int]:
    """Step -> index of the point Aim keeps at that step: the series' last attempt, and of
    a step written several times in it the last point written."""
    written = sorted(
        indices,
        key=lambda i: (points[i].file_path, points[i].record_offset, points[i].value_index),
    )
    rows = [
        (points[i].step, None, None, points[i].file_path, points[i].record_offset, i)
        for i in written
    ]
    return {row[0]: row[5] for row in last_attempt(rows, starts)}


def _metric_point(point: Point) -> MetricPoint:
    value = math.nan if point.value is None else float(point.value)
    time = math.nan if point.wall_time is None else float(point.wall_time)
    return MetricPoint(point.step, value, time)


def _session_starts(
    conn: Connection, series_ids: Sequence[int]
) -> dict[int, list[tuple[int, str, int]]]:
    """The session starts (step, path, offset) of each series' run and context."""
    if not series_ids or conn.execute(text(ANY_SESSION_LOG_SQL)).first() is None:
        return {}
    return {
        series_id: [
            (step, path, offset)
            for step, path, offset, data in conn.execute(text(STARTS_SQL), {"id": series_id})
            if is_start(data)
        ]
        for series_id in series_ids
    }
