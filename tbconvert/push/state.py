"""The store's account of a push (``push_runs``, ``push_marks``; migration 0010; and
``push_destinations``, migration 0015).

A destination is one tracker, tracking URI and experiment.  Per (series, point table, event
file) a mark holds the last point the tracker acknowledged; a file's points are appended in
(record offset, value index) order, so every point after the mark, or of a file without a
mark, is new.  A mark names its file by path and first-record digest as well as by id: a file
replaced under the same id starts again from nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.urls import redacted

_MARKED = """
    JOIN event_files AS f ON f.id = p.file_id
    LEFT JOIN push_marks AS m ON m.destination = :destination AND m.series_id = p.series_id
     AND m.point_table = :point_table AND m.file_id = p.file_id AND m.file_path = f.path
     AND coalesce(m.file_digest, '') = coalesce(f.head_digest, '')"""
_COVERED = (
    "(m.series_id IS NOT NULL AND (p.record_offset < m.record_offset OR "
    "(p.record_offset = m.record_offset AND p.value_index <= m.value_index)))"
)
_KEY = "p.series_id, p.file_id, f.path, f.head_digest, p.record_offset, p.value_index"
# Points in the order a series' files were stored and each file was written: a mark covers
# a prefix of each file's points in this order.
_ORDER = "ORDER BY p.series_id, p.file_id, p.record_offset, p.value_index"


@dataclass(frozen=True)
class Point:
    """Where a point came from (what a mark records) and what it holds."""

    series_id: int
    file_id: int
    file_path: str
    file_digest: str | None
    record_offset: int
    value_index: int
    step: int
    wall_time: float | None
    value: Any


def destination(tracker: str, tracking_uri: str, experiment_id: str) -> str:
    """The name of a destination in the push tables (no credentials of the URI in it: the
    same server reached with another password is the same destination)."""
    return f"{tracker} {redacted(tracking_uri)} experiment {experiment_id}"


def save_destination(conn: Connection, tracker: str, location: str, name: str, where: str) -> None:
    """Record that ``name`` at ``location`` (no credentials) of ``tracker`` is the destination
    ``where`` (``push_destinations``: what a dry run finds the marks by)."""
    values: dict[str, Any] = {"tracker": tracker, "location": redacted(location), "name": name}
    values |= {"destination": where, "recorded_at": time.time()}
    updated = conn.execute(
        text(
            "UPDATE push_destinations SET destination = :destination, recorded_at = :recorded_at "
            "WHERE tracker = :tracker AND location = :location AND name = :name"
        ),
        values,
    ).rowcount
    if not updated:
        conn.execute(
            text(
                "INSERT INTO push_destinations (tracker, location, name, destination, recorded_at) "
                "VALUES (:tracker, :location, :name, :destination, :recorded_at)"
            ),
            values,
        )


def named_destination(conn: Connection, tracker: str, location: str, name: str) -> str | None:
    """The destination a push to ``name`` at ``location`` of ``tracker`` last used."""
    found = conn.execute(
        text(
            "SELECT destination FROM push_destinations "
            "WHERE tracker = :tracker AND location = :location AND name = :name"
        ),
        {"tracker": tracker, "location": redacted(location), "name": name},
    ).scalar_one_or_none()
    return None if found is None else str(found)


def unnamed_destinations(conn: Connection, prefix: str) -> list[str]:
    """The destinations starting with ``prefix`` that hold runs but no name records (pushed
    by a version before ``push_destinations``)."""
    rows = conn.execute(
        text(
            "SELECT DISTINCT destination FROM push_runs WHERE substr(destination, 1, :length) "
            "= :prefix AND destination NOT IN (SELECT destination FROM push_destinations) "
            "ORDER BY destination"
        ),
        {"prefix": prefix, "length": len(prefix)},
    )
    return [str(row[0]) for row in rows]


def new_scalars(
    conn: Connection, where: str, series_ids: Sequence[int], *, covered: bool = False
) -> list[tuple[Point, bool]]:
    """The scalar points of ``series_ids`` not yet acknowledged at ``where``, in mark order;
    with ``covered``, every point, each with whether a mark covers it."""
    return new_points(conn, where, "scalars", "p.value", series_ids, covered=covered)


def new_points(
    conn: Connection,
    where: str,
    table: str,
    columns: str,
    series_ids: Sequence[int],
    *,
    covered: bool = False,
    joins: str = "",
) -> list[tuple[Point, bool]]:
    """The points of ``table`` in ``series_ids`` that no mark at ``where`` covers (with
    ``covered``: every point, and whether one does), in mark order.  A point's ``value`` is
    the one column ``columns`` names, or the tuple of several."""
    if not series_ids:
        return []
    ids = ", ".join(str(int(series_id)) for series_id in series_ids)
    width = columns.count(",") + 1
    sql = (
        f"SELECT {_KEY}, p.step, p.wall_time, {_COVERED} AS covered, {columns} "
        f"FROM {table} AS p {_MARKED} {joins} WHERE p.series_id IN ({ids})"
        + ("" if covered else f" AND NOT {_COVERED}")
        + f" {_ORDER}"
    )
    found = []
    for row in conn.execute(text(sql), {"destination": where, "point_table": table}):
        value = row[9] if width == 1 else tuple(row[9:])
        series_id, file_id, path, digest, offset, value_index, step, wall_time = row[:8]
        point = Point(series_id, file_id, path, digest, offset, value_index, step, wall_time, value)
        found.append((point, bool(row[8])))
    return found


def has_new_points(
    conn: Connection, where: str, tables: Iterable[str], series: Iterable[Any]
) -> bool:
    """Whether any point of ``series`` (rows with an ``id``) in ``tables`` is not marked."""
    ids = [one.id for one in series]
    return any(new_points(conn, where, table, "p.step", ids) for table in tables)


def remote_run(conn: Connection, where: str, run_id: int) -> tuple[str, bool] | None:
    """The tracker's id of a run pushed to ``where`` and whether a push of it is pending."""
    row = conn.execute(
        text(
            "SELECT remote_id, pending FROM push_runs "
            "WHERE destination = :destination AND run_id = :run_id"
        ),
        {"destination": where, "run_id": run_id},
    ).one_or_none()
    return None if row is None else (str(row[0]), bool(row[1]))


def save_run(conn: Connection, where: str, run_id: int, remote_id: str, *, pending: bool) -> None:
    """Record the tracker's id of a run, and whether a push of it is under way."""
    values = {
        "destination": where,
        "run_id": run_id,
        "remote_id": remote_id,
        "pending": pending,
        "pushed_at": time.time(),
    }
    updated = conn.execute(
        text(
            "UPDATE push_runs SET remote_id = :remote_id, pending = :pending, "
            "pushed_at = :pushed_at WHERE destination = :destination AND run_id = :run_id"
        ),
        values,
    ).rowcount
    if not updated:
        conn.execute(
            text(
                "INSERT INTO push_runs (destination, run_id, remote_id, pending, pushed_at) "
                "VALUES (:destination, :run_id, :remote_id, :pending, :pushed_at)"
            ),
            values,
        )


def save_marks(
    conn: Connection, where: str, point_table: str, reached: Iterable[tuple[Point, int]]
) -> None:
    """Advance the marks: each ``(point, count)`` is the last acknowledged point of its
    (series, file) and how many points of it this step acknowledged."""
    for point, count in reached:
        values = {
            "destination": where,
            "series_id": point.series_id,
            "point_table": point_table,
            "file_id": point.file_id,
            "file_path": point.file_path,
            "file_digest": point.file_digest,
            "record_offset": point.record_offset,
            "value_index": point.value_index,
            "count": count,
        }
        updated = conn.execute(text(_ADVANCE), values).rowcount
        if not updated:
            conn.execute(text(_INSERT_MARK), values)


def last_of_each_file(points: Iterable[Point]) -> list[tuple[Point, int]]:
    """The last point of each (series, file), and how many of its points, in mark order:
    what :func:`save_marks` takes to mark all of ``points``."""
    last: dict[tuple[int, int], tuple[Point, int]] = {}
    for point in points:
        key = (point.series_id, point.file_id)
        last[key] = (point, last.get(key, (point, 0))[1] + 1)
    return list(last.values())


_MARK_KEY = (
    "destination = :destination AND series_id = :series_id AND point_table = :point_table "
    "AND file_id = :file_id"
)
# A mark of a file replaced under the same id counts from nothing again.
_ADVANCE = f"""
    UPDATE push_marks SET
        points = CASE WHEN file_path = :file_path
                       AND coalesce(file_digest, '') = coalesce(:file_digest, '')
                      THEN points + :count ELSE :count END,
        file_path = :file_path, file_digest = :file_digest,
        record_offset = :record_offset, value_index = :value_index
    WHERE {_MARK_KEY}"""
_INSERT_MARK = """
    INSERT INTO push_marks (destination, series_id, point_table, file_id, file_path,
                            file_digest, record_offset, value_index, points)
    VALUES (:destination, :series_id, :point_table, :file_id, :file_path, :file_digest,
            :record_offset, :value_index, :count)"""
