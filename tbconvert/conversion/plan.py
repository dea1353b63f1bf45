"""Which files a conversion reads, and how: one planner for real runs and ``--dry-run``.

Per file (keyed by its path relative to the logdir) the store keeps its (run, context), size,
mtime, a digest of the first record, the offset read, whether that read reached the end, and
the selection it was read under (design §7).  Actions:

- ``new``: not in the store.
- ``moved`` is no action but a flag: a file the store holds under another (run, context)
  (``--flat`` switched, a classification that changed) moves there with its points before
  planning (``conversion.relocation``), nothing read again, and is then planned as it stands.
- ``unchanged``: read to its end under a selection that covers this one, and its size and
  mtime are as stored: not even opened.
- ``replaced``: it shrank or its first record changed: read again from 0, old points deleted.
- ``reread``: ``--full`` (old points deleted), or stored under a narrower selection (read
  again from 0 for what is missing; what is stored stays, rows are keyed by position).
- ``append``: anything else, read from the stored offset (grown, touched, or a read that
  stopped between two chunks).
- ``unreadable``: cannot be stat'ed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tbconvert.filters import Selection
from tbconvert.reading.chunks import unreadable_reason
from tbconvert.reading.discovery import Classification, EventFileSource, RunSource
from tbconvert.reading.first_record import head_digest
from tbconvert.reading.records import open_event_file
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.store.file_states import FileState, KnownFile

ACTIONS = ("new", "append", "replaced", "reread", "unchanged", "unreadable")


@dataclass(frozen=True)
class FilePlan:
    """What to do with one event file.

    Attributes:
        action: One of :data:`ACTIONS`.
        run: The run it belongs to; file, the file itself.
        state: What the store holds for it (None when new).
        size, mtime_ns: As stat'ed now (0 when unreadable).
        reason: Why it is unreadable.
        moved: The store holds it under another (run, context) (``--dry-run`` only: a
            conversion moves such files before it plans).
    """

    action: str
    run: RunSource
    file: EventFileSource
    state: FileState | None
    size: int = 0
    mtime_ns: int = 0
    reason: str | None = None
    moved: bool = False

    @property
    def bytes_to_read(self) -> int:
        """What reading it covers."""
        if self.action in ("unchanged", "unreadable"):
            return 0
        if self.action == "append" and self.state is not None:
            return max(self.size - self.state.offset_consumed, 0)
        return self.size

    @property
    def from_start(self) -> bool:
        """Whether it is read from offset 0 whatever the store holds."""
        return self.action == "reread"


def plan_files(
    classification: Classification,
    known: dict[str, KnownFile],
    full: bool,
    selection: Selection | None = None,
) -> list[FilePlan]:
    """Plan every file of the classification against the stored states ``known``, keyed by
    path relative to the logdir, for a conversion under ``selection`` (default: everything)."""
    selection = selection or Selection()
    remote = classification.remote
    plans = []
    for run in classification.runs:
        for source in run.files:
            known_file = known.get(source.rel_path)
            plans.append(_plan_file(run, source, known_file, full, selection, remote))
    return plans


def reclassified(
    classification: Classification, known: dict[str, KnownFile]
) -> tuple[list[str], int]:
    """What the classification changed since the store was written: the orphans it does not
    hold yet (named once, then counted), and how many stored runs have all their present
    files in other runs now (merged into them)."""
    new_orphans = [path for path in classification.orphans if path not in known]
    now = {file.rel_path: file.run_path for file in classification.files}
    moved = {
        stored.run_path
        for path, stored in known.items()
        if path in now and now[path] != stored.run_path
    }
    return new_orphans, len(moved - {run.run_path for run in classification.runs})


def misplaced(
    classification: Classification, known: dict[str, KnownFile]
) -> list[tuple[RunSource, EventFileSource, KnownFile]]:
    """The stored files the classification files under another (run, context) than the
    store does, with the run and file as classified now, in the classification's order."""
    found = []
    for run in classification.runs:
        for source in run.files:
            stored = known.get(source.rel_path)
            if stored is not None and not _in_place(stored, run, source):
                found.append((run, source, stored))
    return found


def _in_place(stored: KnownFile, run: RunSource, source: EventFileSource) -> bool:
    return (stored.run_path, stored.context) == (run.run_path, source.context)


def _plan_file(
    run: RunSource,
    source: EventFileSource,
    known: KnownFile | None,
    full: bool,
    selection: Selection,
    remote: RemoteReads,
) -> FilePlan:
    state = None if known is None else known.state
    moved = known is not None and not _in_place(known, run, source)
    if source.listed is not None:
        size, mtime_ns = source.listed  # a remote object, as its logdir's listing gave it
    else:
        try:
            stat = os.stat(source.path)
        except OSError as error:
            reason = unreadable_reason(error)
            return FilePlan("unreadable", run, source, state, reason=reason, moved=moved)
        size, mtime_ns = stat.st_size, stat.st_mtime_ns
    action = _action(source, known, full, selection, size, mtime_ns, remote)
    return FilePlan(action, run, source, state, size, mtime_ns, moved=moved)


def _action(
    source: EventFileSource,
    known: KnownFile | None,
    full: bool,
    selection: Selection,
    size: int,
    mtime_ns: int,
    remote: RemoteReads,
) -> str:
    if known is None:
        return "new"
    # Where it is stored does not matter: a moved file is planned as it stands in its place.
    state = known.state
    if full:
        return "reread"
    covered = Selection.from_canonical(state.selection).covers(selection)
    if covered and state.complete and state.size == size and state.mtime_ns == mtime_ns:
        return "unchanged"
    if source.sidecar:
        return "replaced"  # read whole again whenever it changed
    if size < state.offset_consumed or _head_changed(source.path, size, state, remote):
        return "replaced"
    return "append" if covered else "reread"


def _head_changed(path: str, size: int, state: FileState, remote: RemoteReads) -> bool:
    """Whether the file's first record differs from the one stored (a new file of the same
    name); a file that cannot be read now is left for the reader to report."""
    if state.head_digest is None:
        return False
    try:
        return first_record_digest(path, size, remote) != state.head_digest
    except OSError:
        return False


def first_record_digest(
    path: str, size: int | None = None, remote: RemoteReads | None = None
) -> str | None:
    """sha256 of the file's first record (None when it has none), a remote object read as
    its pass ``remote`` reads.

    Raises:
        OSError: the file cannot be read.
    """
    with open_event_file(path, size, remote) as handle:
        return head_digest(handle)
