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


@dataclass
class CommitGroup:
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

    def __init__(self, commit: Callable[[CommitGroup], None], in_thread: bool) -> None:
        """Args: what commits a group; whether to commit in a thread."""
        self._commit = commit
        self._in_thread = in_thread
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._handed_over = threading.Event()

    def waiting_on_server(self) -> None:
        """The commit thread hands the server work it then waits for: submit() returns."""
        self._handed_over.set()

    def submit(self, group: CommitGroup) -> None:
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

    def _run(self, group: CommitGroup) -> None:
        try:
            self._commit(group)
        except BaseException as error:  # raised in the submitting thread by wait()
            self._error = error
        finally:
            self._handed_over.set()
