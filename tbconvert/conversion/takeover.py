"""One event file in one run of a store: a conversion takes over what another source holds
of its logdir (design §7).

A source converted from a logdir inside this conversion's (``logs/sweep`` before ``logs``),
or around it (``logs`` before ``logs/sweep``), holds files of this logdir under other run
paths.  Before planning, their rows move to the (run, context) this conversion gives them,
with their points, in one transaction and without reading them again (``writing.moves``);
runs left empty go, and the other source keeps what lies outside this logdir.  Logdirs
nest by their recorded location: the same machine (a local path, resolved) or the same
bucket and prefix (a URL).  A copy this source holds already (stored twice by an earlier
version) wins, and the other one goes.
"""

from __future__ import annotations

import json
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.conversion.options import ConvertOptions
from tbconvert.conversion.relocation import file_into
from tbconvert.conversion.sources import Origin
from tbconvert.conversion.summary import Summary
from tbconvert.reading.discovery import Classification
from tbconvert.reading.remote import is_remote
from tbconvert.store.file_heads import Head
from tbconvert.store.file_states import KnownFile, select_file_states
from tbconvert.writing.moves import forget_pushes_of_gone_runs
from tbconvert.writing.writer import StoreWriter

# Take-overs on a server wait on each other whole (an advisory lock of this made-up run)
# before locking the runs they change: two of them never hold runs the other waits for.
_LOCK_SOURCE, _LOCK_RUN = "", "take-over"


@dataclass(frozen=True)
class Nested:
    """Another source whose logdir is inside this conversion's, or around it.

    Attributes:
        source, logdir: Its name in the store and where it was read from.
        prefix: The inner logdir's path relative to the outer one.
        inside: Its logdir is inside this conversion's (else around it).
    """

    source: str
    logdir: str
    prefix: str
    inside: bool

    def mapped(self, path: str) -> str | None:
        """A path relative to its logdir (a file's or a run's, ``.`` for its root) as a
        path relative to this conversion's; None when it lies outside it."""
        if self.inside:
            return self.prefix if path == "." else f"{self.prefix}/{path}"
        if path == self.prefix:
            return "."
        if path.startswith(self.prefix + "/"):
            return path[len(self.prefix) + 1 :]
        return None


@dataclass(frozen=True)
class Move:
    """One stored file of another source, and where this conversion files it."""

    nested: Nested
    file: KnownFile
    path: str
    run_path: str
    context: str
    duplicate: bool  # this source holds it already

    @property
    def moved(self) -> KnownFile:
        """The file as this source will know it."""
        state = self.file.state.updated(path=self.path)
        return KnownFile(state, self.run_path, self.context)


def plan_moves(
    conn: Connection,
    origin: Origin,
    classification: Classification,
    known: dict[str, KnownFile],
    *,
    whole: bool,
    before_0005: bool = False,
) -> list[Move]:
    """The files of other sources nested with this logdir that this conversion takes over:
    those of its logdir now (filed as it classifies them) and, when it converts the ``whole``
    logdir (no ``--run``), those no longer there whose run lies inside it (filed by their run's
    path, to be marked gone as this conversion's own; with ``--shard``, of this shard's runs
    only)."""
    present = {file.rel_path: file for file in classification.files}
    left_out = set(classification.orphans)  # kept unconverted (--skip-orphans)
    moves = []
    for nested in nested_sources(conn, origin, classification.logdir):
        stored = select_file_states(conn, nested.source, before_0005=before_0005)
        for path, held in sorted(stored.items()):
            mapped = nested.mapped(path)
            if mapped is None:
                continue
            now = present.get(mapped)
            if now is not None:
                run_path, context = now.run_path, now.context
            elif whole and mapped not in left_out and mapped not in classification.elsewhere:
                run_path, context = nested.mapped(held.run_path) or "", held.context
                if not classification.owns(run_path):
                    continue  # another shard's (--shard) to take over
            else:
                continue  # left out of this conversion
            if run_path:
                moves.append(Move(nested, held, mapped, run_path, context, mapped in known))
    return moves


def nested_sources(conn: Connection, origin: Origin, logdir: str) -> list[Nested]:
    """The other sources of the store whose recorded logdir is inside ``logdir`` or around
    it (a local one only when written from this machine: another's is another directory)."""
    rows = conn.execute(
        text(
            "SELECT source, max(logdir), max(host) FROM runs WHERE source <> :source "
            "GROUP BY source ORDER BY source"
        ),
        {"source": origin.source},
    ).all()
    found = []
    for source, other, host in rows:
        if not is_remote(logdir) and host is not None and host != origin.host:
            continue
        nesting = _nesting(logdir, other)
        if nesting is not None:
            found.append(Nested(source, other, *nesting))
    return found


def nested_heads(url: str, source: str, logdir: str) -> dict[str, Head]:
    """The layout's reads of a URL logdir's files that other sources nested with it hold
    (``file_heads``), by path relative to ``logdir``: the files they stored are not fetched
    again to classify them (the heads follow the files when they are taken over)."""
    from sqlalchemy import inspect

    from tbconvert.store.file_states import read_only

    heads: dict[str, Head] = {}
    with read_only(url) as conn:
        if conn is None or not inspect(conn).has_table("file_heads"):
            return heads
        for nested in nested_sources(conn, Origin(source, explicit=False, host=""), logdir):
            rows = conn.execute(
                text("SELECT path, size, mtime_ns, tags FROM file_heads WHERE source = :source"),
                {"source": nested.source},
            )
            for path, size, mtime_ns, tags in rows:
                mapped = nested.mapped(path)
                if mapped is not None:
                    heads[mapped] = (size, mtime_ns, tuple(json.loads(tags)))
    return heads


def _nesting(logdir: str, other: str) -> tuple[str, bool] | None:
    """(the inner logdir relative to the outer, whether ``other`` is the inner one), or
    None when neither holds the other (or they are the same: ``sources.other_source``)."""
    if is_remote(logdir) != is_remote(other):
        return None
    ours, theirs = logdir.rstrip("/"), other.rstrip("/")
    if theirs.startswith(ours + "/"):
        return posixpath.normpath(theirs[len(ours) + 1 :]), True
    if ours.startswith(theirs + "/"):
        return posixpath.normpath(ours[len(theirs) + 1 :]), False
    return None


def take_over(
    writer: StoreWriter,
    origin: Origin,
    classification: Classification,
    summary: Summary,
    options: ConvertOptions,
) -> None:
    """Take over, in the writer's open transaction, the files other sources hold of this
    logdir (see :func:`plan_moves`; all of them unless ``--run`` leaves some out), and say
    so in the summary."""
    if not nested_sources(writer.conn, origin, classification.logdir):
        return
    writer.lock_runs(_LOCK_SOURCE, [_LOCK_RUN])
    known = writer.files.states_of_source(origin.source)
    moves = plan_moves(writer.conn, origin, classification, known, whole=not options.runs)
    for source, paths in _by_source(moves).items():
        writer.lock_runs(source, paths)
    writer.lock_runs(origin.source, {move.run_path for move in moves})
    left: set[int] = set()
    for move in moves:
        file_id = move.file.state.id or 0
        if not move.duplicate:
            group_path = posixpath.dirname(move.run_path)
            place = (move.run_path, group_path, move.context, move.path)
            file_into(writer, origin, classification.logdir, file_id, place, left)
        elif (gone := writer.files.delete(file_id)) is not None:
            writer.files.drop_empty(*gone)
            left.add(gone[0])
        writer.statements.run(
            "DELETE FROM file_heads WHERE source = :source AND path = :path",
            {"source": move.nested.source, "path": move.file.state.path},
        )
    forget_pushes_of_gone_runs(writer, left)
    summary.files_taken_over += len(moves)
    summary.taken_over += notices(moves)


def dry_run_moves(
    url: str,
    origin: Origin,
    classification: Classification,
    known: dict[str, KnownFile],
    *,
    whole: bool,
) -> list[Move]:
    """What :func:`take_over` would move, read without changing anything; ``known`` (this
    source's stored files) gets the moved files as the planner will then find them."""
    from sqlalchemy import inspect

    from tbconvert.store.file_states import read_only

    with read_only(url) as conn:
        if conn is None:
            return []
        present = {column["name"] for column in inspect(conn).get_columns("event_files")}
        moves = plan_moves(
            conn, origin, classification, known, whole=whole, before_0005="selection" not in present
        )
    for move in moves:
        if not move.duplicate:
            known[move.path] = move.moved
    return moves


def _by_source(moves: Iterable[Move]) -> dict[str, set[str]]:
    runs: dict[str, set[str]] = defaultdict(set)
    for move in moves:
        runs[move.nested.source].add(move.file.run_path)
    return runs


def notices(moves: list[Move]) -> list[str]:
    """One line per source taken from: ``took over 12 files of 12 runs stored from X``."""
    return [
        f"took over {files} {'file' if files == 1 else 'files'} of {runs} "
        f"{'run' if runs == 1 else 'runs'} stored from {logdir}"
        for logdir, files, runs in _counts(moves)
    ]


def _counts(moves: list[Move]) -> Iterator[tuple[str, int, int]]:
    by_logdir: dict[str, list[Move]] = defaultdict(list)
    for move in moves:
        by_logdir[move.nested.logdir].append(move)
    for logdir, taken in sorted(by_logdir.items()):
        yield logdir, len(taken), len({move.file.run_path for move in taken})
