"""Convert a logdir into a store: classify, plan per file, read, decode, write, summarise.

Per file the store keeps size, mtime, a digest of the first record and the byte offset read
(SPEC §7).  An unchanged file is skipped without being opened; a grown one is read from its
offset; one that shrank or whose first record changed is read again from 0, its old points
deleted in the same transaction as the first new ones.  Each chunk of points commits together
with the file's new offset, so a crash at any moment leaves a store the next run completes.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from converter import __version__, discovery
from converter.decode import Selection, with_store_ids
from converter.errors import StoreError, UsageError
from converter.filepass import Chunk, FileTask, bytes_to_read, decode_all, unreadable_reason
from converter.report import FileProblem, Summary, progress_bar
from converter.store.engine import (
    DEFAULT_STORE,
    check_store_location,
    create_store_engine,
    store_display,
    store_url,
)
from converter.store.writer import FileState, StoreWriter

CHUNK_POINTS = 50_000
# A chunk chosen as a server's deadlock victim is rolled back whole and applied again.
_ATTEMPTS = 5
# Series plugins that were not taken from a SummaryMetadata, so there is nothing to remember.
_NOT_FROM_METADATA = frozenset({"tensor", "unknown", "graphs", "graph_tagged_run_metadata"})


def convert(
    logdir: str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    *,
    flat: bool = False,
    dry_run: bool = False,
    full: bool = False,
    plugins: Iterable[str] | None = None,
    runs: Sequence[str] = (),
    tags: Sequence[str] = (),
    exclude_tags: Sequence[str] = (),
    jobs: int = 1,
    source: str | None = None,
    upgrade_store: bool = False,
    progress: bool | None = None,
    chunk_points: int = CHUNK_POINTS,
    notify: Callable[[str], Any] | None = None,
) -> Summary:
    """Convert every event file of ``logdir`` into ``store`` and return the summary.

    Args:
        logdir: The TensorBoard log directory.
        store: A SQLite file path or a SQLAlchemy URL (default ``./tbconvert.db``).
        flat: Every directory with event files is a run (``--flat``).
        dry_run: Classify and plan only; write nothing, not even the store file.
        full: Read every file again from its start (no duplicates result).
        plugins: Plugin names to convert (default: all).
        runs: Globs on run paths; tags / exclude_tags: globs on tags.
        jobs: Worker processes decoding files (1: decode in this process).
        source: The logdir's name in the store (default: its absolute path).  Runs are
            identified by (source, run path); on a shared server, name each machine's logdir.
        upgrade_store: Upgrade a server store's schema if it is older than this converter
            (a SQLite file is upgraded anyway, after a backup).
        progress: Show a progress bar (None: only when stderr is a terminal).
        chunk_points: Points per transaction.
        notify: Called with a line to show the user while waiting (e.g. for a lock).

    Raises:
        LogdirError: the logdir is missing or unreadable.
        StoreError: the store cannot be opened, created or written, or ``source`` is taken
            on a shared server by another machine's logdir of the same path.
    """
    started = time.monotonic()
    classification = discovery.filter_runs(discovery.classify(logdir, flat=flat), runs)
    if store is None:
        store = os.environ.get("TBCONVERT_STORE", DEFAULT_STORE)
    url = store_url(store)
    if source is not None and not source.strip():
        raise UsageError("the source name is empty", hint="give --source a name, or leave it out")
    summary = Summary(
        logdir=classification.logdir,
        store=store_display(url),
        dry_run=dry_run,
        runs=len(classification.runs),
        files_total=len(classification.files),
        orphans=list(classification.orphans),
        warnings=list(classification.warnings),
    )
    selection = Selection(
        plugins=frozenset(plugins) if plugins is not None else None,
        tags=tuple(tags),
        exclude_tags=tuple(exclude_tags),
    )
    origin = Origin(source or classification.logdir, explicit=source is not None,
                    host=socket.gethostname())
    if dry_run:
        summary.plan = _plan(classification, url, origin.source)
    else:
        check_store_location(url)
        _convert_into(url, classification, summary, selection, full, progress, chunk_points,
                      prune=not runs, notify=notify or (lambda _message: None), jobs=jobs,
                      origin=origin, upgrade_store=upgrade_store)
    summary.elapsed = time.monotonic() - started
    return summary


def watch(
    logdir: str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    *,
    interval: float = 5.0,
    passes: int | None = None,
    **options: Any,
) -> Summary:
    """Repeat :func:`convert` every ``interval`` seconds until Ctrl-C (or ``passes`` passes).

    Returns the summary of all passes together; an interrupted pass has committed whole
    chunks only, so the store stays consistent.
    """
    started = time.monotonic()
    total: Summary | None = None
    done = 0
    try:
        while passes is None or done < passes:
            if done:
                time.sleep(interval)
            summary = convert(logdir, store, **options)
            if total is None:
                total = summary
            else:
                total.absorb(summary)
            done += 1
    except KeyboardInterrupt:
        if total is None:
            raise
    assert total is not None
    total.elapsed = time.monotonic() - started
    return total


def _convert_into(
    url: str,
    classification: discovery.Classification,
    summary: Summary,
    selection: Selection,
    full: bool,
    progress: bool | None,
    chunk_points: int,
    prune: bool,
    notify: Callable[[str], Any],
    jobs: int,
    origin: Origin,
    upgrade_store: bool,
) -> None:
    from converter.store.errors import translate_errors
    from converter.store.migrate import ensure_schema

    engine = create_store_engine(url)
    try:
        with translate_errors(summary.store):
            change = ensure_schema(engine, allow_upgrade=upgrade_store or None)
            if change is not None and change.from_revision is not None:
                summary.schema_change = (
                    f"schema upgraded {change.from_revision} -> {change.to_revision}"
                    + (f" (backup: {change.backup})" if change.backup else "")
                )
            writer = StoreWriter(engine)
            try:
                job = _Job(writer, classification, origin, summary, selection, full,
                           chunk_points)
                job.run(progress, prune, notify, jobs)
            finally:
                writer.close()
    finally:
        engine.dispose()


class _Job:
    """One conversion into an open store: plan the files, then apply their chunks in order."""

    def __init__(
        self,
        writer: StoreWriter,
        classification: discovery.Classification,
        origin: Origin,
        summary: Summary,
        selection: Selection,
        full: bool,
        chunk_points: int,
    ) -> None:
        self.writer = writer
        self.classification = classification
        self.origin = origin
        self.summary = summary
        self.selection = selection
        self.full = full
        self.chunk_points = chunk_points
        self.touched_series: set[int] = set()
        self.touched_runs: set[int] = set()
        self.contexts: set[str] = set()
        self._runs: dict[str, discovery.RunSource] = {}

    def run(self, progress: bool | None, prune: bool, notify: Callable[[str], Any],
            jobs: int = 1) -> None:
        """Convert every changed file of the classification, then record the conversion."""
        logdir = self.classification.logdir
        if self.writer.is_busy():
            notify("another process is writing to the store; waiting for it to finish ...")
        tasks = self._plan()
        conversion_id = self._start_conversion()
        total = sum(bytes_to_read(task) for task in tasks)
        with progress_bar(total, enabled=progress) as bar:
            self._apply_all(decode_all(tasks, jobs), bar.update)
        if prune:
            self._mark_gone()
        self.summary.contexts = len(self.contexts)
        self.summary.runs_created = len(self.writer.created_runs)
        self.summary.runs_extended = len(self.touched_runs - self.writer.created_runs)
        self.summary.series_created = len(self.writer.created_series)
        self.summary.series_extended = len(self.touched_series - self.writer.created_series)
        self._finish_conversion(conversion_id)

    def _plan(self) -> list[FileTask]:
        with self.writer.transaction():
            self._check_source()
            known = self.writer.file_states_of_source(self.origin.source)
        tasks: list[FileTask] = []
        seeds: dict[tuple[str, str], dict[str, bytes]] = {}
        for run in self.classification.runs:
            for source in run.files:
                self.contexts.add(source.context)
                stat = self._stat(source)
                if stat is None:
                    continue
                state = known.get((run.run_path, source.rel_path))
                if not self.full and state is not None and _unchanged(state, stat):
                    self.summary.files_unchanged += 1
                    continue
                group = (run.run_path, source.context)
                if group not in seeds:
                    seeds[group] = self._remembered_metadata(*group)
                tasks.append(FileTask(
                    index=len(tasks), path=source.path, rel_path=source.rel_path,
                    run_path=run.run_path, context=source.context, size=stat.st_size,
                    mtime_ns=stat.st_mtime_ns, offset=0 if state is None else state.offset_consumed,
                    stored_size=None if state is None else state.size,
                    stored_digest=None if state is None else state.head_digest,
                    full=self.full, seeds=seeds[group], selection=self.selection,
                    chunk_points=self.chunk_points))
        self._runs = {run.run_path: run for run in self.classification.runs}
        return tasks

    def _check_source(self) -> None:
        """On a shared server, refuse to mix two machines' logdirs that share a path."""
        origin = self.origin
        if origin.explicit or not self.writer.shared:
            return
        others = sorted(self.writer.hosts_of_source(origin.source) - {origin.host})
        if others:
            raise StoreError(
                f"the store already has runs of {origin.source} written from "
                f"{', '.join(others)}, and this is {origin.host}",
                path=self.summary.store,
                hint=f"name this logdir: --source {origin.host}:{origin.source} if it is "
                     f"another one, or --source {origin.source} if it is the same (shared) "
                     "directory",
            )

    def _stat(self, source: discovery.EventFileSource) -> os.stat_result | None:
        try:
            return os.stat(source.path)
        except OSError as error:
            self.summary.problems.append(FileProblem(source.rel_path, unreadable_reason(error)))
            return None

    def _apply_all(self, chunks: Iterator[tuple[FileTask, Chunk]],
                   advance: Callable[[int], Any]) -> None:
        open_file: _OpenFile | None = None
        for task, chunk in chunks:
            if chunk.error is not None:
                self.summary.problems.append(FileProblem(task.rel_path, chunk.error))
                continue
            if open_file is not None and open_file.state.path != task.rel_path:
                open_file = None
            before, open_file = self._commit_chunk(task, chunk, open_file)
            self.summary.add_damage(task.rel_path, chunk.damage)
            advance(max(open_file.state.offset_consumed - before, 0))
            if chunk.done:
                self._finish_file(task, chunk, open_file.state, open_file.ids)
                open_file = None

    def _commit_chunk(self, task: FileTask, chunk: Chunk,
                      open_file: _OpenFile | None) -> tuple[int, _OpenFile]:
        """Apply one chunk in one transaction; a server's deadlock victim tries again."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self.writer.transaction():
                    self.writer.lock_run(self.origin.source, task.run_path)
                    replaced = False
                    if open_file is None:
                        state, replaced = self._open_state(task, chunk)
                        current = _OpenFile(state, [], state.records)
                    else:
                        current = replace(open_file, ids=list(open_file.ids))
                    before = current.state.offset_consumed
                    current.state = self._apply(task, chunk, current)
            except Exception as error:  # driver errors come raw from COPY, wrapped otherwise
                if attempt < _ATTEMPTS and self.writer.is_transient(error):
                    continue
                raise
            if replaced and not task.full:
                self.summary.files_replaced += 1
            return before, current
        raise AssertionError("unreachable")

    def _open_state(self, task: FileTask, chunk: Chunk) -> tuple[FileState, bool]:
        writer = self.writer
        run = self._runs[task.run_path]
        logdir = self.classification.logdir
        origin = self.origin
        run_id = writer.run_id(origin.source, run.run_path, host=origin.host, logdir=logdir,
                               group_path=run.group_path, name=_run_name(logdir, run.run_path))
        context_id = writer.context_id(task.context)
        # Read again under the write lock: another converter may have moved the offset.
        state = writer.file_state(run_id, task.rel_path)
        replaced = False
        if state is None:
            state = writer.save_file(FileState(None, run_id, context_id, task.rel_path))
        elif chunk.restart:
            writer.delete_file_points(state.id or 0)
            replaced = True
            state = replace(state, offset_consumed=0, records=0, damaged_records=0,
                            first_wall_time=None, last_wall_time=None)
        state = replace(state, size=task.size, mtime_ns=task.mtime_ns, head_digest=chunk.digest)
        return state, replaced

    def _apply(self, task: FileTask, chunk: Chunk, open_file: _OpenFile) -> FileState:
        from tensorboard.compat.proto.summary_pb2 import SummaryMetadata

        writer = self.writer
        state, ids, base_records = open_file.state, open_file.ids, open_file.base_records
        for _local, tag, plugin, dtype, content in chunk.new_series:
            metadata = SummaryMetadata.FromString(content) if content is not None else None
            ids.append(writer.series_id(state.run_id, state.context_id, tag, plugin, dtype,
                                        metadata))
        writer.insert_blobs(chunk.blobs)
        file_id = state.id
        assert file_id is not None  # the file's row was saved when its first chunk began
        for table, rows in chunk.rows.items():
            writer.insert_points(table, with_store_ids(rows, ids, file_id))
        invalid = (chunk.done and base_records + chunk.records == 0
                   and any(region.offset == 0 for region in chunk.damage))
        return writer.save_file(replace(
            state,
            offset_consumed=chunk.consumed,
            records=base_records + chunk.records,
            damaged_records=state.damaged_records + len(chunk.damage),
            status=_status(chunk, invalid, state.damaged_records + len(chunk.damage)),
            last_error=chunk.damage[-1].reason if chunk.damage else state.last_error,
            first_wall_time=_extreme(min, state.first_wall_time, chunk.first_wall_time),
            last_wall_time=_extreme(max, state.last_wall_time, chunk.last_wall_time),
        ))

    def _finish_file(self, task: FileTask, chunk: Chunk, state: FileState,
                     ids: list[int]) -> None:
        stats = chunk.stats
        summary = self.summary
        summary.files_read += 1
        summary.bytes_read += max(chunk.consumed - (0 if chunk.restart else task.offset), 0)
        summary.records_read += chunk.records
        if stats is not None:
            summary.points.update(stats.points)
            summary.add_counts(summary.skipped, stats.skipped)
            summary.add_counts(summary.undecodable, stats.undecodable)
            summary.filtered_values += stats.filtered_values
            summary.lossy_records += stats.lossy_records
            for offset in stats.unparseable:
                summary.damaged_records += 1
                summary.problems.append(
                    FileProblem(task.rel_path, "record is not an Event", offset))
        if state.status == "invalid":
            summary.problems.append(FileProblem(task.rel_path,
                                                "not an event file (no valid record)"))
        if state.status == "partial":
            summary.files_partial += 1
        self.touched_series.update(ids)
        if ids:
            self.touched_runs.add(state.run_id)

    def _remembered_metadata(self, run_path: str, context: str) -> dict[str, bytes]:
        from tensorboard.compat.proto import summary_pb2

        remembered: dict[str, bytes] = {}
        with self.writer.transaction():
            rows = self.writer.series_metadata(self.origin.source, run_path, context)
        for tag, plugin, display, description, content in rows:
            if tag in remembered or plugin in _NOT_FROM_METADATA:
                continue
            remembered[tag] = summary_pb2.SummaryMetadata(
                display_name=display or "",
                summary_description=description or "",
                plugin_data=summary_pb2.SummaryMetadata.PluginData(
                    plugin_name=plugin, content=content or b""),
            ).SerializeToString()
        return remembered

    def _mark_gone(self) -> None:
        present = {(run.run_path, source.rel_path)
                   for run in self.classification.runs for source in run.files}
        with self.writer.transaction():
            stored = self.writer.files_of_source(self.origin.source)
            gone = [file_id for file_id, run_path, path in stored
                    if (run_path, path) not in present]
            self.writer.mark_gone(gone)
        self.summary.files_gone = len(gone)

    def _start_conversion(self) -> int:
        with self.writer.transaction():
            return self.writer.start_conversion(self.classification.logdir, __version__, json.dumps(
                {"source": self.origin.source, "flat": self.classification.flat, "full": self.full,
                 "plugins": sorted(self.selection.plugins) if self.selection.plugins else None,
                 "tags": list(self.selection.tags),
                 "exclude_tags": list(self.selection.exclude_tags)}))

    def _finish_conversion(self, conversion_id: int) -> None:
        with self.writer.transaction():
            self.writer.finish_conversion(conversion_id, self.summary.to_json())


@dataclass(frozen=True)
class Origin:
    """Where the logdir comes from: its name in the store, and the machine reading it."""

    source: str
    explicit: bool
    host: str


@dataclass
class _OpenFile:
    """The file whose chunks are being applied: its state and store ids of its series."""

    state: FileState
    ids: list[int]
    base_records: int


def _extreme(pick: Callable[[float, float], float], old: float | None,
             new: float | None) -> float | None:
    if old is None:
        return new
    return old if new is None else pick(old, new)


def _unchanged(state: FileState, stat: os.stat_result) -> bool:
    return state.size == stat.st_size and state.mtime_ns == stat.st_mtime_ns


def _status(chunk: Chunk, invalid: bool, damaged: int) -> str:
    if invalid:
        return "invalid"
    if not chunk.done or chunk.torn:
        return "partial"
    return "damaged" if damaged else "ok"


def _run_name(logdir: str, run_path: str) -> str:
    return os.path.basename(logdir) if run_path == "." else run_path.rsplit("/", 1)[-1]


def _plan(classification: discovery.Classification, url: str,
          source: str) -> list[dict[str, Any]]:
    from converter.store.reader import read_file_states

    known = read_file_states(url, source)
    plan = []
    for run in classification.runs:
        for source in run.files:
            try:
                stat = os.stat(source.path)
            except OSError:
                plan.append({"action": "unreadable", "run_path": run.run_path,
                             "context": source.context, "path": source.rel_path, "bytes": 0})
                continue
            state = known.get((run.run_path, source.rel_path))
            if state is None:
                action, size = "new", stat.st_size
            elif _unchanged(state, stat):
                action, size = "unchanged", 0
            elif stat.st_size < state.offset_consumed:
                action, size = "replaced", stat.st_size
            else:
                action, size = "append", stat.st_size - state.offset_consumed
            plan.append({"action": action, "run_path": run.run_path, "context": source.context,
                         "path": source.rel_path, "bytes": size})
    return plan
