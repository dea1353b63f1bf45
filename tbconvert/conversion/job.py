"""One conversion into an open store: plan per file, then apply the decoded chunks in order.

What the store keeps per file, and what each file needs, are ``conversion.plan``'s (design
§7).  A file filed elsewhere now moves with its points in the planning transaction
(``conversion.relocation``); a replaced file's points go in the transaction of its first new
chunk; each chunk commits with the file's new state, and only the last says "read to the
end", so a crash at any moment leaves a store the next run completes.  The chunks of small
files share a transaction (``conversion.commits``); each chunk is applied in it by
``conversion.applying``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tbconvert.conversion import stopping
from tbconvert.conversion.applying import Applied, Applier, OpenFile
from tbconvert.conversion.commits import CommitGroup, Committer
from tbconvert.conversion.options import ConvertOptions
from tbconvert.conversion.plan import plan_files, reclassified
from tbconvert.conversion.relocation import relocate
from tbconvert.conversion.sources import Origin, check_source, known_metadata, other_source
from tbconvert.conversion.summary import FileProblem, Summary, progress_bar
from tbconvert.conversion.takeover import take_over
from tbconvert.conversion.workers import Decoding
from tbconvert.reading import discovery
from tbconvert.reading.chunks import Chunk, FileTask, bytes_to_read
from tbconvert.version import __version__
from tbconvert.writing.bulk import is_transient
from tbconvert.writing.conversions import finish_conversion, start_conversion
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
        self.settings = options.read_settings(classification.remote)
        self.touched_series: set[int] = set()
        self.touched_runs: set[int] = set()
        self.contexts: set[str] = set()
        self.committed_points = 0
        self.applier = Applier(writer, classification, origin, options)

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
                self._apply_all(
                    Decoding(tasks, self.settings, self.options.jobs, self.options.tuning),
                    bar.update,
                )
        except stopping.Interrupted as stop:  # an Exception too: first
            stop.summary = self.summary
            stop.kept = (
                f"every chunk committed before it ({self.committed_points} points this run, "
                f"{self.summary.files_read} files read to their end)"
            )
            raise
        except Exception as error:  # a full disk, a server gone: its message says what is kept
            error.points_kept = self.committed_points  # type: ignore[attr-defined]
            raise
        self._settle_files(prune)
        self.summary.contexts = len(self.contexts)
        self.summary.runs_created = len(self.writer.identities.created_runs)
        self.summary.runs_extended = len(self.touched_runs - self.writer.identities.created_runs)
        self.summary.series_created = len(self.writer.identities.created_series)
        self.summary.series_extended = len(
            self.touched_series - self.writer.identities.created_series
        )
        self.summary.warnings += self.writer.notices()
        self._finish_conversion(conversion_id)

    def _plan(self) -> list[FileTask]:
        with self.writer.transaction():
            check_source(self.writer, self.origin, self.summary.store)
            self.writer.files.move_logdir(self.origin.source, self.classification.logdir)
            take_over(self.writer, self.origin, self.classification, self.summary, self.options)
            known = self.writer.files.states_of_source(self.origin.source)
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
            known_tags = known_metadata(self.writer, self.origin.source) if known else {}
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
                    known_metadata=known_tags.setdefault(owner, {}),
                    from_start=plan.from_start,
                    sidecar=plan.file.sidecar,
                )
            )
        return tasks

    def _apply_all(self, chunks: Decoding, advance: Callable[[int], Any]) -> None:
        # A group also commits when the workers have nothing ready: the writer would only
        # wait, so its commit costs no time, and the last group is then small.
        group = CommitGroup(self.settings.chunk_points, self.options.tuning)
        decoded = iter(chunks)
        committer = Committer(lambda full: self.commit_group(full, advance), self.writer.shared)
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
                    group = CommitGroup(self.settings.chunk_points, self.options.tuning)
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

    def commit_group(self, group: CommitGroup, advance: Callable[[int], Any]) -> None:
        """Apply a group's chunks in one transaction, then count them (:meth:`account`); a
        server's deadlock victim tries again.  The job's commit boundary: tests wrap it to
        act between two commits."""
        applier = self.applier
        for attempt in range(1, _ATTEMPTS + 1):
            position = replace(applier.committed)
            try:
                with self.writer.transaction():
                    self.writer.lock_runs(self.origin.source, group.run_paths())
                    applied = [
                        applier.apply_chunk(task, chunk, position) for task, chunk in group.entries
                    ]
            except Exception as error:  # driver errors come raw from COPY, wrapped otherwise
                if attempt < _ATTEMPTS and is_transient(error):
                    continue
                raise
            applier.committed = position
            for outcome in applied:
                self.account(outcome, advance)
                outcome.chunk.blobs = {}  # committed: freed now, though readers hold the chunk
            return
        raise AssertionError("unreachable")

    def account(self, outcome: Applied, advance: Callable[[int], Any]) -> None:
        """Count a committed chunk in the summary and the progress bar (tests wrap it to act
        after a given chunk has committed)."""
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
        classification = self.classification
        present = {source.rel_path for source in classification.files}
        present.update(classification.orphans)
        reported = {problem.path for problem in self.summary.problems}
        with self.writer.transaction():
            # A converter of a nested logdir running at the same time may have stored files
            # of this one since the plan: they are this one's too (its reads stop there).
            take_over(self.writer, self.origin, classification, self.summary, self.options)
            stored = self.writer.files.of_source(self.origin.source)
            # Another shard's runs are its own to settle, and their files are still there.
            gone = [
                file_id
                for file_id, path, _status, run_path in stored
                if path not in present
                and path not in classification.elsewhere
                and classification.owns(run_path)
            ]
            if prune:
                self.writer.files.mark_gone(gone)
        self.summary.files_gone = len(gone) if prune else 0
        self.summary.still_damaged = sorted(
            path
            for _id, path, status, _run_path in stored
            if status in ("damaged", "invalid") and path in present and path not in reported
        )

    def _start_conversion(self) -> int:
        options = self.options.logged(self.origin.source, self.classification.flat)
        with self.writer.transaction():
            logdir = self.classification.logdir
            return start_conversion(
                self.writer.statements, logdir, __version__, json.dumps(options)
            )

    def _finish_conversion(self, conversion_id: int) -> None:
        with self.writer.transaction():
            finish_conversion(self.writer.statements, conversion_id, self.summary.to_json())
