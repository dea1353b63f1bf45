"""Group commit: the chunks of many small files applied in one transaction.

A sweep is thousands of files of a few hundred points each; a transaction per file costs more
than its points.  Chunks are therefore collected, in the order they arrive, until
they hold a chunk's worth of points (or the bounds of ``ConvertTuning.group_*``, or a stop is
asked for, or --jobs workers have nothing decoded ready, or decoding failed), and then applied
in one transaction.
A big file's chunk fills a group by itself, so its commits stay as they were.  Inside the
transaction the files' points are staged and inserted at its end, one insert and one summary
update per table for the whole group, and the files' new states saved by one statement
(``StoreWriter.flush``).  Every file's new state is saved in the transaction that holds its
rows, so design §7's promise (a chunk's points and the file's offset commit together) holds for
every file of the group; a server's deadlock victim rolls the whole group back and applies it
again, from the states of the last commit.  The group's runs are locked first, all together in
key order (``StoreWriter.lock_runs``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tbconvert.conversion.options import ConvertTuning
from tbconvert.reading.chunks import Chunk, FileTask
from tbconvert.store.file_states import FileState


@dataclass
class Group:
    """Chunks collected for one transaction, in arrival order.

    Attributes:
        points: Close the group once it holds this many points (the chunk size).
        limits: Its other bounds (``group_*``: blob bytes, which are held in memory until the
            group commits; bytes of files read; files, each a few statements and a lock).
        entries: The (task, chunk) pairs collected.
    """

    points: int
    limits: ConvertTuning = field(default_factory=ConvertTuning)
    entries: list[tuple[FileTask, Chunk]] = field(default_factory=list)
    _points: int = 0
    _blob_bytes: int = 0
    _read: int = 0

    def add(self, task: FileTask, chunk: Chunk) -> None:
        """Collect one chunk."""
        self.entries.append((task, chunk))
        self._points += chunk.points()
        self._blob_bytes += chunk.blob_bytes()
        self._read += chunk.read

    def run_paths(self) -> set[str]:
        """The runs the group writes to (each locked before the group writes anything)."""
        return {task.run_path for task, chunk in self.entries if chunk.error is None}

    def full(self) -> bool:
        """True when the group should commit now."""
        return (
            self._points >= self.points
            or self._blob_bytes >= self.limits.group_blob_bytes
            or self._read >= self.limits.group_read_bytes
            or len(self.entries) >= self.limits.group_files
        )


class Committer:
    """Commits groups one after the other: in the caller's thread, or, for a server store,
    in a thread of its own, so the next group decodes while the server takes this one.

    On a server most of a commit is the server's own work (COPY, its index, its log) while
    the converter waits, so the next group decodes meanwhile.  One group at a time, each
    submitted after the one before committed, so the store goes through the same commits as
    in line.  Not for SQLite: there the commit is the converter's own work, binding rows
    under the interpreter lock, and a thread of its own only moves the decoding of the next
    group beside it, which gains nothing once the host's cores are busy (design §8).

    The next group decodes only once the commit thread waits on the server
    (:meth:`waiting_on_server`) or is done: before that its own work (the group's statements,
    the COPY stream) would share the interpreter with the decoding while the server idles.
    Measurements: docs/performance.md#commit-thread.
    """

    def __init__(self, commit: Callable[[Group], None], in_thread: bool) -> None:
        """Args: what commits a group; whether to commit in a thread."""
        self._commit = commit
        self._in_thread = in_thread
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._handed_over = threading.Event()

    def waiting_on_server(self) -> None:
        """The commit thread hands the server work it then waits for: submit() returns."""
        self._handed_over.set()

    def submit(self, group: Group) -> None:
        """Commit ``group`` after the one before (whose error, if any, is raised here);
        in a thread, return once it waits on the server or is done."""
        self.wait()
        if not self._in_thread:
            self._commit(group)
            return
        self._thread = threading.Thread(
            target=self._run, args=(group,), name="tbconvert-commit", daemon=True
        )
        self._handed_over.clear()
        self._thread.start()
        self._handed_over.wait()

    def wait(self) -> None:
        """Until the group submitted last has committed; raise what it failed with."""
        self.join()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def join(self) -> None:
        """Until the group submitted last is done, committed or not (nothing raised)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, group: Group) -> None:
        try:
            self._commit(group)
        except BaseException as error:  # raised in the submitting thread by wait()
            self._error = error
        finally:
            self._handed_over.set()


@dataclass
class OpenFile:
    """The file whose chunks are being applied: its state, store ids of its series,
    whether none of its rows read now can be stored yet (so a server may skip the check),
    and the offset this read began at (only its first chunk says whether it restarted)."""

    state: FileState
    ids: list[int]
    base_records: int
    fresh: bool = False
    read_from: int = 0


@dataclass
class Applied:
    """What applying one chunk did, for the bookkeeping after its group commits.

    Attributes:
        task, chunk: The chunk.
        before: The file's offset before the chunk (None: not applied, see ``elsewhere``).
        file: The file's state after it.
        replaced: Its old points were deleted (a replaced file, not ``--full``).
        elsewhere: Another converter read the file further since it was planned.
    """

    task: FileTask
    chunk: Chunk
    before: int | None = None
    file: OpenFile | None = None
    replaced: bool = False
    elsewhere: bool = False


@dataclass
class Position:
    """Where the chunk stream stands between commits (a group restarts from it on retry).

    Attributes:
        open_file: The file read so far by committed chunks, not yet to its end.
        left_to_another: The task whose file another converter is reading (-1: none).
    """

    open_file: OpenFile | None = None
    left_to_another: int = -1


class ReadElsewhere(Exception):
    """Another converter read the file further since it was planned."""


def extreme(
    pick: Callable[[float, float], float], old: float | None, new: float | None
) -> float | None:
    """``pick`` of two optional values (None when both are)."""
    if old is None:
        return new
    return old if new is None else pick(old, new)


def file_status(chunk: Chunk, invalid: bool, damaged: int) -> str:
    """A file's status after a chunk (see ``FileState.status``)."""
    if not chunk.done:
        return "reading"  # never skipped as unchanged: the next run reads on
    if invalid:
        return "invalid"
    if chunk.torn:
        return "partial"
    return "damaged" if damaged else "ok"
