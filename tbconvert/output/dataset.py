"""``export dataset``: a store as a Parquet dataset that DuckDB, pyarrow, Polars and Spark read
unchanged, streamed in bounded memory and brought up to date incrementally (design §6).

Layout, below the target directory or URL (any fsspec URL: ``s3://``, ``gs://``, ...)::

    scalars/bucket=NN/part-GGGGGG-FFFF.parquet   texts/, histograms/, images/, audio/, tensors/
    runs/part-...parquet   params/   series/       (as v_runs, v_params, v_series)
    _tbconvert_manifest.json                       (what each file holds: dataset_manifest)

A point table's columns are its view's (``v_scalars``: run_id, run_path, context, tag, step,
wall_time, value; NaN is NULL there as in the view); images, audio and tensors carry their
blob as the binary column ``data``.  Point tables are Hive-partitioned by ``bucket``, a hash of
the run's source and path modulo a number of buckets fixed by the first export (about one per
``POINTS_PER_BUCKET`` points, a power of two): a run's points are in one bucket, the split does
not depend on the order runs come in, a small store gets one bucket (few files) and a big one
files of tens to hundreds of MB.  ``runs``, ``params`` and ``series`` are small and written
whole, again only when their content changed.

Incremental: the manifest records, per event file of the store, what its points in the
dataset came from (run, context, first-record digest, selection, offset read to).  A file
that only grew adds a file with its new points (those at or after the offset exported);
any other change (a replaced, shrunk, moved or deleted event file) rewrites its buckets
whole.  Crash-safe through the manifest's commit (see ``dataset_manifest``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tbconvert.errors import ConverterError, UsageError, import_extra
from tbconvert.output import sqlite_arrow
from tbconvert.output.arrow import arrow_table
from tbconvert.output.dataset_files import TableWriter, bucket_number, partition_name, route
from tbconvert.output.dataset_manifest import DatasetFiles, FileMark, Manifest
from tbconvert.output.dataset_reads import (
    POINT_TABLES,
    WHOLE_TABLES,
    RowsToWrite,
    SeriesIndex,
    bucket_of,
    fetch_batches,
    read_series,
    scalars_to_arrow,
    schema_of,
    to_arrow,
    view_batches,
    whole_schema,
)
from tbconvert.store.engine import sqlite_path

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from tbconvert.query.store import Store

POINTS_PER_BUCKET = 16_000_000
MAX_BUCKETS = 256
# Above this many grown files, one scan of each table beats a query per file.
QUERIES_PER_FILE = 256
# From this many scalar points on, a SQLite store's scalars are read by ADBC's driver in a
# child process when it is installed (sqlite_arrow): below it, the child's start-up (about
# 0.4 s) outweighs its gain.
ARROW_SCAN_FROM = 1_000_000
Step = Callable[[str], None]


@dataclass
class DatasetSummary:
    """What one export did: rows and files written per table, files deleted, the time."""

    target: str
    buckets: int
    rows: dict[str, int] = field(default_factory=dict)
    files_written: int = 0
    files_deleted: int = 0
    rewritten_buckets: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the run wrote or deleted anything."""
        return bool(self.files_written or self.files_deleted)


def export_dataset(
    store: Store,
    target: str,
    *,
    buckets: int | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: bool | None = None,
    step: Step | None = None,
    arrow_scan_from: int = ARROW_SCAN_FROM,
) -> DatasetSummary:
    """Write the store as a Parquet dataset at ``target``, or bring one up to date.

    Args:
        store: An open store.
        target: A directory, or an fsspec URL (``s3://bucket/prefix``, ...).
        buckets: The number of partitions of the point tables, for a new dataset (default:
            one per ``POINTS_PER_BUCKET`` points, a power of two, at most ``MAX_BUCKETS``);
            an existing dataset keeps its own.
        storage_options: fsspec options for a URL (endpoint, credentials, ...).
        progress: A progress bar of rows on stderr (None: only on a terminal).
        step: Called with the name of each step between writes (for crash tests).
        arrow_scan_from: The scalar points from which a SQLite store's scalars are read
            by ADBC's SQLite driver, when installed, in a child process; a speed threshold
            that changes no row (0: always, as the equivalence test does).

    Returns:
        What was written.

    Raises:
        MissingDependency: pyarrow (the ``parquet`` extra) is not installed.
        UsageError: ``buckets`` differs from the existing dataset's, or is not positive.
        ConverterError: the target cannot be written.
    """
    _require_pyarrow()
    started = time.monotonic()
    files = _open_target(target, storage_options)
    try:
        summary = _export(
            store, files, target, buckets, progress, step or (lambda _name: None), arrow_scan_from
        )
    except OSError as error:
        raise ConverterError(
            f"cannot write the dataset: {error.strerror or error}",
            path=target,
            hint="check the space and permissions there; the next run completes the dataset",
        ) from error
    summary.seconds = time.monotonic() - started
    return summary


def _export(
    store: Store,
    files: DatasetFiles,
    target: str,
    buckets: int | None,
    progress: bool | None,
    mark: Step,
    arrow_scan_from: int,
) -> DatasetSummary:
    try:
        manifest = files.read_manifest()
    except (ValueError, KeyError, TypeError) as error:
        raise ConverterError(
            f"unreadable dataset manifest: {error}",
            path=target,
            hint="export into a new directory",
        ) from error
    if manifest is not None:
        files.finish_pending(manifest, mark)
    files.clear_temporary()
    with store.snapshot(), store.connect() as conn, _small_page_cache(conn):
        marks = _file_marks(conn)
        if manifest is None:
            manifest = Manifest(buckets=_bucket_count(conn, buckets))
        elif buckets is not None and buckets != manifest.buckets:
            raise UsageError(
                f"the dataset has {manifest.buckets} buckets, not {buckets}",
                hint="leave --buckets out, or export into a new directory",
            )
        summary = DatasetSummary(target, manifest.buckets)
        update = _Update(files, manifest, marks, summary, progress, arrow_scan_from)
        update.write_points(conn)
        update.write_whole_tables(conn)
    mark("written")
    update.commit(mark)
    return summary


@contextmanager
def _small_page_cache(conn: Connection) -> Iterator[None]:
    # A scan reads each page once: the writer's large SQLite page cache would only add its
    # size to the peak memory.
    if conn.dialect.name != "sqlite":
        yield
        return
    previous = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql("PRAGMA cache_size = -2048")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(previous)}")


def _require_pyarrow() -> None:
    import_extra("pyarrow", "parquet", "the dataset (Parquet)")


def _open_target(target: str, storage_options: dict[str, Any] | None) -> DatasetFiles:
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(os.path.expanduser(target), **(storage_options or {}))
        fs.makedirs(root, exist_ok=True)
    except (OSError, ValueError, ImportError) as error:
        raise ConverterError(
            f"cannot write the dataset here: {error}",
            path=target,
            hint="check the directory or URL, and the extra of its protocol (e.g. '.[s3]')",
        ) from error
    return DatasetFiles(fs, root)


def _bucket_count(conn: Connection, asked: int | None) -> int:
    if asked is not None:
        if asked < 1:
            raise UsageError(f"--buckets must be at least 1, not {asked}", hint="e.g. 16")
        return asked
    found = conn.exec_driver_sql("SELECT coalesce(sum(points), 0) FROM series_summaries")
    return bucket_count(int(found.scalar_one()))


def bucket_count(points: int) -> int:
    """The buckets of a new dataset of ``points`` points: one per ``POINTS_PER_BUCKET``,
    rounded up to a power of two, at most ``MAX_BUCKETS``."""
    count = 1
    while count < MAX_BUCKETS and count * POINTS_PER_BUCKET < points:
        count *= 2
    return count


def _file_marks(conn: Connection) -> dict[int, FileMark]:
    found = conn.exec_driver_sql(
        "SELECT f.id, f.run_id, f.context_id, r.source, r.run_path, f.head_digest, "
        "f.offset_consumed, "
        "f.selection FROM event_files AS f JOIN runs AS r ON r.id = f.run_id"
    )
    return {row[0]: FileMark(*row[1:]) for row in found}


class _Update:
    """One export run: what changed since the manifest, the new files, the new manifest."""

    def __init__(
        self,
        files: DatasetFiles,
        manifest: Manifest,
        marks: dict[int, FileMark],
        summary: DatasetSummary,
        progress: bool | None,
        arrow_scan_from: int = ARROW_SCAN_FROM,
    ) -> None:
        self.files = files
        self.manifest = manifest
        self.marks = marks
        self.summary = summary
        self.progress = progress
        self.generation = manifest.generation + 1
        self.arrow_scan_from = arrow_scan_from
        self.dirty, self.grown = self._changes()
        self.new_files: dict[str, dict[str, list[str]]] = {}
        self.new_digests: dict[str, str] = {}
        self.schemas = {table: schema_of(table) for table in POINT_TABLES} | {
            table: whole_schema(table) for table in WHOLE_TABLES
        }

    def _changes(self) -> tuple[set[int], dict[int, int]]:
        # Buckets to rewrite whole, and per grown (or new) file the offset its new points
        # start at.
        buckets = self.manifest.buckets
        dirty: set[int] = set()
        grown: dict[int, int] = {}
        for file_id, now in self.marks.items():
            before = self.manifest.marks.get(file_id)
            if before is None:
                if now.offset > 0:
                    grown[file_id] = 0
            elif before.grown_from(now):
                if now.offset > before.offset:
                    grown[file_id] = before.offset
            else:
                dirty |= {_bucket(before, buckets), _bucket(now, buckets)}
        for file_id, before in self.manifest.marks.items():
            if file_id not in self.marks:
                dirty.add(_bucket(before, buckets))
        if self.manifest.generation == 0:
            dirty = set(range(buckets))
        return dirty, {
            file_id: offset
            for file_id, offset in grown.items()
            if _bucket(self.marks[file_id], buckets) not in dirty
        }

    def write_points(self, conn: Connection) -> None:
        """Write the dirty buckets whole and the grown files' new points, table by table."""
        if not self.dirty and not self.grown:
            return
        index = read_series(conn, self.manifest.buckets)
        keep = RowsToWrite(index, self.dirty, self.grown)
        with _bar(self.progress) as advance:
            for table in POINT_TABLES:
                writer = TableWriter(self.files, table, schema_of(table), self.generation)
                try:
                    for batch, keys in self._batches(conn, table, index):
                        wanted, buckets = keep(keys)
                        route(writer, batch, wanted, buckets)
                        advance(batch.num_rows)
                except BaseException:
                    writer.abort()
                    raise
                self.new_files[table] = writer.close()
                self.summary.rows[table] = writer.rows

    def _batches(self, conn: Connection, table: str, index: SeriesIndex) -> Iterator[Any]:
        if self.dirty or len(self.grown) > QUERIES_PER_FILE:
            queries: list[tuple[str, list[Any]]] = [("", [])]
        else:
            queries = []
            for file_id, offset in sorted(self.grown.items()):
                mark = self.marks[file_id]
                owned = index.by_owner.get((mark.run_id, mark.context_id), [])
                if owned:
                    marks = ", ".join("?" * len(owned))
                    where = f" WHERE p.series_id IN ({marks}) AND p.file_id = ?"
                    queries.append((where + " AND p.record_offset >= ?", [*owned, file_id, offset]))
        origin = bool(self.grown)  # a rewrite alone needs no file or offset
        fast = queries == [("", [])] and table == "scalars" and self._arrow_scan(conn, origin)
        if fast:
            for batch in fast:
                yield scalars_to_arrow(batch, index, origin)
            return
        for where, parameters in queries:
            for rows in fetch_batches(conn, table, where, parameters, origin):
                yield to_arrow(table, rows, index, origin)

    def _arrow_scan(self, conn: Connection, origin: bool) -> Iterator[Any] | None:
        path = sqlite_path(str(conn.engine.url))
        if path is None or not sqlite_arrow.available():
            return None
        points = conn.exec_driver_sql(
            "SELECT coalesce(sum(points), 0) FROM series_summaries WHERE point_table = 'scalars'"
        ).scalar_one()
        if points < self.arrow_scan_from:
            return None
        state = conn.exec_driver_sql(sqlite_arrow.FINGERPRINT).all()
        return sqlite_arrow.scalar_batches(path, sqlite_arrow.digest(state), origin)

    def write_whole_tables(self, conn: Connection) -> None:
        """Write runs, params and series again where their content changed."""
        for table in WHOLE_TABLES:
            digest = hashlib.sha256()
            for rows in view_batches(conn, table):
                digest.update(repr(rows).encode("utf-8"))
            self.new_digests[table] = digest.hexdigest()
            if self.manifest.digests.get(table) == self.new_digests[table]:
                continue
            schema = self.schemas[table]
            writer = TableWriter(self.files, table, schema, self.generation)
            for rows in view_batches(conn, table):
                writer.add("", arrow_table(rows, schema))
            written = writer.close()
            self.new_files[table] = written or {"": []}
            self.summary.rows[table] = writer.rows

    def commit(self, mark: Step) -> None:
        """Write the new manifest (the commit), then move the new files into place and
        delete those they replace; nothing at all when nothing changed."""
        manifest = self.manifest
        moves, deletions = [], []
        tables = {table: dict(parts) for table, parts in manifest.tables.items()}
        for table, parts in self.new_files.items():
            current = tables.setdefault(table, {})
            replaced = table in WHOLE_TABLES
            for partition in {*parts, *(current if replaced else ())} | self._dirty_parts(table):
                new = parts.get(partition, [])
                if replaced or bucket_number(partition) in self.dirty:
                    deletions += current.get(partition, [])
                    current[partition] = list(new)
                else:
                    current[partition] = current.get(partition, []) + new
                moves += [[f"_tbconvert_tmp/{name}", name] for name in new]
            tables[table] = {p: names for p, names in current.items() if names}
            if not tables[table]:
                schema = self.schemas[table]
                partition = "" if replaced else partition_name(0)
                empty = TableWriter(self.files, table, schema, self.generation).empty(partition)
                tables[table] = {partition: empty}
                moves += [[f"_tbconvert_tmp/{name}", name] for name in empty]
        same_marks = manifest.marks == self.marks
        if not moves and not deletions and same_marks and manifest.digests == self.new_digests:
            return
        manifest.tables = tables
        manifest.marks = dict(self.marks)
        manifest.digests = dict(self.new_digests)
        manifest.generation = self.generation
        manifest.pending = {"moves": moves, "deletions": sorted(set(deletions))}
        self.files.write_manifest(manifest)
        mark("committed")
        self.files.finish_pending(manifest, mark)
        self.files.clear_temporary()
        self.summary.files_written = len(moves)
        self.summary.files_deleted = len(set(deletions))
        self.summary.rewritten_buckets = sorted(self.dirty)

    def _dirty_parts(self, table: str) -> set[str]:
        if table in WHOLE_TABLES:
            return set()
        return {partition_name(b) for b in self.dirty}


def _bucket(mark: FileMark, buckets: int) -> int:
    return bucket_of(mark.source, mark.run_path, buckets)


class _bar:
    """A progress bar of rows read (tqdm, stderr), or nothing."""

    def __init__(self, progress: bool | None) -> None:
        self.progress = progress
        self.bar: Any = None

    def __enter__(self) -> Callable[[int], None]:
        if self.progress is False:
            return lambda _count: None
        from tqdm import tqdm

        disable = None if self.progress is None else not self.progress
        self.bar = tqdm(unit=" rows", unit_scale=True, disable=disable)
        return self.bar.update  # type: ignore[no-any-return]

    def __exit__(self, *_exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
