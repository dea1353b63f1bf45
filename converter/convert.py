"""Convert a logdir into a store: classify, plan per file, read, decode, write, summarise.

Per file the store keeps size, mtime, a digest of the first record and the byte offset read
(SPEC §7).  An unchanged file is skipped without being opened; a grown one is read from its
offset; one that shrank or whose first record changed is read again from 0, its old points
deleted in the same transaction as the first new ones.  Each chunk of points commits together
with the file's new offset, so a crash at any moment leaves a store the next run completes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from converter import __version__, discovery
from converter.decode import FileDecoder, Selection
from converter.errors import StoreError
from converter.records import RecordReader, open_event_file, read_first_record
from converter.report import FileProblem, Summary, progress_bar
from converter.store.engine import (
    DEFAULT_STORE,
    check_store_location,
    create_store_engine,
    sqlite_path,
    store_url,
)
from converter.store.writer import FileState, StoreWriter

CHUNK_POINTS = 50_000
_RECORD_BATCH = 2048
# Images and audio make few points of many bytes: bound a transaction by bytes too.
_CHUNK_BYTES = 64 << 20
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
        progress: Show a progress bar (None: only when stderr is a terminal).
        chunk_points: Points per transaction.
        notify: Called with a line to show the user while waiting (e.g. for a lock).

    Raises:
        LogdirError: the logdir is missing or unreadable.
        StoreError: the store cannot be opened, created or written.
    """
    started = time.monotonic()
    classification = discovery.filter_runs(discovery.classify(logdir, flat=flat), runs)
    url = store_url(store if store is not None else os.environ.get("TBCONVERT_STORE", DEFAULT_STORE))
    summary = Summary(
        logdir=classification.logdir,
        store=sqlite_path(url) or url,
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
    if dry_run:
        summary.plan = _plan(classification, url)
    else:
        check_store_location(url)
        _convert_into(url, classification, summary, selection, full, progress, chunk_points,
                      prune=not runs, notify=notify or (lambda _message: None))
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
) -> None:
    from converter.store.errors import translate_errors
    from converter.store.migrate import ensure_schema

    engine = create_store_engine(url)
    try:
        with translate_errors(summary.store):
            change = ensure_schema(engine)
            if change is not None and change.from_revision is not None:
                summary.schema_change = (
                    f"schema upgraded {change.from_revision} -> {change.to_revision}"
                    + (f" (backup: {change.backup})" if change.backup else "")
                )
            writer = StoreWriter(engine)
            try:
                job = _Job(writer, classification, summary, selection, full, chunk_points)
                job.run(progress, prune, notify)
            finally:
                writer.close()
    finally:
        engine.dispose()


@dataclass
class _FilePass:
    """The reading of one file in this conversion, carried from chunk to chunk."""

    source: discovery.EventFileSource
    reader: RecordReader
    records: Iterator[tuple[int, bytes]]
    decoder: FileDecoder
    state: FileState
    base_records: int


class _Job:
    """One conversion into an open store."""

    def __init__(
        self,
        writer: StoreWriter,
        classification: discovery.Classification,
        summary: Summary,
        selection: Selection,
        full: bool,
        chunk_points: int,
    ) -> None:
        self.writer = writer
        self.classification = classification
        self.summary = summary
        self.selection = selection
        self.full = full
        self.chunk_points = chunk_points
        self.touched_series: set[int] = set()
        self.touched_runs: set[int] = set()
        self.contexts: set[str] = set()

    def run(self, progress: bool | None, prune: bool, notify: Callable[[str], Any]) -> None:
        """Convert every file of the classification, then record the conversion."""
        logdir = self.classification.logdir
        if self.writer.is_busy():
            notify("another process is writing to the store; waiting for it to finish ...")
        known = self._known_files(logdir)
        todo: list[tuple[discovery.RunSource, discovery.EventFileSource, os.stat_result]] = []
        total_bytes = 0
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
                todo.append((run, source, stat))
                start = state.offset_consumed if state is not None and not self.full else 0
                total_bytes += max(stat.st_size - start, 0) if start <= stat.st_size else stat.st_size
        conversion_id = self._start_conversion()
        with progress_bar(total_bytes, enabled=progress) as bar:
            for run, source, stat in todo:
                self._convert_file(run, source, stat, bar.update)
        if prune:
            self._mark_gone(logdir)
        self.summary.contexts = len(self.contexts)
        self.summary.runs_created = len(self.writer.created_runs)
        self.summary.runs_extended = len(self.touched_runs - self.writer.created_runs)
        self.summary.series_created = len(self.writer.created_series)
        self.summary.series_extended = len(self.touched_series - self.writer.created_series)
        self._finish_conversion(conversion_id)

    def _known_files(self, logdir: str) -> dict[tuple[str, str], FileState]:
        with self.writer.transaction():
            return self.writer.file_states_of_logdir(logdir)

    def _stat(self, source: discovery.EventFileSource) -> os.stat_result | None:
        try:
            return os.stat(source.path)
        except OSError as error:
            self.summary.problems.append(FileProblem(source.rel_path, _os_reason(error)))
            return None

    def _convert_file(
        self,
        run: discovery.RunSource,
        source: discovery.EventFileSource,
        stat: os.stat_result,
        advance: Callable[[int], Any],
    ) -> None:
        try:
            handle = open_event_file(source.path)
        except OSError as error:
            self.summary.problems.append(FileProblem(source.rel_path, _os_reason(error)))
            return
        with handle:
            head = read_first_record(handle)
            digest = hashlib.sha256(head).hexdigest() if head is not None else None
            handle.seek(0)
            with self.writer.transaction():
                state, start = self._open_state(run, source, stat, digest)
                reader = RecordReader(handle, start, end=stat.st_size)
                decoder = FileDecoder(state.id or 0, self._resolver(state), self.selection)
                decoder.seed_metadata(self._remembered_metadata(state))
                pass_ = _FilePass(source, reader, iter(reader), decoder, state, state.records)
                done = self._chunk(pass_, advance)
            while not done:
                with self.writer.transaction():
                    done = self._chunk(pass_, advance)
        self.summary.files_read += 1
        self._finish_file(pass_)

    def _open_state(
        self,
        run: discovery.RunSource,
        source: discovery.EventFileSource,
        stat: os.stat_result,
        digest: str | None,
    ) -> tuple[FileState, int]:
        writer = self.writer
        run_id = writer.run_id(self.classification.logdir, run.run_path, run.group_path,
                               _run_name(self.classification.logdir, run.run_path))
        context_id = writer.context_id(source.context)
        # Read again under the write lock: another converter may have moved the offset.
        state = writer.file_state(run_id, source.rel_path)
        if state is None:
            state = writer.save_file(FileState(None, run_id, context_id, source.rel_path))
            start = 0
        elif self.full or stat.st_size < state.offset_consumed or (
            state.head_digest is not None and digest != state.head_digest
        ):
            writer.delete_file_points(state.id or 0)
            if not self.full:
                self.summary.files_replaced += 1
            state = replace(state, offset_consumed=0, records=0, damaged_records=0,
                            first_wall_time=None, last_wall_time=None)
            start = 0
        else:
            start = state.offset_consumed
        state = replace(state, size=stat.st_size, mtime_ns=stat.st_mtime_ns, head_digest=digest)
        return state, start

    def _chunk(self, pass_: _FilePass, advance: Callable[[int], Any]) -> bool:
        reader, decoder = pass_.reader, pass_.decoder
        before = reader.consumed
        damage_seen = len(reader.damage)
        done = False
        while (decoder.pending() < self.chunk_points
               and reader.consumed - before < _CHUNK_BYTES):
            batch = list(itertools.islice(pass_.records, _RECORD_BATCH))
            if batch:
                decoder.feed_all(batch)
            if len(batch) < _RECORD_BATCH:
                done = True
                break
        rows, blobs = decoder.take()
        self.writer.insert_blobs(blobs)
        for table, table_rows in rows.items():
            self.writer.insert_points(table, table_rows)
        new_damage = reader.damage[damage_seen:]
        self.summary.add_damage(pass_.source.rel_path, new_damage)
        invalid = done and reader.records == 0 and any(d.offset == 0 for d in reader.damage)
        pass_.state = self.writer.save_file(replace(
            pass_.state,
            offset_consumed=reader.consumed,
            records=pass_.base_records + reader.records,
            damaged_records=pass_.state.damaged_records + len(new_damage),
            status=_status(reader, done, invalid),
            last_error=new_damage[-1].reason if new_damage else pass_.state.last_error,
            first_wall_time=_extreme(min, pass_.state.first_wall_time,
                                     decoder.stats.first_wall_time),
            last_wall_time=_extreme(max, pass_.state.last_wall_time,
                                    decoder.stats.last_wall_time),
        ))
        self.summary.bytes_read += reader.consumed - before
        advance(reader.consumed - before)
        return done

    def _finish_file(self, pass_: _FilePass) -> None:
        stats = pass_.decoder.stats
        summary = self.summary
        path = pass_.source.rel_path
        summary.records_read += pass_.reader.records
        summary.points.update(stats.points)
        summary.add_counts(summary.skipped, stats.skipped)
        summary.add_counts(summary.undecodable, stats.undecodable)
        summary.filtered_values += stats.filtered_values
        summary.lossy_records += stats.lossy_records
        for offset in stats.unparseable:
            summary.damaged_records += 1
            summary.problems.append(FileProblem(path, "record is not an Event", offset))
        if pass_.state.status == "invalid":
            summary.problems.append(FileProblem(path, "not an event file (no valid record)"))
        series = pass_.decoder.series_ids()
        self.touched_series |= series
        if series:
            self.touched_runs.add(pass_.state.run_id)
        if pass_.state.status == "partial":
            summary.files_partial += 1

    def _remembered_metadata(self, state: FileState) -> dict[str, Any]:
        from tensorboard.compat.proto import summary_pb2

        remembered: dict[str, Any] = {}
        for tag, plugin, display, description, content in self.writer.series_metadata(
            state.run_id, state.context_id
        ):
            if tag in remembered or plugin in _NOT_FROM_METADATA:
                continue
            remembered[tag] = summary_pb2.SummaryMetadata(
                display_name=display or "",
                summary_description=description or "",
                plugin_data=summary_pb2.SummaryMetadata.PluginData(
                    plugin_name=plugin, content=content or b""),
            )
        return remembered

    def _resolver(self, state: FileState) -> Callable[[str, str, str | None, Any], int]:
        writer, run_id, context_id = self.writer, state.run_id, state.context_id

        def resolve(tag: str, plugin: str, dtype: str | None, metadata: Any) -> int:
            return writer.series_id(run_id, context_id, tag, plugin, dtype, metadata)

        return resolve

    def _mark_gone(self, logdir: str) -> None:
        present = {(run.run_path, f.rel_path) for run in self.classification.runs for f in run.files}
        with self.writer.transaction():
            gone = [file_id for file_id, run_path, path in self.writer.files_of_logdir(logdir)
                    if (run_path, path) not in present]
            self.writer.mark_gone(gone)
        self.summary.files_gone = len(gone)

    def _start_conversion(self) -> int:
        with self.writer.transaction():
            return self.writer.start_conversion(self.classification.logdir, __version__, json.dumps(
                {"flat": self.classification.flat, "full": self.full,
                 "plugins": sorted(self.selection.plugins) if self.selection.plugins else None,
                 "tags": list(self.selection.tags),
                 "exclude_tags": list(self.selection.exclude_tags)}))

    def _finish_conversion(self, conversion_id: int) -> None:
        with self.writer.transaction():
            self.writer.finish_conversion(conversion_id, self.summary.to_json())


def _extreme(pick: Callable[[float, float], float], old: float | None,
             new: float | None) -> float | None:
    if old is None:
        return new
    return old if new is None else pick(old, new)


def _unchanged(state: FileState, stat: os.stat_result) -> bool:
    return state.size == stat.st_size and state.mtime_ns == stat.st_mtime_ns


def _status(reader: RecordReader, done: bool, invalid: bool) -> str:
    if invalid:
        return "invalid"
    if not done or reader.torn:
        return "partial"
    return "damaged" if reader.damage else "ok"


def _run_name(logdir: str, run_path: str) -> str:
    return os.path.basename(logdir) if run_path == "." else run_path.rsplit("/", 1)[-1]


def _os_reason(error: OSError) -> str:
    reason = error.strerror or str(error)
    return f"cannot read: {reason}"


def _plan(classification: discovery.Classification, url: str) -> list[dict[str, Any]]:
    from converter.store.reader import read_file_states

    known = read_file_states(url, classification.logdir)
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
