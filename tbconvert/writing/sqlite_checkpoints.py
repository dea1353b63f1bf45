"""Copying a SQLite store's write-ahead log into the database file beside the writer.

In WAL mode a commit appends pages to the ``-wal`` file, and the connection that commits past
``wal_autocheckpoint`` pages then copies them into the database and syncs it, inside its
commit: two thirds of a conversion's commit time (measured: the mixed benchmark's commits
took 0.14 s with it, 0.03 s without).  The writer's connection raises that threshold, and
after each commit of points a :class:`Checkpointer` copies what was committed from a
connection of its own, in a thread: SQLite's checkpoint runs without Python's lock, on the
other core, while the writer decodes the next files.  A ``PASSIVE`` checkpoint never waits
for, nor blocks, readers or the writer; SQLite keeps the log whole until every page is
copied, so a crash at any moment loses nothing, and the writer's own checkpoint (past the
raised threshold) and the one SQLite makes when the last connection closes still apply.
"""

from __future__ import annotations

import sqlite3
import threading

# Pages the writer's own connection lets the log hold before it copies them itself: four
# times SQLite's default, a margin for when the thread is behind (16 MB of 4 KiB pages).
WRITER_AUTOCHECKPOINT_PAGES = 4000


class Checkpointer:
    """Checkpoints one SQLite database in a thread, when asked (:meth:`after_commit`).

    The thread and its connection start with the first request, so a conversion that
    commits nothing pays for neither, and forked ``--jobs`` workers, started before the
    first points are committed, never inherit a running thread.
    """

    def __init__(self, path: str) -> None:
        """Args: the database file."""
        self._path = path
        self._wanted = threading.Event()
        self._pending = False  # a commit not copied yet
        self._closing = False
        self._thread: threading.Thread | None = None
        self.error: sqlite3.Error | None = None  # what stopped it, if anything
        self.checkpoints = 0  # completed, for tests and curiosity

    def after_commit(self) -> None:
        """Copy what was just committed, soon (returns at once)."""
        self._pending = True
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="tbconvert-checkpoint", daemon=True
            )
            self._thread.start()
        self._wanted.set()

    def close(self) -> None:
        """Copy what was asked and not copied yet, then stop the thread."""
        self._closing = True
        self._wanted.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            database = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error as error:
            self.error = error
            return
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._pending:
                    self._pending = False
                    database.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                if self._closing:
                    return
        except sqlite3.Error as error:
            # The log still holds every page: the writer's own checkpoints take over.
            self.error = error
        finally:
            database.close()
