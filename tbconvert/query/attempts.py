"""A series' last attempt (``--resumed current``, :mod:`tbconvert.query.resumed`) as a SQL
predicate on its points, for queries that aggregate in the database (:mod:`.thinning`).

The rule drops a point written before a *cut* at a step at or after the cut's: a cut is a
step that goes back in write order (a restart) or a ``SessionLog.START`` of the series' run and
context.  Only the cuts no later cut covers matter (a later cut at a lower step drops all an
earlier one drops), so a resumed run gives a predicate of a few terms.  Finding the restarts
takes one scan of the series in write order, seconds on a million points
(docs/performance.md, "Thinning a long series"), needed only for a series whose summary says its
steps may go back (``maybe_resumed``); a caller that reads one series again and
again (the viewer's zoom) keeps the :class:`LastAttempt` and passes it back; it is read anew
when the series changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
# What changes when a series or its run's session logs do (the summaries the writer keeps), and
# whether its steps may go back (``maybe_resumed``: several files, or a step lower than the one
# before within a file), the one case that needs a scan for restarts.
_VERSIONS_SQL = (
    "SELECT m.series_id, m.points, m.first_step, m.last_step, m.last_file_id, "
    "m.last_record_offset, m.last_value_index, m.maybe_resumed, "
    "(SELECT sum(o.points) FROM series_summaries AS o JOIN series AS s ON s.id = o.series_id "
    "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
    "AND s.context_id = mine.context_id) "
    "FROM series_summaries AS m JOIN series AS mine ON mine.id = m.series_id "
    "WHERE m.series_id IN ({ids}) AND m.point_table = 'scalars'"
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
        version: Its summaries when read (:func:`series_versions`).
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


def series_versions(conn: Connection, series_ids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
    """What a conversion changes when it adds to or removes from each series (or its run's
    session logs): the writer's summaries of them, ``maybe_resumed`` among them."""
    if not series_ids:
        return {}
    ids = ", ".join(str(int(series_id)) for series_id in series_ids)
    return {
        int(row[0]): tuple(row[1:]) for row in conn.execute(text(_VERSIONS_SQL.format(ids=ids)))
    }


def last_attempts(
    conn: Connection, series_ids: Sequence[int], known: Mapping[int, LastAttempt] | None = None
) -> dict[int, LastAttempt]:
    """Each series' last attempt: the one in ``known`` when the series has not changed since
    it was read, else read anew.  A series whose steps never go back in one file needs no scan
    for restarts (its summary's ``maybe_resumed``), only its run's session starts, if any."""
    versions = series_versions(conn, series_ids)
    starts_exist: bool | None = None
    found: dict[int, LastAttempt] = {}
    for series_id in series_ids:
        version = versions.get(series_id, ())
        earlier = (known or {}).get(series_id)
        if earlier is not None and earlier.version == version:
            found[series_id] = earlier
            continue
        if starts_exist is None:
            starts_exist = conn.execute(text(ANY_SESSION_LOG_SQL)).first() is not None
        may_restart = not version or bool(version[6])
        found[series_id] = _read_attempt(conn, series_id, version, may_restart, starts_exist)
    return found


def _read_attempt(
    conn: Connection, series_id: int, version: tuple[Any, ...], may_restart: bool, starts: bool
) -> LastAttempt:
    """One series' cuts: its restarts (one scan in write order) when its steps may go back,
    and its run's session starts when the store holds session logs."""
    if not may_restart and not starts:
        return LastAttempt(series_id, version, (), ())
    cuts: list[Cut] = []
    if may_restart:
        collate = ' COLLATE "C"' if conn.dialect.name == "postgresql" else ""
        restarts = conn.execute(text(_RESTARTS_SQL.format(collate=collate)), {"id": series_id})
        cuts += [
            Cut(step, path, file_id, (offset, index))
            for step, path, file_id, offset, index in restarts
        ]
    if starts:
        # A start drops the points before its record, whatever their value index.
        found = conn.execute(text(_STARTS_SQL), {"id": series_id})
        cuts += [
            Cut(step, path, file_id, (offset, -1))
            for step, path, file_id, offset, data in found
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
