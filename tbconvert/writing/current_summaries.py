"""The aggregates of every scalar series that may have several attempts over the points its
last attempt left (``current_summaries``), kept exact in the transaction of the points, so
that ``--resumed current`` reads a row per series and never a point (issue #49).

A series needs a row when its summary says ``maybe_resumed`` (points from several files, or a
step going back) or its run and context hold a ``SessionLog``: what ``query.resumed`` reads
its current points for.  The rule is ``store.attempts_rule``, the one the read side follows.

At the end of each transaction (:func:`refresh`) the writer hands the series whose points it
inserted.  A series with a row whose new points all come after the row's last written point
(write order: file path, record offset, value index) at steps that never go down from it adds
them in place: they start no attempt and drop no point.  Anything else (a restart, a file
sorting before one already read, a ``SessionLog`` added or removed, points deleted by a
recount) makes the row again from the series' points.  The aggregates have the columns and
NaN rules of ``series_summaries``: a NaN (NULL) is counted by ``points`` and left out of the
rest; ``value_sum`` is the sum of the finite values (the infinities are in the extremes).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

from tbconvert.plugins.names import SESSION_LOG_TAG
from tbconvert.store.attempts_rule import is_start, last_attempt
from tbconvert.writing.statements import Insert, Statements, id_list

CURRENT_COLUMNS = (
    "series_id",
    "points",
    "last_step",
    "last_value",
    "min_value",
    "max_value",
    "value_sum",
    "value_count",
    "argmin_step",
    "argmax_step",
    "all_points",
    "written_file_id",
    "written_record_offset",
    "written_value_index",
    "written_step",
)


class Current(NamedTuple):
    """One ``current_summaries`` row."""

    series_id: int
    points: int
    last_step: int | None
    last_value: float | None
    min_value: float | None
    max_value: float | None
    value_sum: float | None
    value_count: int
    argmin_step: int | None
    argmax_step: int | None
    all_points: int
    written_file_id: int
    written_record_offset: int
    written_value_index: int
    written_step: int


_INSERT = Insert("current_summaries", CURRENT_COLUMNS)
# The series handled a statement.
_BATCH = 2000
_LOGGED = (
    "EXISTS (SELECT 1 FROM series AS l WHERE l.run_id = s.run_id AND l.context_id = "
    f"s.context_id AND l.name = '{SESSION_LOG_TAG}' AND l.plugin = 'session_log')"
)
# Of some series, those that need a row or have one: whether they need it, how many points
# they hold, and the stored row (NULLs without one).  Series with neither are left out here,
# so a conversion without resumed runs reads nothing more.
_CANDIDATES_SQL = (
    f"SELECT s.id, m.points, COALESCE(m.maybe_resumed, FALSE) OR {_LOGGED}, "
    + ", ".join(f"c.{column}" for column in CURRENT_COLUMNS)
    + " FROM series AS s "
    "LEFT JOIN series_summaries AS m ON m.series_id = s.id AND m.point_table = 'scalars' "
    "LEFT JOIN current_summaries AS c ON c.series_id = s.id "
    "WHERE s.id IN ({series}) AND s.plugin = 'scalars' "
    f"AND (m.maybe_resumed OR c.series_id IS NOT NULL OR {_LOGGED})"
)
# The scalar series sharing a run and context with some session logs among the given series.
_LOGGED_BY_SQL = (
    "SELECT mine.id FROM series AS l JOIN series AS mine ON mine.run_id = l.run_id "
    "AND mine.context_id = l.context_id AND mine.plugin = 'scalars' "
    f"WHERE l.id IN ({{series}}) AND l.plugin = 'session_log' AND l.name = '{SESSION_LOG_TAG}'"
)
# Every point of some series, led by its series, in no order: sorted here into write order
# (the files' paths read apart), which spares the database a join per point and a sort.
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
# The points of one series from a step on, with their files' paths.
_POINTS_FROM_SQL = (
    "SELECT p.step, p.value, f.path, p.record_offset, p.value_index, p.file_id "
    "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id "
    "WHERE p.series_id = :id AND p.step >= :step"
)
_FILE_PATH = "SELECT path FROM event_files WHERE id = :id"


def refresh(
    statements: Statements,
    scalar_series: Collection[int],
    other_series: Collection[int] = (),
    *,
    recounted: bool = False,
) -> None:
    """Bring the rows of some series up to date with their points, in the open transaction.

    Args:
        statements: The writer's statements.
        scalar_series: Series whose scalar points were inserted (or recounted).
        other_series: Series of other point tables that changed: a session log among them
            makes every scalar series of its run and context again.
        recounted: The points of ``scalar_series`` were deleted or moved, not only added:
            their rows are made again.
    """
    forced = _logged_by(statements, other_series)
    if recounted:
        forced |= set(scalar_series)
    ids = sorted(set(scalar_series) | forced)
    for start in range(0, len(ids), _BATCH):
        _refresh(statements, ids[start : start + _BATCH], forced)


def forget(statements: Statements, series_ids: Collection[int]) -> None:
    """Delete the rows of series about to be deleted."""
    if series_ids:
        marks = id_list(series_ids)
        statements.run(f"DELETE FROM current_summaries WHERE series_id IN ({marks})", {})


def fill(statements: Statements) -> None:
    """Make the row of every series that needs one (a store made before the table)."""
    ids = [
        int(row[0])
        for row in statements.all(
            "SELECT s.id FROM series AS s JOIN series_summaries AS m ON m.series_id = s.id "
            f"AND m.point_table = 'scalars' WHERE s.plugin = 'scalars' "
            f"AND (m.maybe_resumed OR {_LOGGED})",
            {},
        )
    ]
    refresh(statements, ids, recounted=True)


def _logged_by(statements: Statements, series_ids: Collection[int]) -> set[int]:
    found: set[int] = set()
    ids = sorted(series_ids)
    for start in range(0, len(ids), _BATCH):
        marks = id_list(ids[start : start + _BATCH])
        found.update(int(row[0]) for row in statements.all(_LOGGED_BY_SQL.format(series=marks), {}))
    return found


def _refresh(statements: Statements, ids: Sequence[int], forced: Collection[int]) -> None:
    rows = statements.all(_CANDIDATES_SQL.format(series=id_list(ids)), {})
    kept: list[Current] = []
    again: dict[int, int] = {}  # series -> its points, made again from them
    gone: list[int] = []
    for series_id, points, needed, *stored in rows:
        has_row = stored[0] is not None
        if not needed or points is None:
            if has_row:
                gone.append(series_id)
            continue
        row = Current(*stored) if has_row else None
        added = None
        if row is not None and series_id not in forced:
            added = _added_in_place(statements, row, int(points))
        if added is None:
            again[series_id] = int(points)
        elif added is not row:
            kept.append(added)
    made = _made_again(statements, sorted(again)) if again else []
    if gone or kept or again:
        statements.run(
            "DELETE FROM current_summaries WHERE series_id IN "
            f"({id_list([*gone, *again, *(row.series_id for row in kept)])})",
            {},
        )
    statements.insert(_INSERT, [*kept, *made])


def _added_in_place(statements: Statements, row: Current, points: int) -> Current | None:
    """The row with the points written after its last one added, or None when they do not
    only follow it (the row is then made again); ``row`` itself when nothing was added."""
    added = points - row.all_points
    if added == 0:
        return row
    if added < 0:
        return None
    path = statements.scalar(_FILE_PATH, {"id": row.written_file_id})
    position = (path, row.written_record_offset, row.written_value_index)
    later = sorted(
        (point[2:5], point)
        for point in statements.all(
            _POINTS_FROM_SQL, {"id": row.series_id, "step": row.written_step}
        )
        if tuple(point[2:5]) > position
    )
    # Fewer than the new points: some are at a lower step (a restart) or sort before.
    if len(later) != added:
        return None
    steps = [point[0] for _key, point in later]
    if any(step > following for step, following in pairwise(steps)):
        return None
    new = _aggregate(row.series_id, [(point[0], point[1]) for _key, point in later])
    last = later[-1][1]
    return Current(
        row.series_id,
        row.points + new.points,
        new.last_step,
        new.last_value,
        pick(min, row.min_value, new.min_value),
        pick(max, row.max_value, new.max_value),
        pick(float.__add__, row.value_sum, new.value_sum),
        row.value_count + new.value_count,
        first_step_of(min, row.min_value, row.argmin_step, new.min_value, new.argmin_step),
        first_step_of(max, row.max_value, row.argmax_step, new.max_value, new.argmax_step),
        points,
        last[5],
        last[3],
        last[4],
        last[0],
    )


def _made_again(statements: Statements, ids: Sequence[int]) -> list[Current]:
    """The rows of some series from their points: three statements for all of them."""
    marks = id_list(ids)
    paths = dict(statements.all(_PATHS_SQL.format(series=marks), {}))
    points: dict[int, list[tuple[Any, ...]]] = {i: [] for i in ids}
    for series_id, step, value, file_id, offset, index in statements.all(
        _POINTS_SQL.format(series=marks), {}
    ):
        points[series_id].append((step, None, value, paths[file_id], offset, index, file_id))
    starts: dict[int, list[tuple[int, str, int]]] = {i: [] for i in ids}
    for series_id, step, path, offset, data in statements.all(_STARTS_SQL.format(series=marks), {}):
        if is_start(data):
            starts[series_id].append((step, path, offset))
    made = []
    for series_id in ids:
        written = sorted(points[series_id], key=lambda point: point[3:6])
        if not written:
            continue
        kept = last_attempt(written, starts[series_id])
        current = _aggregate(series_id, [(point[0], point[2]) for point in kept])
        last = written[-1]
        made.append(Current(*current[:10], len(written), last[6], last[4], last[5], last[0]))
    return made


def _aggregate(series_id: int, points: Sequence[tuple[int, float | None]]) -> Current:
    """The aggregates of some points ``(step, value or None for NaN)``, by step then write
    order; the written point's columns are left at zero."""
    values = [(value, step) for step, value in points if value is not None]
    finite = [value for value, _step in values if math.isfinite(value)]
    low = min((value for value, _ in values), default=None)
    high = max((value for value, _ in values), default=None)
    return Current(
        series_id,
        len(points),
        points[-1][0] if points else None,
        points[-1][1] if points else None,
        low,
        high,
        sum(finite) if finite else None,
        len(values),
        min((step for value, step in values if value == low), default=None),
        min((step for value, step in values if value == high), default=None),
        0,
        0,
        0,
        0,
        0,
    )


def first_step_of(
    extreme: Any, old: float | None, old_step: int | None, new: float | None, new_step: int | None
) -> int | None:
    """The first step holding the extreme of two parts' extremes ``old`` and ``new``."""
    if old is None or new is None:
        return new_step if old is None else old_step
    if old == new:
        return min(old_step, new_step)  # type: ignore[type-var]
    return old_step if extreme(old, new) == old else new_step


def pick(extreme: Any, old: float | None, new: float | None) -> float | None:
    """The extreme of two parts' values, either of which may be missing."""
    if old is None:
        return new
    return old if new is None else extreme(old, new)
