"""One conversion into an open store: plan per file, then apply the decoded chunks in order.

What the store keeps per file, and what each file needs, are ``conversion.plan``'s (design
§7).  A file filed elsewhere now moves with its points in the planning transaction
(``conversion.relocation``); a replaced file's points go in the transaction of its first new
chunk; each chunk commits with the file's new state, and only the last says "read to the
end", so a crash at any moment leaves a store the next run completes.  The chunks of small
files share a transaction (``conversion.commits``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tbconvert.conversion import stopping
from tbconvert.conversion.commits import (
    Applied,
    Committer,
    Group,
    OpenFile,
    Position,
    ReadElsewhere,
    extreme,
    file_status,
)
from tbconvert.conversion.options import ConvertOptions
from tbconvert.conversion.plan import plan_files, reclassified
from tbconvert.conversion.relocation import relocate
from tbconvert.conversion.sources import Origin, check_source, other_source
from tbconvert.conversion.summary import FileProblem, Summary, progress_bar
from tbconvert.conversion.takeover import take_over, taken_away
from tbconvert.conversion.workers import Decoding
from tbconvert.reading import discovery
from tbconvert.reading.chunks import Chunk, FileTask, bytes_to_read
from tbconvert.rows import remap_to_store_ids
from tbconvert.store.file_states import FileState
from tbconvert.version import __version__
from tbconvert.writing.bulk import is_transient
from tbconvert.writing.writer import StoreWriter

# A group chosen as a server's deadlock victim is rolled back whole and applied again.
_ATTEMPTS = 5


class Job:
    """One conversion into an open store: plan the files, then apply their chunks in order."""

    def __init__(
        self,
        writer: StoreWriter,
        classification: discovery.Classification,
        origin: Origin,
        summary: Summary,
        options: ConvertOptions,
    ) -> None:
        self.writer = writer
        self.classification = classification
        self.origin = origin
        self.summary = summary
        self.options = options
        self.settings = options.read_settings()
        self.touched_series: set[int] = set()
        self.touched_runs: set[int] = set()
        self.contexts: set[str] = set()
        self.committed_points = 0
        self._runs: dict[str, discovery.RunSource] = {}
        self._position = Position()

    def run(self, prune: bool = True) -> None:
        """Convert every changed file of the classification, then record the conversion;
        ``prune``: mark stored files that are no longer in the logdir gone."""
        if self.writer.is_busy():
            self.options.notify(
                "another process is writing to the store; waiting for it to finish ..."
            )
        tasks = self._plan()
        conversion_id = self._start_conversion()
        total = sum(bytes_to_read(task, self.settings) for task in tasks)
        try:
            with progress_bar(total, enabled=self.options.progress) as bar:
                self._apply_all(Decoding(tasks, self.settings, self.options.jobs), bar.update)
        except Exception as error:  # a full disk, a server gone: its message says what is kept
            error.points_kept = self.committed_points  # type: ignore[attr-defined]
            raise
        except stopping.Interrupted as stop:
            stop.kept = (
                f"every chunk committed before it ({self.committed_points} points this run, "
                f"{self.summary.files_read} files read to their end)"
            )
            raise
        self._settle_files(prune)
        self.summary.contexts = len(self.contexts)
        self.summary.runs_created = len(self.writer.created_runs)
        self.summary.runs_extended = len(self.touched_runs - self.writer.created_runs)
        self.summary.series_created = len(self.writer.created_series)
        self.summary.series_extended = len(self.touched_series - self.writer.created_series)
        self.summary.warnings += self.writer.notices()
        self._finish_conversion(conversion_id)

    def _plan(self) -> list[FileTask]:
        with self.writer.transaction():
            check_source(self.writer, self.origin, self.summary.store)
            self.writer.move_logdir(self.origin.source, self.classification.logdir)
            take_over(self.writer, self.origin, self.classification, self.summary, self.options)
            known = self.writer.file_states_of_source(self.origin.source)
            notice = None if known else other_source(self.writer, self.origin, self.classification)
            if notice is not None:
                self.summary.warnings.append(notice)
            self.summary.orphans_new, self.summary.runs_merged = reclassified(
                self.classification, known
            )
            self.summary.files_moved = relocate(
                self.writer, self.origin, self.classification, known
            )
            # After the moves: a moved file's tags are known in its new place.
            known_metadata = self.writer.known_metadata(self.origin.source) if known else {}
        tasks: list[FileTask] = []
        options = self.options
        for plan in plan_files(self.classification, known, options.full, options.selection):
            self.contexts.add(plan.file.context)
            if plan.action == "unreadable":
                self.summary.problems.append(FileProblem(plan.file.rel_path, plan.reason or ""))
                continue
            if plan.action == "unchanged":
                self.summary.files_unchanged += 1
                continue
            owner = (plan.run.run_path, plan.file.context)
            state = plan.state
            tasks.append(
                FileTask(
                    index=len(tasks),
                    path=plan.file.path,
                    rel_path=plan.file.rel_path,
                    run_path=plan.run.run_path,
                    context=plan.file.context,
                    size=plan.size,
                    mtime_ns=plan.mtime_ns,
                    offset=0 if state is None else state.offset_consumed,
                    stored_size=None if state is None else state.size,
                    stored_digest=None if state is None else state.head_digest,
                    known_metadata=known_metadata.setdefault(owner, {}),
                    from_start=plan.from_start,
                    sidecar=plan.file.sidecar,
                )
            )
        self._runs = {run.run_path: run for run in self.classification.runs}
        return tasks

    def _apply_all(self, chunks: Decoding, advance: Callable[[int], Any]) -> None:
        # A group also commits when the workers have nothing ready: the writer would only
        # wait, so its commit costs no time, and the last group is then small.
        group = Group(self.settings.chunk_points)
        decoded = iter(chunks)
        committer = Committer(lambda full: self._commit_group(full, advance), self.writer.shared)
        self.writer.call_when_waiting_on_server(committer.waiting_on_server)
        try:
            while True:
                try:
                    task, chunk = next(decoded)
                except StopIteration:
                    break
                except Exception:
                    # Decoding failed (a worker died, a stop while waiting for one): what was
                    # decoded before is whole, and kept.
                    if group.entries:
                        committer.submit(group)
                    committer.wait()
                    raise
                group.add(task, chunk)
                if group.full() or stopping.requested() or chunks.waiting():
                    committer.submit(group)
                    group = Group(self.settings.chunk_points)
                    if stopping.requested():  # taken between transactions only
                        committer.wait()
                        stopping.check()
            if group.entries:
                committer.submit(group)
                committer.wait()
                stopping.check()
            committer.wait()
        finally:
            committer.join()  # a commit under way ends before anything else is done

    def _commit_group(self, group: Group, advance: Callable[[int], Any]) -> None:
        """Apply a group's chunks in one transaction; a server's deadlock victim tries again."""
        for attempt in range(1, _ATTEMPTS + 1):
            position = replace(self._position)
            try:
                with self.writer.transaction():
                    self.writer.lock_runs(self.origin.source, group.run_paths())
                    applied = [
                        self._apply_chunk(task, chunk, position) for task, chunk in group.entries
                    ]
            except Exception as error:  # driver errors come raw from COPY, wrapped otherwise
                if attempt < _ATTEMPTS and is_transient(error):
                    continue
                raise
            self._position = position
            for outcome in applied:
                self._account(outcome, advance)
                outcome.chunk.blobs = {}  # committed: freed now, though readers hold the chunk
            return
        raise AssertionError("unreachable")

    def _apply_chunk(self, task: FileTask, chunk: Chunk, position: Position) -> Applied:
        """Apply one chunk inside the group's transaction, moving ``position`` past it."""
        outcome = Applied(task, chunk)
        if chunk.error is not None or task.index == position.left_to_another:
            return outcome
        open_file = position.open_file
        if open_file is not None and open_file.state.path != task.rel_path:
            open_file = None
        carried = open_file is not None and open_file is self._position.open_file
        if open_file is None or (carried and taken_away(self.writer, open_file)):
            try:
                if open_file is not None:  # taken over since its last commit: read on there
                    raise ReadElsewhere(task.rel_path)
                state, outcome.replaced, fresh = self._open_state(task, chunk)
            except ReadElsewhere:
                # Raised before the file wrote anything: the rest of the group goes on.
                position.left_to_another, position.open_file = task.index, None
                outcome.elsewhere = True
                return outcome
            read_from = 0 if chunk.restart else task.offset
            current = OpenFile(state, [], state.records, fresh, read_from)
        else:
            current = replace(open_file, ids=list(open_file.ids))
        outcome.before = current.state.offset_consumed
        current.state = self._apply(task, chunk, current)
        outcome.file = current
        position.open_file = None if chunk.done else current
        return outcome

    def _account(self, outcome: Applied, advance: Callable[[int], Any]) -> None:
        """Count a committed chunk in the summary and the progress bar."""
        task, chunk = outcome.task, outcome.chunk
        if chunk.error is not None:
            self.summary.problems.append(FileProblem(task.rel_path, chunk.error))
            return
        if chunk.warning is not None:
            self.summary.warnings.append(chunk.warning)
        if outcome.elsewhere:
            self.summary.files_unchanged += 1
        if outcome.file is None or outcome.before is None:
            return
        if outcome.replaced:
            self.summary.files_replaced += 1
        self.committed_points += chunk.points()
        self.summary.add_damage(task.rel_path, chunk.damage)
        advance(max(outcome.file.state.offset_consumed - outcome.before, 0))
        if chunk.done:
            self._finish_file(task, chunk, outcome.file)

    def _open_state(self, task: FileTask, chunk: Chunk) -> tuple[FileState, bool, bool]:
        """The file's state for its first chunk of this read, with what has to go gone.

        Returns it, whether the file was replaced (its old points deleted, not --full), and
        whether none of the rows read now can be stored yet (see ``StoreWriter.insert_points``).
        """
        writer = self.writer
        run = self._runs[task.run_path]
        run_id = self.origin.run_id(
            writer, self.classification.logdir, run.run_path, run.group_path
        )
        # Read again under the write lock: another converter may have moved the offset, or
        # taken the file over (a conversion of a logdir inside or around this one).
        state = writer.file_state(run_id, task.rel_path)
        stored = state.offset_consumed if state is not None else 0
        context_id = writer.context_id(task.context)
        if not chunk.restart and stored != task.offset:
            # It read this file further since the plan: these chunks overlap what it
            # committed (and counted), so the file is left to it.  Nothing was written for
            # it yet but maybe its run, now, so its group carries on.
            writer.drop_empty(run_id, context_id)
            raise ReadElsewhere(task.rel_path)
        replaced = False
        fresh = not chunk.restart  # read on from the offset just checked under the lock
        if state is None:
            state = writer.save_file(FileState(None, run_id, context_id, task.rel_path))
            fresh = True
        elif chunk.restart:
            if chunk.replaces:
                writer.delete_file_points(state.id or 0)
                replaced = not self.options.full
                fresh = True
            state = state.updated(
                offset_consumed=0,
                records=0,
                damaged_records=0,
                last_error=None,
                first_wall_time=None,
                last_wall_time=None,
            )
        state = state.updated(
            size=task.size,
            mtime_ns=task.mtime_ns,
            head_digest=chunk.digest,
            selection=self.options.selection.canonical(),
        )
        return state, replaced, fresh

    def _apply(self, task: FileTask, chunk: Chunk, open_file: OpenFile) -> FileState:
        writer = self.writer
        state, ids, base_records = open_file.state, open_file.ids, open_file.base_records
        if chunk.new_series:
            ids.extend(writer.series_ids(state.run_id, state.context_id, chunk.new_series))
        writer.insert_blobs(chunk.blobs)
        file_id = state.id
        assert file_id is not None  # the file's row was saved when its first chunk began
        for table, rows in chunk.rows.items():
            writer.stage_points(
                table,
                remap_to_store_ids(rows, ids, file_id),
                fresh=open_file.fresh,
                path=state.path,
            )
        invalid = (
            chunk.done
            and base_records + chunk.records == 0
            and any(region.offset == 0 for region in chunk.damage)
        )
        return writer.save_file(
            state.updated(
                offset_consumed=chunk.consumed,
                records=base_records + chunk.records,
                damaged_records=state.damaged_records + len(chunk.damage),
                status=file_status(chunk, invalid, state.damaged_records + len(chunk.damage)),
                last_error=chunk.damage[-1].reason if chunk.damage else state.last_error,
                first_wall_time=extreme(min, state.first_wall_time, chunk.first_wall_time),
                last_wall_time=extreme(max, state.last_wall_time, chunk.last_wall_time),
            )
        )

    def _finish_file(self, task: FileTask, chunk: Chunk, read: OpenFile) -> None:
        stats = chunk.stats
        summary = self.summary
        state, ids = read.state, read.ids
        summary.files_read += 1
        summary.bytes_read += max(chunk.consumed - read.read_from, 0)
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
                    FileProblem(task.rel_path, "record is not an Event", offset)
                )
        if state.status == "invalid":
            summary.problems.append(
                FileProblem(task.rel_path, "not an event file (no valid record)")
            )
        if state.status == "partial":
            summary.files_partial += 1
        self.touched_series.update(ids)
        if ids:
            self.touched_runs.add(state.run_id)

    def _settle_files(self, prune: bool) -> None:
        """Mark the stored files no longer in the logdir gone (``prune``), and name the ones
        still damaged that this pass did not report (read before, or touched since)."""
        # Skipped orphans are still there: left alone, as runs left out by --run are.
        present = {source.rel_path for source in self.classification.files}
        present.update(self.classification.orphans)
        reported = {problem.path for problem in self.summary.problems}
        with self.writer.transaction():
            # A converter of a nested logdir running at the same time may have stored files
            # of this one since the plan: they are this one's too (its reads stop there).
            take_over(self.writer, self.origin, self.classification, self.summary, self.options)
            stored = self.writer.files_of_source(self.origin.source)
            gone = [file_id for file_id, path, _status in stored if path not in present]
            if prune:
                self.writer.mark_gone(gone)
        self.summary.files_gone = len(gone) if prune else 0
        self.summary.still_damaged = sorted(
            path
            for _id, path, status in stored
            if status in ("damaged", "invalid") and path in present and path not in reported
        )

    def _start_conversion(self) -> int:
        options = self.options.logged(self.origin.source, self.classification.flat)
        with self.writer.transaction():
            logdir = self.classification.logdir
            return self.writer.start_conversion(logdir, __version__, json.dumps(options))

    def _finish_conversion(self, conversion_id: int) -> None:
        with self.writer.transaction():
            self.writer.finish_conversion(conversion_id, self.summary.to_json())
