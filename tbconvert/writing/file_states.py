"""What the store records per event file, written: the writer's per-file state repository.

``store.file_states`` defines a file's state and reads it back for the planner (outside any
transaction, or for a dry run); this module saves, deletes and marks those states inside the
writer's open transaction, and drops what a deleted file leaves empty.  A state saved in a
transaction waits for its end (:meth:`FileStates.insert_new` and
:meth:`FileStates.save_updated`, called by ``StoreWriter.flush``): a group of small files then
costs one statement for all their states.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection

from tbconvert.rows import POINT_TABLES
from tbconvert.store.file_states import FileState, KnownFile, file_rows, select_file_states
from tbconvert.writing import series_summaries
from tbconvert.writing import statements as sql
from tbconvert.writing.identities import Identities
from tbconvert.writing.statements import Statements

_SERIES_OF_FILE = (
    "SELECT s.id FROM series AS s JOIN event_files AS f ON f.run_id = s.run_id "
    "AND f.context_id = s.context_id WHERE f.id = :file_id"
)
_FILES_OF_SOURCE = (
    "SELECT f.id, f.path, f.status, r.run_path FROM event_files AS f "
    "JOIN runs AS r ON r.id = f.run_id "
    "WHERE r.source = :source AND f.status <> 'gone' ORDER BY f.id"
)


class FileStates:
    """The ``event_files`` rows of the writer's connection, read and written in its open
    transaction.

    Args:
        statements: The writer's statements.
        identities: The writer's ids (new files are numbered there; deletions are told).
        dialect: The backend's name (summaries are recounted in its SQL).
        flush: Writes what the transaction staged (the writer's ``flush``): a deletion reads
            the store, which must include it.
        conn: The writer's connection, for ``store.file_states``'s read of a source's states
            (the planner's, which a dry run makes on a connection of its own).
    """

    def __init__(
        self,
        statements: Statements,
        identities: Identities,
        dialect: str,
        flush: Callable[[], None],
        conn: Connection,
    ) -> None:
        """Start with nothing staged."""
        self._statements = statements
        self._identities = identities
        self._dialect = dialect
        self._flush = flush
        self._conn = conn
        self._updates: dict[int, FileState] = {}
        self._new: dict[int, FileState] = {}  # by id (see save)

    def state(self, run_id: int, path: str) -> FileState | None:
        """The stored state of a file of a run, or None when the file is new to the store."""
        if self._identities.made_now(run_id):
            return None  # no file of a run this transaction made can be stored elsewhere
        row = self._statements.one(sql.FILE_STATE, {"run_id": run_id, "path": path})
        return None if row is None else FileState(*row)

    def save(self, state: FileState) -> FileState:
        """Insert a file's state, or stage it for the end of the transaction (the files of a
        group then cost one statement); returns it with its id."""
        file_id = state.id
        if file_id is None:
            file_id = self._identities.new_file_id()
            if file_id is None:
                (values,) = file_rows([state])
                del values["id"]  # the insert numbers it
                return state.updated(id=int(self._statements.scalar(sql.INSERT_FILE, values)))
            # A file made in this transaction is inserted at its end with its last state:
            # the statement's values are made once, then.
            state = state.updated(id=file_id)
            staged = self._new
        else:
            staged = self._new if file_id in self._new else self._updates
        staged[file_id] = state
        return state

    def insert_new(self) -> None:
        """Insert the files this transaction made, with their last states (before their
        points, which refer to them)."""
        new, self._new = self._new, {}
        if new:
            self._statements.insert(sql.INSERT_FILE_WITH_ID, file_rows(new.values()))

    def save_updated(self) -> None:
        """Save the staged states of stored files, one statement for all."""
        updates, self._updates = self._updates, {}
        if updates:
            self._statements.many(sql.UPDATE_FILE, file_rows(updates.values()))

    def discard(self) -> None:
        """Forget what was staged (the transaction ended, either way)."""
        self._updates, self._new = {}, {}

    def states_of_source(self, source: str) -> dict[str, KnownFile]:
        """Every stored file state of one source, keyed by its path relative to the logdir."""
        return select_file_states(self._conn, source)

    def of_source(self, source: str) -> list[tuple[int, str, str, str]]:
        """(file id, path, status, run path) of every file not yet marked gone, for one
        source."""
        rows = self._statements.all(_FILES_OF_SOURCE, {"source": source})
        return [(row[0], row[1], row[2], row[3]) for row in rows]

    def mark_gone(self, file_ids: Sequence[int]) -> None:
        """Mark files that disappeared from the logdir; their points stay."""
        now = time.time()
        self._statements.many(
            "UPDATE event_files SET status = 'gone', updated_at = :now WHERE id = :id",
            [{"id": file_id, "now": now} for file_id in file_ids],
        )

    def move_logdir(self, source: str, logdir: str) -> None:
        """Record where the source's logdir is now (the same ``--source``, moved)."""
        self._statements.run(
            "UPDATE runs SET logdir = :logdir WHERE source = :source AND logdir <> :logdir",
            {"source": source, "logdir": logdir},
        )

    def delete(self, file_id: int) -> tuple[int, int] | None:
        """Delete a file's points and row (it moved to another (run, context)); returns the
        (run_id, context_id) it was filed under, None when another converter took it away."""
        self._flush()
        row = self._statements.one(
            "SELECT run_id, context_id FROM event_files WHERE id = :id", {"id": file_id}
        )
        if row is None:
            return None
        self.delete_points(file_id)
        self._statements.run("DELETE FROM event_files WHERE id = :id", {"id": file_id})
        self._identities.deleted()
        return int(row[0]), int(row[1])

    def delete_points(self, file_id: int) -> None:
        """Remove every point read from one file (it was replaced or is read again in full),
        and summarise the series of its (run, context) again."""
        self._flush()
        series = self._statements.all(_SERIES_OF_FILE, {"file_id": file_id})
        for table in POINT_TABLES:
            # Through series first: the point tables are clustered by series, not by file.
            self._statements.run(
                f"DELETE FROM {table} WHERE file_id = :file_id AND series_id IN "
                f"({_SERIES_OF_FILE})",
                {"file_id": file_id},
            )
        self._identities.summaries_recounted()
        series_summaries.recount(self._statements, self._dialect, [int(row[0]) for row in series])

    def drop_empty(self, run_id: int, context_id: int) -> None:
        """Delete the series of a (run, context) left without points, then the run if nothing
        is left of it.  Contexts stay: they are shared by every run and source, other
        converters may hold their ids, and no view shows one without points."""
        self._flush()
        unused = " AND ".join(
            f"NOT EXISTS (SELECT 1 FROM {table} AS p WHERE p.series_id = s.id)"
            for table in POINT_TABLES
        )
        series = self._statements.all(
            f"SELECT s.id FROM series AS s WHERE s.run_id = :run_id "
            f"AND s.context_id = :context_id AND {unused}",
            {"run_id": run_id, "context_id": context_id},
        )
        gone = {int(row[0]) for row in series}
        series_summaries.forget(self._statements, gone)
        for series_id in sorted(gone):
            self._statements.run("DELETE FROM series WHERE id = :id", {"id": series_id})
        deleted = self._statements.run(
            "DELETE FROM runs WHERE id = :run_id AND NOT EXISTS (SELECT 1 FROM event_files "
            "AS f WHERE f.run_id = :run_id) AND NOT EXISTS (SELECT 1 FROM series AS s "
            "WHERE s.run_id = :run_id)",
            {"run_id": run_id},
        )
        self._identities.forget(gone, {run_id} if deleted else set())
