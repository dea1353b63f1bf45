"""Which files a conversion reads, and how: one planner for real runs and ``--dry-run``.

Per file the store keeps size, mtime, a digest of the first record and the offset read
(SPEC §7).  A file whose size and mtime are as stored is ``unchanged`` (not opened); one that
shrank or whose first record changed is ``replaced`` (read again from 0); any other known
file is read from its offset (``append``); ``--full`` reads every known file again from 0
(``reread``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from converter.reading.chunks import unreadable_reason
from converter.reading.discovery import Classification, EventFileSource, RunSource
from converter.reading.records import open_event_file, read_first_record
from converter.store.files import FileState

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
    """

    action: str
    run: RunSource
    file: EventFileSource
    state: FileState | None
    size: int = 0
    mtime_ns: int = 0
    reason: str | None = None

    @property
    def bytes_to_read(self) -> int:
        """What reading it covers."""
        if self.action in ("unchanged", "unreadable"):
            return 0
        if self.action == "append" and self.state is not None:
            return max(self.size - self.state.offset_consumed, 0)
        return self.size


def plan_files(
    classification: Classification, known: dict[tuple[str, str], FileState], full: bool
) -> list[FilePlan]:
    """Plan every file of the classification against the stored states ``known``, keyed by
    (run_path, path)."""
    plans = []
    for run in classification.runs:
        for source in run.files:
            plans.append(_plan_file(run, source, known.get((run.run_path, source.rel_path)), full))
    return plans


def _plan_file(
    run: RunSource, source: EventFileSource, state: FileState | None, full: bool
) -> FilePlan:
    try:
        stat = os.stat(source.path)
    except OSError as error:
        return FilePlan("unreadable", run, source, state, reason=unreadable_reason(error))
    size, mtime_ns = stat.st_size, stat.st_mtime_ns
    if state is None:
        action = "new"
    elif full:
        action = "reread"
    elif state.size == size and state.mtime_ns == mtime_ns:
        action = "unchanged"
    elif size < state.offset_consumed or _head_changed(source.path, state):
        action = "replaced"
    else:
        action = "append"
    return FilePlan(action, run, source, state, size, mtime_ns)


def _head_changed(path: str, state: FileState) -> bool:
    """Whether the file's first record differs from the one stored (a new file of the same
    name); a file that cannot be read now is left for the reader to report."""
    if state.head_digest is None:
        return False
    try:
        with open_event_file(path) as handle:
            head = read_first_record(handle)
    except OSError:
        return False
    digest = hashlib.sha256(head).hexdigest() if head is not None else None
    return digest != state.head_digest
