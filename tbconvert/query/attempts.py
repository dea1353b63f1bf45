"""A series' last attempt (``--resumed current``, :mod:`tbconvert.query.resumed`) as a SQL
predicate on its points, for queries that aggregate in the database (:mod:`.thinning`).

The rule drops a point written before a *cut* at a step at or after the cut's: a cut is a
step that goes back in write order (a restart) or a ``SessionLog.START`` of the series' run and
context.  Only the cuts no later cut covers matter (a later cut at a lower step drops all an
earlier one drops), so a resumed run gives a predicate of a few terms.  Finding the restarts
takes one scan of the series in write order, seconds on a million points
(docs/performance.md, "Thinning a long series"): a caller that reads one series again and
again (the viewer's zoom) keeps the :class:`LastAttempt` and passes it back; it is read anew
when the series changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.query.resumed import ANY_SESSION_LOG_SQL, is_start

# A step that goes back in write order (a restart): its step and place in write order.  Paths
# compare as bytes on both backends, as Python compares them.
_RESTARTS_SQL = (
    "SELECT step, path, file_id, record_offset, value_index FROM ("
    "SELECT p.step, f.path, p.file_id, p.record_offset, p.value_index, "
    "lag(p.step) OVER (ORDER BY f.path{collate}, p.record_offset, p.value_index) AS previous "
    "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id WHERE p.series_id = :id"
    ") AS written WHERE step < previous"
)
# Session starts of the series' run and context: step, place in write order, the record.
_STARTS_SQL = (
    "SELECT t.step, f.path, t.file_id, t.record_offset, b.data FROM tensors AS t "
    "JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id "
    "JOIN blobs AS b ON b.id = t.blob_id JOIN series AS mine ON mine.id = :id "
    "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
    "AND s.context_id = mine.context_id"
)
_FILES_SQL = (
    "SELECT f.id, f.path FROM event_files AS f WHERE f.id IN "
    "(SELECT DISTINCT file_id FROM scalars WHERE series_id = :id)"
)
# What changes when the series or its run's session logs do: the summaries the writer keeps.
_VERSION_SQL = (
    "SELECT m.points, m.first_step, m.last_step, m.last_file_id, m.last_record_offset, "
    "m.last_value_index, (SELECT sum(o.points) FROM series_summaries AS o "
    "JOIN series AS s ON s.id = o.series_id JOIN series AS mine ON mine.id = :id "
    "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
    "AND s.context_id = mine.context_id) "
    "FROM series_summaries AS m WHERE m.series_id = :id AND m.point_table = 'scalars'"
)


@dataclass(frozen=True)
class Cut:
    """Points written before ``place`` with a step at or after ``step`` are dropped."""

    step: int
    path: str
    file_id: int
    place: tuple[int, int]  # (record offset, value index) in the cut's file


@dataclass(frozen=True)
class LastAttempt:
    """The cuts that shape one series' last attempt, as of one version of the series.

    Attributes:
        series_id: The series.
        version: Its summaries when read (:func:`series_version`).
        cuts: The cuts no later cut covers, latest first; none for a series never resumed.
        files: (id, path) of the series' event files.
    """

    series_id: int
    version: tuple[Any, ...]
    cuts: tuple[Cut, ...]
    files: tuple[tuple[int, str], ...]

    def predicate(self) -> str:
        """SQL true of the points the last attempt keeps (on ``scalars AS p``)."""
        if not self.cuts:
            return "1 = 1"
        return "NOT (" + " OR ".join(_dropped_by(cut, self.files) for cut in self.cuts) + ")"


def series_version(conn: Connection, series_id: int) -> tuple[Any, ...]:
    """What a conversion changes when it adds to or removes from the series (or its run's
    session logs): the writer's summaries of them."""
    found = conn.execute(text(_VERSION_SQL), {"id": series_id}).first()
    return tuple(found) if found is not None else ()


def last_attempt_of(
    conn: Connection, series_id: int, known: LastAttempt | None = None
) -> LastAttempt:
    """The series' last attempt: ``known`` when the series has not changed since it was
    read, else read anew (one scan of the series in write order)."""
    version = series_version(conn, series_id)
    if known is not None and known.series_id == series_id and known.version == version:
        return known
    collate = ' COLLATE "C"' if conn.dialect.name == "postgresql" else ""
    restarts = conn.execute(text(_RESTARTS_SQL.format(collate=collate)), {"id": series_id})
    cuts = [
        Cut(step, path, file_id, (offset, index)) for step, path, file_id, offset, index in restarts
    ]
    if conn.execute(text(ANY_SESSION_LOG_SQL)).first() is not None:
        # A start drops the points before its record, whatever their value index.
        starts = conn.execute(text(_STARTS_SQL), {"id": series_id})
        cuts += [
            Cut(step, path, file_id, (offset, -1))
            for step, path, file_id, offset, data in starts
            if is_start(data)
        ]
    files = tuple(
        (int(row[0]), str(row[1])) for row in conn.execute(text(_FILES_SQL), {"id": series_id})
    )
    return LastAttempt(series_id, version, tuple(_effective(cuts)), files)


def _effective(cuts: list[Cut]) -> list[Cut]:
    """The cuts no later cut covers (a later cut at the same step or lower drops all an
    earlier one drops), latest first."""
    kept: list[Cut] = []
    lowest: int | None = None
    for cut in sorted(cuts, key=lambda cut: (cut.path, cut.place), reverse=True):
        if lowest is None or cut.step < lowest:
            kept.append(cut)
            lowest = cut.step
    return kept


def _dropped_by(cut: Cut, files: Sequence[tuple[int, str]]) -> str:
    """SQL true of the points ``cut`` drops: written before it, at its step or after."""
    earlier = [str(file_id) for file_id, path in files if path < cut.path]
    offset, index = cut.place
    before = [
        f"(p.file_id = {cut.file_id} AND (p.record_offset < {offset} OR "
        f"(p.record_offset = {offset} AND p.value_index < {index})))"
    ]
    if earlier:
        before.append(f"p.file_id IN ({', '.join(earlier)})")
    return f"(p.step >= {cut.step} AND ({' OR '.join(before)}))"
