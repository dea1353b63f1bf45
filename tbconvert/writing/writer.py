"""The converter's one writing connection: runs, contexts and series got or created, per-file
state and points inserted, all inside chunk transactions.

Dialect-neutral: what differs between backends is a :class:`~tbconvert.writing.bulk.Bulk`
(``sqlite``, ``postgres``).  ``ON CONFLICT DO NOTHING`` on the point keys (source file and
byte offset) makes re-reading the same bytes a no-op.  A transaction's points, file states
and, on SQLite, new runs, series and files (``identities``) are staged and written when it
ends (:meth:`StoreWriter.flush`): a group of small files costs one insert per table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from tbconvert.rows import (
    POINT_COLUMNS,
    POINT_TABLES,
    FileRows,
    InsertRows,
    RowBatch,
    SeriesDefinition,
    TagMetadata,
)
from tbconvert.store.file_states import FileState, KnownFile, file_rows, select_file_states
from tbconvert.writing import series_summaries
from tbconvert.writing import statements as sql
from tbconvert.writing.bulk import Bulk
from tbconvert.writing.identities import AllocatingIdentities, Identities
from tbconvert.writing.postgres import PostgresBulk
from tbconvert.writing.sqlite import SqliteBulk
from tbconvert.writing.statements import Statements

# Series plugins that were not taken from a SummaryMetadata, so there is nothing to remember.
_NOT_FROM_METADATA = frozenset(
    {"tensor", "unknown", "graphs", "graph_tagged_run_metadata", "session_log", "log_message"}
)
_KNOWN_METADATA = text(
    "SELECT r.run_path, c.name, s.name, s.plugin, s.display_name, s.description, "
    "s.plugin_content FROM series AS s JOIN runs AS r ON r.id = s.run_id "
    "JOIN contexts AS c ON c.id = s.context_id WHERE r.source = :source ORDER BY s.id"
)


class StoreWriter:
    """The converter's single writing connection to a store."""

    def __init__(self, engine: Engine) -> None:
        """Open the connection; SQLite transactions take the write lock when they begin."""
        self.engine = engine
        self.conn = engine.connect().execution_options(sqlite_begin="IMMEDIATE")
        self._dialect = engine.dialect.name
        server = self._dialect == "postgresql"
        self.bulk: Bulk = PostgresBulk(engine) if server else SqliteBulk(engine)
        self.shared = self.bulk.shared  # other machines may write to the store as well
        self.bulk.on_connect(self._dbapi())
        # The per-file statements skip SQLAlchemy's statement layer (see writing.statements).
        self.statements = Statements(self._dbapi, pyformat=self.shared)
        # Alone on the store for a whole transaction, SQLite's writer gives ids itself.
        identities = Identities if self.shared else AllocatingIdentities
        self.identities = identities(self.statements, self.bulk.text_value)
        self.created_runs = self.identities.created_runs
        self.created_series = self.identities.created_series
        # What the open transaction applies at its end (see stage_points and save_file).
        self._staged: dict[tuple[str, bool], RowBatch] = {}
        self._file_updates: dict[int, FileState] = {}
        self._new_files: dict[int, FileState] = {}  # by id (see save_file)
        self._paths: dict[int, str] = {}
        self._points_inserted = False  # by the open transaction

    def call_when_waiting_on_server(self, callback: Callable[[], None]) -> None:
        """Have ``callback`` called whenever the writer hands a server work it then waits for
        (a point table's COPY; never on SQLite, whose inserts are the writer's own work)."""
        self.bulk.waiting_on_server = callback

    def is_busy(self) -> bool:
        """True when another process holds the store's write lock right now (SQLite only)."""
        return self.bulk.is_busy()

    def notices(self) -> list[str]:
        """What the backend has to say about how the writing went (for the summary)."""
        return self.bulk.notices()

    def close(self) -> None:
        """Close the connection (any open transaction is rolled back)."""
        self.bulk.on_close(self.conn)
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic chunk: everything inside commits together or not at all."""
        self._points_inserted = False
        try:
            with self.conn.begin():
                yield
                self.flush()
        except BaseException:
            self.identities.rolled_back()
            raise
        finally:
            self._staged, self._file_updates, self._new_files, self._paths = {}, {}, {}, {}
            self.identities.ended()
        if self._points_inserted:
            self.bulk.after_commit()

    def flush(self) -> None:
        """Write what the open transaction staged: new runs, series and files, the points
        (one insert per table and per ``fresh``), and the files' states, one statement each."""
        self.identities.flush()
        new_files, self._new_files = self._new_files, {}
        if new_files:
            self.statements.insert(sql.INSERT_FILE_WITH_ID, file_rows(new_files.values()))
        staged, self._staged = self._staged, {}
        for (table, fresh), batch in staged.items():
            self.insert_points(
                table, batch.parts[0] if len(batch.parts) == 1 else batch, fresh=fresh
            )
        updates, self._file_updates = self._file_updates, {}
        if updates:
            self.statements.many(sql.UPDATE_FILE, file_rows(updates.values()))

    def run_id(
        self, source: str, run_path: str, *, host: str, logdir: str, group_path: str, name: str
    ) -> int:
        """Get or create the run (source, run_path)."""
        return self.identities.run_id(
            {
                "source": source,
                "host": host,
                "logdir": logdir,
                "run_path": run_path,
                "group_path": group_path,
                "name": name,
            }
        )

    def lock_runs(self, source: str, run_paths: Collection[str]) -> None:
        """Hold the runs until the transaction ends (PostgreSQL; SQLite's write lock already
        does): concurrent converters then never interleave inside one run's rows.  All at
        once, in one order every converter uses, so two of them never wait on each other."""
        self.bulk.lock_runs(self.statements, source, run_paths)
        self.identities.prefetch_runs(source, run_paths)

    def hosts_of_source(self, source: str) -> set[str]:
        """The hosts that wrote the runs of a source so far."""
        rows = self.conn.execute(
            text("SELECT DISTINCT host FROM runs WHERE source = :source AND host IS NOT NULL"),
            {"source": source},
        ).all()
        return {row[0] for row in rows}

    def context_id(self, name: str) -> int:
        """Get or create the context called ``name``."""
        return self.identities.context_id(name)

    def series_ids(
        self, run_id: int, context_id: int, definitions: Sequence[SeriesDefinition]
    ) -> list[int]:
        """Get or create series of a (run, context), in order; a new series' metadata comes
        from the tag's first occurrence."""
        return self.identities.series_ids(run_id, context_id, definitions)

    def known_metadata(self, source: str) -> dict[tuple[str, str], dict[str, TagMetadata]]:
        """The first metadata of every tag that came from a SummaryMetadata, by tag, for
        every (run_path, context) of a source: one query, however many runs it has."""
        rows = self.conn.execute(_KNOWN_METADATA, {"source": source}).all()
        known: dict[tuple[str, str], dict[str, TagMetadata]] = {}
        for run_path, context, tag, plugin, display, description, content in rows:
            tags = known.setdefault((run_path, context), {})
            if tag not in tags and plugin not in _NOT_FROM_METADATA:
                tags[tag] = TagMetadata(
                    plugin, display, description, bytes(content) if content is not None else None
                )
        return known

    def file_state(self, run_id: int, path: str) -> FileState | None:
        """The stored state of a file of a run, or None when the file is new to the store."""
        if self.identities.made_now(run_id):
            return None  # no file of a run this transaction made can be stored elsewhere
        row = self.statements.one(sql.FILE_STATE, {"run_id": run_id, "path": path})
        return None if row is None else FileState(*row)

    def save_file(self, state: FileState) -> FileState:
        """Insert a file's state, or stage it for the end of the transaction (the files of a
        group then cost one statement); returns it with its id."""
        file_id = state.id
        if file_id is None:
            file_id = self.identities.new_file_id()
            if file_id is None:
                (values,) = file_rows([state])
                del values["id"]  # the insert numbers it
                return state.updated(id=int(self.statements.scalar(sql.INSERT_FILE, values)))
            # A file made in this transaction is inserted at its end with its last state:
            # the statement's values are made once, then.
            state = state.updated(id=file_id)
            staged = self._new_files
        else:
            staged = self._new_files if file_id in self._new_files else self._file_updates
        staged[file_id] = state
        return state

    def file_states_of_source(self, source: str) -> dict[str, KnownFile]:
        """Every stored file state of one source, keyed by its path relative to the logdir."""
        return select_file_states(self.conn, source)

    def sources_holding(self, source: str, files: Sequence[tuple[str, str]]) -> list[str]:
        """The other sources that hold every one of ``files`` ((path, first-record digest)):
        the same logdir known under another name."""
        paths = {path: digest for path, digest in files}
        marks = ", ".join(f":path{index}" for index in range(len(paths)))
        found = self.conn.execute(
            text(
                "SELECT DISTINCT r.source, f.path, f.head_digest FROM event_files AS f "
                f"JOIN runs AS r ON r.id = f.run_id WHERE f.path IN ({marks}) "
                "AND r.source <> :source"
            ),
            {"source": source, **{f"path{index}": path for index, path in enumerate(paths)}},
        ).all()
        matches: dict[str, int] = {}
        for other, path, digest in found:
            if paths.get(path) == digest:
                matches[other] = matches.get(other, 0) + 1
        return sorted(other for other, count in matches.items() if count == len(paths))

    def move_logdir(self, source: str, logdir: str) -> None:
        """Record where the source's logdir is now (the same ``--source``, moved)."""
        self.statements.run(
            "UPDATE runs SET logdir = :logdir WHERE source = :source AND logdir <> :logdir",
            {"source": source, "logdir": logdir},
        )

    def delete_file(self, file_id: int) -> tuple[int, int] | None:
        """Delete a file's points and row (it moved to another (run, context)); returns the
        (run_id, context_id) it was filed under, None when another converter took it away."""
        self.flush()  # what it reads must include what the transaction staged
        row = self.conn.execute(
            text("SELECT run_id, context_id FROM event_files WHERE id = :id"), {"id": file_id}
        ).one_or_none()
        if row is None:
            return None
        self.delete_file_points(file_id)
        self.statements.run("DELETE FROM event_files WHERE id = :id", {"id": file_id})
        self.identities.deleted()
        return int(row[0]), int(row[1])

    def drop_empty(self, run_id: int, context_id: int) -> None:
        """Delete the series of a (run, context) left without points, then the run if nothing
        is left of it.  Contexts stay: they are shared by every run and source, other
        converters may hold their ids, and no view shows one without points."""
        self.flush()
        unused = " AND ".join(
            f"NOT EXISTS (SELECT 1 FROM {table} AS p WHERE p.series_id = s.id)"
            for table in POINT_TABLES
        )
        series = self.conn.execute(
            text(
                f"SELECT s.id FROM series AS s WHERE s.run_id = :run_id "
                f"AND s.context_id = :context_id AND {unused}"
            ),
            {"run_id": run_id, "context_id": context_id},
        ).all()
        gone = {int(row[0]) for row in series}
        series_summaries.forget(self.statements, gone)
        for series_id in sorted(gone):
            self.statements.run("DELETE FROM series WHERE id = :id", {"id": series_id})
        deleted = self.statements.run(
            "DELETE FROM runs WHERE id = :run_id AND NOT EXISTS (SELECT 1 FROM event_files "
            "AS f WHERE f.run_id = :run_id) AND NOT EXISTS (SELECT 1 FROM series AS s "
            "WHERE s.run_id = :run_id)",
            {"run_id": run_id},
        )
        self._forget(gone, {run_id} if deleted else set())

    def _forget(self, series: set[int], runs: set[int]) -> None:
        """Drop cached ids of deleted rows."""
        self.identities.forget(series, runs)

    def start_conversion(self, logdir: str, tool_version: str, options: str) -> int:
        """Record the start of a conversion; returns its id."""
        return int(
            self.statements.scalar(
                "INSERT INTO conversions (logdir, tool_version, started_at, status, options) "
                "VALUES (:logdir, :version, :now, 'running', :options) RETURNING id",
                {"logdir": logdir, "version": tool_version, "now": time.time(), "options": options},
            )
        )

    def finish_conversion(self, conversion_id: int, summary: str) -> None:
        """Record the end of a conversion and its summary."""
        self.statements.run(
            "UPDATE conversions SET finished_at = :now, status = 'finished', "
            "summary = :summary WHERE id = :id",
            {"id": conversion_id, "now": time.time(), "summary": summary},
        )

    def files_of_source(self, source: str) -> list[tuple[int, str, str]]:
        """(file id, path, status) of every file not yet marked gone, for one source."""
        rows = self.conn.execute(
            text(
                "SELECT f.id, f.path, f.status FROM event_files AS f "
                "JOIN runs AS r ON r.id = f.run_id "
                "WHERE r.source = :source AND f.status <> 'gone' ORDER BY f.id"
            ),
            {"source": source},
        ).all()
        return [(row[0], row[1], row[2]) for row in rows]

    def mark_gone(self, file_ids: Sequence[int]) -> None:
        """Mark files that disappeared from the logdir; their points stay."""
        now = time.time()
        self.statements.many(
            "UPDATE event_files SET status = 'gone', updated_at = :now WHERE id = :id",
            [{"id": file_id, "now": now} for file_id in file_ids],
        )

    def stage_points(self, table: str, rows: FileRows, *, fresh: bool, path: str) -> None:
        """Insert point rows of one file (store ids) at the end of the transaction, with the
        rows of the other files of its group (see :meth:`insert_points`); ``path``: the
        file's, which orders the last points of a series between files."""
        if not rows:
            return
        self._staged.setdefault((table, fresh), RowBatch()).add(rows)
        self._paths[rows.file_id] = path

    def insert_points(self, table: str, rows: InsertRows, *, fresh: bool = False) -> None:
        """Insert point rows now (of one file or several), ignoring rows already stored from
        the same bytes, and keep their series' summaries exact.  ``fresh``: none can be stored
        yet (read past the file's committed offset under the run's lock, or after its points
        were deleted), which a server can take without checking."""
        if "blob_id" in POINT_COLUMNS.get(table, ()):
            rows = self._with_blob_ids(table, rows)
        inserted = self.bulk.insert_points(self._dbapi(), table, rows, fresh)
        self._points_inserted = True
        unsummarised = self.identities.unsummarised
        if inserted == len(rows):
            series_summaries.add_rows(self.statements, table, rows, unsummarised, self._paths)
        elif inserted:
            unsummarised.clear()  # recounted below: they may have summaries now
            series_summaries.recount(
                self.statements, self._dialect, series_summaries.series_of(table, rows), [table]
            )

    def insert_blobs(self, blobs: dict[str, bytes]) -> None:
        """Store content-addressed bytes once each; remembers sha256 -> id for the rows."""
        # Sorted: blobs are shared between runs, and converters that take row locks in one
        # order cannot deadlock each other on a server.
        known = self.identities.blob_id
        missing = {sha: blobs[sha] for sha in sorted(blobs) if known(sha) is None}
        if not missing:
            return
        self.bulk.insert_blobs(
            self._dbapi(), [(sha, len(data), data) for sha, data in missing.items()]
        )
        for sha in missing:
            self.identities.remember_blob(sha)

    def _with_blob_ids(self, table: str, rows: InsertRows) -> RowBatch:
        """The rows with each blob's sha256 replaced by its id, file by file."""
        position = POINT_COLUMNS[table].index("blob_id")
        ids = self.identities.blob_id
        return RowBatch(
            [
                FileRows.of(
                    [(*row[:position], ids(row[position]), *row[position + 1 :]) for row in part],
                    part.file_id,
                )
                for part in rows.files()
            ]
        )

    def _dbapi(self) -> Any:
        return self.conn.connection.dbapi_connection

    def delete_file_points(self, file_id: int) -> None:
        """Remove every point read from one file (it was replaced or is read again in full),
        and summarise the series of its (run, context) again."""
        self.flush()
        series = self.conn.execute(
            text(
                "SELECT s.id FROM series AS s JOIN event_files AS f ON f.run_id = s.run_id "
                "AND f.context_id = s.context_id WHERE f.id = :file_id"
            ),
            {"file_id": file_id},
        ).all()
        for table in POINT_TABLES:
            # Through series first: the point tables are clustered by series, not by file.
            self.statements.run(
                f"DELETE FROM {table} WHERE file_id = :file_id AND series_id IN "
                "(SELECT s.id FROM series AS s JOIN event_files AS f "
                "ON f.run_id = s.run_id AND f.context_id = s.context_id "
                "WHERE f.id = :file_id)",
                {"file_id": file_id},
            )
        self.identities.unsummarised.clear()
        series_summaries.recount(self.statements, self._dialect, [int(row[0]) for row in series])
