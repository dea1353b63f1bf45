"""Bulk writes into the store: get-or-create of runs, contexts and series, driver-level
``executemany`` for points, and per-file incremental state, all inside chunk transactions.

Points bypass the ORM and SQLAlchemy's parameter processing (5x slower on this path): rows
are tuples handed to the DBAPI cursor.  ``ON CONFLICT DO NOTHING`` on the point tables' keys
(source file and byte offset) makes re-reading the same bytes a no-op.  On SQLite this
connection does not enforce foreign keys (see ``StoreWriter.__init__``).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from converter.store.engine import advisory_key, sqlite_path

KEY_COLUMNS = ("series_id", "step", "file_id", "record_offset", "value_index", "wall_time")
# Rows are the key columns followed by these; a ``blob_id`` column arrives holding the
# sha256 of the bytes and is swapped for the blob's id at insert time.
PAYLOAD_COLUMNS: dict[str, tuple[str, ...]] = {
    "scalars": ("value",),
    "images": ("idx", "blob_id", "format", "width", "height"),
    "audio": ("idx", "blob_id", "sample_rate", "num_channels", "length_frames", "content_type",
              "label"),
    "histograms": ("count", "min", "max", "sum", "sum_squares", "buckets", "raw_buckets"),
    "texts": ("idx", "value"),
    "params": ("key", "value", "value_num", "value_type"),
    "tensors": ("dtype", "shape", "blob_id"),
}
POINT_COLUMNS = {table: KEY_COLUMNS + payload for table, payload in PAYLOAD_COLUMNS.items()}


# PostgreSQL's deadlock_detected and serialization_failure.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})


@dataclass(frozen=True)
class FileState:
    """One row of ``event_files``: what was read of a file, committed with its points."""

    id: int | None
    run_id: int
    context_id: int
    path: str
    size: int = 0
    mtime_ns: int = 0
    head_digest: str | None = None
    offset_consumed: int = 0
    records: int = 0
    damaged_records: int = 0
    status: str = "new"
    last_error: str | None = None
    first_wall_time: float | None = None
    last_wall_time: float | None = None


_FILE_COLUMNS = (
    "run_id", "context_id", "path", "size", "mtime_ns", "head_digest", "offset_consumed",
    "records", "damaged_records", "status", "last_error", "first_wall_time", "last_wall_time",
)


def select_file_states(conn: Connection, source: str) -> dict[tuple[str, str], FileState]:
    """Every stored file state of one source (logdir), keyed by (run_path, path)."""
    columns = ", ".join(f"f.{column}" for column in _FILE_COLUMNS)
    rows = conn.execute(
        text(f"SELECT r.run_path, f.id, {columns} FROM event_files AS f "
             "JOIN runs AS r ON r.id = f.run_id WHERE r.source = :source"),
        {"source": source},
    ).all()
    return {(row[0], row[4]): FileState(*row[1:]) for row in rows}


class StoreWriter:
    """The converter's single writing connection to a store."""

    def __init__(self, engine: Engine) -> None:
        """Open the connection; SQLite transactions take the write lock when they begin."""
        self.engine = engine
        self.conn = engine.connect().execution_options(sqlite_begin="IMMEDIATE")
        self._placeholder = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        # A server store, which other machines may write to as well.
        self.shared = engine.dialect.name == "postgresql"
        self._unchecked = engine.dialect.name == "sqlite"
        if self._unchecked:
            # Every parent row a point refers to (series, file) is made by this writer, in the
            # transaction that inserts the point, so enforcing the keys here would only check
            # the writer's own ids, at a sixth of the insert's cost (reference/run_store.md
            # §2.6).  The keys stay declared and every other connection enforces them; this
            # one is closed, never pooled, when the writer is done.  Set outside a
            # transaction: SQLite ignores the pragma inside one.
            self._dbapi().execute("PRAGMA foreign_keys = OFF")
        self._ids: dict[tuple[Any, ...], int] = {}
        self._blob_ids: dict[str, int] = {}
        self._new_in_transaction: list[tuple[Any, ...]] = []
        self.created_runs: set[int] = set()
        self.created_series: set[int] = set()

    @staticmethod
    def is_transient(error: BaseException) -> bool:
        """A deadlock victim or serialisation failure: the transaction can simply run again."""
        original = getattr(error, "orig", error)
        return getattr(original, "sqlstate", None) in _RETRY_SQLSTATES

    def is_busy(self) -> bool:
        """True when another process holds the store's write lock right now (SQLite only)."""
        if self.engine.dialect.name != "sqlite":
            return False
        path = sqlite_path(str(self.engine.url))
        if path is None:
            return False
        try:
            probe = sqlite3.connect(path, timeout=0, isolation_level=None)
        except sqlite3.Error:
            return False  # the real connection reports the problem properly
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()

    def close(self) -> None:
        """Close the connection (any open transaction is rolled back)."""
        if self._unchecked:
            self.conn.invalidate()
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic chunk: everything inside commits together or not at all."""
        try:
            with self.conn.begin():
                yield
        except BaseException:
            for key in self._new_in_transaction:
                self._ids.pop(key, None)
                if key[0] == "blob":
                    self._blob_ids.pop(key[1], None)
            raise
        finally:
            self._new_in_transaction.clear()

    def run_id(self, source: str, run_path: str, *, host: str, logdir: str, group_path: str,
               name: str) -> int:
        """Get or create the run (source, run_path)."""
        return self._get_or_create(
            ("runs", source, run_path),
            "INSERT INTO runs (source, host, logdir, run_path, group_path, name) "
            "VALUES (:source, :host, :logdir, :run_path, :group_path, :name) "
            "ON CONFLICT DO NOTHING",
            "SELECT id FROM runs WHERE source = :source AND run_path = :run_path",
            {"source": source, "host": host, "logdir": logdir, "run_path": run_path,
             "group_path": group_path, "name": name},
            self.created_runs,
        )

    def lock_run(self, source: str, run_path: str) -> None:
        """Hold the run until the transaction ends (PostgreSQL; SQLite's write lock already
        does): concurrent converters then never interleave inside one run's rows."""
        if self.shared:
            self.conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                              {"key": advisory_key("run", source, run_path)})

    def hosts_of_source(self, source: str) -> set[str]:
        """The hosts that wrote the runs of a source so far."""
        rows = self.conn.execute(
            text("SELECT DISTINCT host FROM runs WHERE source = :source AND host IS NOT NULL"),
            {"source": source},
        ).all()
        return {row[0] for row in rows}

    def context_id(self, name: str) -> int:
        """Get or create the context called ``name``."""
        return self._get_or_create(
            ("contexts", name),
            "INSERT INTO contexts (name) VALUES (:name) ON CONFLICT DO NOTHING",
            "SELECT id FROM contexts WHERE name = :name",
            {"name": name},
            None,
        )

    def series_id(
        self, run_id: int, context_id: int, tag: str, plugin: str, dtype: str | None, metadata: Any
    ) -> int:
        """Get or create a series; its metadata comes from the tag's first occurrence."""
        params = {
            "run_id": run_id,
            "context_id": context_id,
            "name": tag,
            "plugin": plugin,
            "dtype": dtype,
            "display_name": (metadata.display_name or None) if metadata is not None else None,
            "description": (metadata.summary_description or None) if metadata is not None else None,
            "plugin_content": (
                bytes(metadata.plugin_data.content) or None if metadata is not None else None
            ),
        }
        if self.shared:
            from converter.store.pgcopy import server_text

            for name in ("name", "display_name", "description"):
                params[name] = server_text(params[name])
        return self._get_or_create(
            ("series", run_id, context_id, tag, plugin),
            "INSERT INTO series (run_id, context_id, name, plugin, dtype, display_name, "
            "description, plugin_content) VALUES (:run_id, :context_id, :name, :plugin, :dtype, "
            ":display_name, :description, :plugin_content) ON CONFLICT DO NOTHING",
            "SELECT id FROM series WHERE run_id = :run_id AND context_id = :context_id "
            "AND name = :name AND plugin = :plugin",
            params,
            self.created_series,
        )

    def series_metadata(self, source: str, run_path: str, context: str) -> list[tuple[Any, ...]]:
        """(tag, plugin, display_name, description, plugin_content) of the series of one
        (run, context), oldest first; empty when the run is new."""
        rows = self.conn.execute(
            text("SELECT s.name, s.plugin, s.display_name, s.description, s.plugin_content "
                 "FROM series AS s JOIN runs AS r ON r.id = s.run_id "
                 "JOIN contexts AS c ON c.id = s.context_id "
                 "WHERE r.source = :source AND r.run_path = :run_path AND c.name = :context "
                 "ORDER BY s.id"),
            {"source": source, "run_path": run_path, "context": context},
        ).all()
        return [tuple(row) for row in rows]

    def file_state(self, run_id: int, path: str) -> FileState | None:
        """The stored state of a file of a run, or None when the file is new to the store."""
        row = self.conn.execute(
            text(f"SELECT id, {', '.join(_FILE_COLUMNS)} FROM event_files "
                 "WHERE run_id = :run_id AND path = :path"),
            {"run_id": run_id, "path": path},
        ).one_or_none()
        return None if row is None else FileState(*row)

    def save_file(self, state: FileState) -> FileState:
        """Insert or update a file's state; returns it with its id."""
        values = {column: _finite_or_none(getattr(state, column)) for column in _FILE_COLUMNS}
        values["updated_at"] = time.time()
        if state.id is None:
            columns = ", ".join(values)
            marks = ", ".join(f":{column}" for column in values)
            new_id = self.conn.execute(
                text(f"INSERT INTO event_files ({columns}) VALUES ({marks}) RETURNING id"), values
            ).scalar_one()
            return replace(state, id=new_id)
        assignments = ", ".join(f"{column} = :{column}" for column in values)
        self.conn.execute(
            text(f"UPDATE event_files SET {assignments} WHERE id = :id"), {**values, "id": state.id}
        )
        return state

    def file_states_of_source(self, source: str) -> dict[tuple[str, str], FileState]:
        """Every stored file state of one source, keyed by (run_path, path)."""
        return select_file_states(self.conn, source)

    def start_conversion(self, logdir: str, tool_version: str, options: str) -> int:
        """Record the start of a conversion; returns its id."""
        return int(self.conn.execute(
            text("INSERT INTO conversions (logdir, tool_version, started_at, status, options) "
                 "VALUES (:logdir, :version, :now, 'running', :options) RETURNING id"),
            {"logdir": logdir, "version": tool_version, "now": time.time(), "options": options},
        ).scalar_one())

    def finish_conversion(self, conversion_id: int, summary: str) -> None:
        """Record the end of a conversion and its summary."""
        self.conn.execute(
            text("UPDATE conversions SET finished_at = :now, status = 'finished', "
                 "summary = :summary WHERE id = :id"),
            {"id": conversion_id, "now": time.time(), "summary": summary},
        )

    def files_of_source(self, source: str) -> list[tuple[int, str, str]]:
        """(file id, run_path, path) of every file not yet marked gone, for one source."""
        rows = self.conn.execute(
            text("SELECT f.id, r.run_path, f.path FROM event_files AS f "
                 "JOIN runs AS r ON r.id = f.run_id "
                 "WHERE r.source = :source AND f.status <> 'gone' ORDER BY f.id"),
            {"source": source},
        ).all()
        return [(row[0], row[1], row[2]) for row in rows]

    def mark_gone(self, file_ids: Sequence[int]) -> None:
        """Mark files that disappeared from the logdir; their points stay."""
        for file_id in file_ids:
            self.conn.execute(
                text("UPDATE event_files SET status = 'gone', updated_at = :now WHERE id = :id"),
                {"id": file_id, "now": time.time()},
            )

    def insert_points(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert point rows, ignoring rows already stored from the same bytes."""
        columns = POINT_COLUMNS[table]
        if "blob_id" in columns:
            rows = self._with_blob_ids(columns.index("blob_id"), rows)
        if self.shared:
            from converter.store.pgcopy import copy_points

            copy_points(self._dbapi(), table, columns, rows)
            return
        if hasattr(rows, "block_rows"):  # a fastscalars.PackedRows
            self._insert_block_scalars(rows.file_id, rows.block_rows())
            rows = rows.general_rows()
            if not rows:
                return
        marks = ", ".join([self._placeholder] * len(columns))
        self._executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
                          "ON CONFLICT DO NOTHING", rows)

    def _insert_block_scalars(self, file_id: int, rows: Iterable[tuple[Any, ...]]) -> None:
        # Rows of (series_id, step, record_offset, wall_time, value): the chunk's file id
        # and value index 0 are literals of the statement, two parameters fewer a row.
        self._executemany(
            f"INSERT INTO scalars ({', '.join(POINT_COLUMNS['scalars'])}) "
            f"VALUES (?, ?, {int(file_id)}, ?, 0, ?, ?) ON CONFLICT DO NOTHING", rows)

    def insert_blobs(self, blobs: dict[str, bytes]) -> None:
        """Store content-addressed bytes once each; remembers sha256 -> id for the rows."""
        # Sorted: blobs are shared between runs, and converters that take row locks in one
        # order cannot deadlock each other on a server.
        missing = {sha: blobs[sha] for sha in sorted(blobs) if sha not in self._blob_ids}
        if not missing:
            return
        mark = self._placeholder
        self._executemany(
            f"INSERT INTO blobs (sha256, size, data) VALUES ({mark}, {mark}, {mark}) "
            "ON CONFLICT DO NOTHING",
            [(sha, len(data), data) for sha, data in missing.items()],
        )
        for sha in missing:
            blob_id = self.conn.execute(
                text("SELECT id FROM blobs WHERE sha256 = :sha"), {"sha": sha}
            ).scalar_one()
            self._blob_ids[sha] = blob_id
            self._new_in_transaction.append(("blob", sha))

    def _with_blob_ids(
        self, position: int, rows: Sequence[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        ids = self._blob_ids
        return [row[:position] + (ids[row[position]],) + row[position + 1:] for row in rows]

    def _dbapi(self) -> Any:
        return self.conn.connection.dbapi_connection

    def _executemany(self, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
        cursor = self._dbapi().cursor()
        try:
            cursor.executemany(sql, rows)
        finally:
            cursor.close()

    def delete_file_points(self, file_id: int) -> None:
        """Remove every point read from one file (it was replaced or is read again in full)."""
        for table in POINT_COLUMNS:
            # Through series first: the point tables are clustered by series, not by file.
            self.conn.execute(
                text(f"DELETE FROM {table} WHERE file_id = :file_id AND series_id IN "
                     "(SELECT s.id FROM series AS s JOIN event_files AS f "
                     "ON f.run_id = s.run_id AND f.context_id = s.context_id "
                     "WHERE f.id = :file_id)"),
                {"file_id": file_id},
            )

    def _get_or_create(
        self,
        key: tuple[Any, ...],
        insert_sql: str,
        select_sql: str,
        params: dict[str, Any],
        created: set[int] | None,
    ) -> int:
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        # Look first: on PostgreSQL even an insert that conflicts draws a sequence number,
        # and ids would then depend on how many re-runs a store has seen.
        found = self.conn.execute(text(select_sql), params).scalar_one_or_none()
        if found is None:
            inserted = self.conn.execute(text(insert_sql), params).rowcount
            found = self.conn.execute(text(select_sql), params).scalar_one()
            if inserted and created is not None:
                created.add(int(found))
        new_id = int(found)
        self._ids[key] = new_id
        self._new_in_transaction.append(key)
        return new_id


def _finite_or_none(value: Any) -> Any:
    # SQLite stores NaN as NULL by itself; PostgreSQL would keep it.
    return None if isinstance(value, float) and math.isnan(value) else value
