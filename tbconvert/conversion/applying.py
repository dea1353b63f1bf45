"""One decoded chunk applied in the writer's open transaction: the file's state opened (or
carried on from the chunk before), its rows staged in store ids, its new state saved.

A commit group applies its chunks one after the other from a :class:`Position`, a copy of where
the last commit left the chunk stream, and the job keeps that copy only once the group has
committed: a group a server rolls back is applied again from the same place.  A file another
converter read further since the plan, or took over since its last commit, is left to it
(:class:`ReadElsewhere`) before anything of it is written, and the rest of the group goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tbconvert.conversion.options import ConvertOptions
from tbconvert.conversion.sources import Origin
from tbconvert.reading.chunks import Chunk, FileTask
from tbconvert.reading.discovery import Classification
from tbconvert.rows import remap_to_store_ids
from tbconvert.store.file_states import FileState
from tbconvert.writing.writer import StoreWriter


@dataclass
class OpenFile:
    """The file whose chunks are being applied: its state, store ids of its series,
    whether none of its rows read now can be stored yet (so a server may skip the check),
    and the offset this read began at (only its first chunk says whether it restarted)."""

    state: FileState
    ids: list[int]
    base_records: int
    fresh: bool = False
    read_from: int = 0


@dataclass
class Applied:
    """What applying one chunk did, for the bookkeeping after its group commits.

    Attributes:
        task, chunk: The chunk.
        before: The file's offset before the chunk (None: not applied, see ``elsewhere``).
        file: The file's state after it.
        replaced: Its old points were deleted (a replaced file, not ``--full``).
        elsewhere: Another converter read the file further since it was planned.
    """

    task: FileTask
    chunk: Chunk
    before: int | None = None
    file: OpenFile | None = None
    replaced: bool = False
    elsewhere: bool = False


@dataclass
class Position:
    """Where the chunk stream stands between commits (a group restarts from it on retry).

    Attributes:
        open_file: The file read so far by committed chunks, not yet to its end.
        left_to_another: The task whose file another converter is reading (-1: none).
    """

    open_file: OpenFile | None = None
    left_to_another: int = -1


class ReadElsewhere(Exception):
    """Another converter read the file further since it was planned."""


class Applier:
    """Applies the chunks of one conversion, in task order, through its writer.

    Args:
        writer: The store's writer; every call runs in its open transaction.
        classification: The logdir's runs (a file's run is made from it when first met).
        origin: The source the runs are made under.
        options: ``full`` and the selection a file's state records.
    """

    def __init__(
        self,
        writer: StoreWriter,
        classification: Classification,
        origin: Origin,
        options: ConvertOptions,
    ) -> None:
        """Start at the beginning of the chunk stream."""
        self.writer = writer
        self.origin = origin
        self.options = options
        self.committed = Position()
        self._logdir = classification.logdir
        self._runs = {run.run_path: run for run in classification.runs}

    def apply_chunk(self, task: FileTask, chunk: Chunk, position: Position) -> Applied:
        """Apply one chunk inside the group's transaction, moving ``position`` past it."""
        outcome = Applied(task, chunk)
        if chunk.error is not None or task.index == position.left_to_another:
            return outcome
        open_file = position.open_file
        if open_file is not None and open_file.state.path != task.rel_path:
            open_file = None
        carried = open_file is not None and open_file is self.committed.open_file
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

    def _open_state(self, task: FileTask, chunk: Chunk) -> tuple[FileState, bool, bool]:
        """The file's state for its first chunk of this read, with what has to go gone.

        Returns it, whether the file was replaced (its old points deleted, not --full), and
        whether none of the rows read now can be stored yet (see ``StoreWriter.insert_points``).
        """
        writer = self.writer
        run = self._runs[task.run_path]
        run_id = self.origin.run_id(writer, self._logdir, run.run_path, run.group_path)
        # Read again under the write lock: another converter may have moved the offset, or
        # taken the file over (a conversion of a logdir inside or around this one).
        state = writer.files.state(run_id, task.rel_path)
        stored = state.offset_consumed if state is not None else 0
        context_id = writer.identities.context_id(task.context)
        if not chunk.restart and stored != task.offset:
            # It read this file further since the plan: these chunks overlap what it
            # committed (and counted), so the file is left to it.  Nothing was written for
            # it yet but maybe its run, now, so its group carries on.
            writer.files.drop_empty(run_id, context_id)
            raise ReadElsewhere(task.rel_path)
        replaced = False
        fresh = not chunk.restart  # read on from the offset just checked under the lock
        if state is None:
            state = writer.files.save(FileState(None, run_id, context_id, task.rel_path))
            fresh = True
        elif chunk.restart:
            if chunk.replaces:
                writer.files.delete_points(state.id or 0)
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
        """Stage the chunk's rows and save the file's state after it; returns that state."""
        writer = self.writer
        state, ids, base_records = open_file.state, open_file.ids, open_file.base_records
        if chunk.new_series:
            ids.extend(
                writer.identities.series_ids(state.run_id, state.context_id, chunk.new_series)
            )
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
        return writer.files.save(
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


def taken_away(writer: StoreWriter, open_file: OpenFile | None) -> bool:
    """Whether the file read so far is no longer where this conversion put it (another
    conversion took it over since the last commit)."""
    if open_file is None:
        return False
    state = open_file.state
    row = writer.statements.one(
        "SELECT run_id, path FROM event_files WHERE id = :id", {"id": state.id}
    )
    return row is None or (int(row[0]), row[1]) != (state.run_id, state.path)


def extreme(
    pick: Callable[[float, float], float], old: float | None, new: float | None
) -> float | None:
    """``pick`` of two optional values (None when both are)."""
    if old is None:
        return new
    return old if new is None else pick(old, new)


def file_status(chunk: Chunk, invalid: bool, damaged: int) -> str:
    """A file's status after a chunk (see ``FileState.status``)."""
    if not chunk.done:
        return "reading"  # never skipped as unchanged: the next run reads on
    if invalid:
        return "invalid"
    if chunk.torn:
        return "partial"
    return "damaged" if damaged else "ok"
