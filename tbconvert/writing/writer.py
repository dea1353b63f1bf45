"""The converter's one writing connection: transactions, and the points and blobs staged and
inserted in them.

Dialect-neutral: what differs between backends is a :class:`~tbconvert.writing.bulk.Bulk`
(``sqlite``, ``postgres``).  ``ON CONFLICT DO NOTHING`` on the point keys (source file and
byte offset) makes re-reading the same bytes a no-op.  The writer holds two more roles over
the same transaction: the ids of runs, contexts, series and blobs (``writer.identities``,
``writing.identities``) and the per-file state (``writer.files``, ``writing.file_states``).
A transaction's points, file states and, on SQLite, new runs, series and files are staged
and written when it ends (:meth:`StoreWriter.flush`): a group of small files costs one insert
per table.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.rows import POINT_COLUMNS, FileRows, InsertRows, RowBatch
from tbconvert.writing import current_summaries, run_params, series_summaries
from tbconvert.writing.bulk import Bulk
from tbconvert.writing.file_states import FileStates
from tbconvert.writing.identities import AllocatingIdentities, Identities
from tbconvert.writing.postgres import PostgresBulk
from tbconvert.writing.sqlite import SqliteBulk
from tbconvert.writing.statements import Statements


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
        self.files = FileStates(
            self.statements, self.identities, self._dialect, self.flush, self.conn
        )
        # The points the open transaction inserts at its end (see stage_points).
        self._staged: dict[tuple[str, bool], RowBatch] = {}
        self._paths: dict[int, str] = {}
        self._points_inserted = False  # by the open transaction
        # The series the open transaction inserted points of, scalars and the rest, whose
        # current summaries it brings up to date at its end.
        self._inserted: dict[bool, set[int]] = {True: set(), False: set()}
        # The series the open transaction inserted params of, whose runs' run_params rows it
        # makes again at its end.
        self._params_inserted: set[int] = set()

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
                current_summaries.refresh(
                    self.statements, self._inserted[True], self._inserted[False]
                )
                run_params.refresh_series(self.statements, self._dialect, self._params_inserted)
        except BaseException:
            self.identities.rolled_back()
            raise
        finally:
            self._staged, self._paths = {}, {}
            self._inserted = {True: set(), False: set()}
            self._params_inserted = set()
            self.files.discard()
            self.identities.ended()
        if self._points_inserted:
            self.bulk.after_commit()

    def flush(self) -> None:
        """Write what the open transaction staged: new runs, series and files, the points
        (one insert per table and per ``fresh``), and the files' states, one statement each."""
        self.identities.flush()
        self.files.insert_new()
        staged, self._staged = self._staged, {}
        for (table, fresh), batch in staged.items():
            self.insert_points(
                table, batch.parts[0] if len(batch.parts) == 1 else batch, fresh=fresh
            )
        self.files.save_updated()

    def lock_runs(self, source: str, run_paths: Collection[str]) -> None:
        """Hold the runs until the transaction ends (PostgreSQL; SQLite's write lock already
        does): concurrent converters then never interleave inside one run's rows.  All at
        once, in one order every converter uses, so two of them never wait on each other."""
        self.bulk.lock_runs(self.statements, source, run_paths)
        self.identities.prefetch_runs(source, run_paths)

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
        if inserted == len(rows):
            series = series_summaries.add_rows(
                self.statements, table, rows, self.identities.unsummarised, self._paths
            )
            self._inserted[table == "scalars"].update(series)
            if table == "params":
                self._params_inserted.update(series)
        elif inserted:
            self.identities.summaries_recounted()
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
