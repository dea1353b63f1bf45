"""Reading one event file into chunks of rows, with no database access.

This is the part of a conversion that can run in worker processes (``--jobs``): a
:class:`FileTask` says what to read, :func:`read_file` yields :class:`Chunk` s that the single
writer applies in order.  Series are named by local numbers (``new_series``) that the writer
maps to store ids; rows carry file id 0 until the writer knows the file's id.

Files of one (run, context) are read in order by one reader, which carries the plugin
metadata seen in earlier files to later ones (TF1 writers send it once per tag, and
``FileWriter.reopen`` starts a new file without it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from converter.decode import DecodeStats, FileDecoder, Rows, Selection
from converter.errors import ConverterError
from converter.records import Damage, RecordReader, open_event_file, read_first_record

if TYPE_CHECKING:
    from converter.blocks import Block

# Records per block handed to the decoder (fewer when a chunk holds fewer points).
_RECORD_BATCH = 8192
# Images and audio make few points of many bytes: bound a chunk by bytes too.
_CHUNK_BYTES = 64 << 20
# Chunks a worker may hold ready before the writer takes them (bounds memory).
_QUEUE_CHUNKS = 4
# Seconds between looks at whether a --jobs conversion is being stopped.
_POLL = 0.1

Carry = dict[tuple[str, str], dict[str, Any]]  # (run_path, context) -> tag -> metadata


@dataclass(frozen=True)
class FileTask:
    """One file to read: where, from which stored state, and what to keep."""

    index: int
    path: str
    rel_path: str
    run_path: str
    context: str
    size: int
    mtime_ns: int
    offset: int  # stored offset_consumed (0 when new or read in full)
    stored_size: int | None
    stored_digest: str | None
    full: bool
    seeds: dict[str, bytes]  # tag -> serialized SummaryMetadata remembered by the store
    selection: Selection
    chunk_points: int


@dataclass
class Chunk:
    """Rows decoded from a stretch of one file, and where the file stands after it."""

    rows: dict[str, Rows]  # iterable more than once (a writer may retry a chunk)
    blobs: dict[str, bytes]
    new_series: list[tuple[int, str, str, str | None, bytes | None]]
    consumed: int
    records: int
    damage: list[Damage]
    first_wall_time: float | None
    last_wall_time: float | None
    done: bool = False
    torn: bool = False
    restart: bool = False  # first chunk only: read from 0, replacing what the store has
    digest: str | None = None
    error: str | None = None  # the file could not be opened
    stats: DecodeStats | None = None  # last chunk only


def unreadable_reason(error: OSError) -> str:
    """The one-line reason a file could not be stat'ed or opened."""
    return f"cannot read: {error.strerror or error}"


def bytes_to_read(task: FileTask) -> int:
    """What reading the task will cover, for the progress bar (a restart reads it all)."""
    if task.full or task.size < task.offset:
        return task.size
    return task.size - task.offset


def read_file(task: FileTask, carry: Carry) -> Iterator[Chunk]:
    """Yield the chunks of one file; the first tells whether it restarts from 0."""
    try:
        handle = open_event_file(task.path)
    except OSError as error:
        yield _failed(task, unreadable_reason(error))
        return
    with handle:
        head = read_first_record(handle)
        digest = hashlib.sha256(head).hexdigest() if head is not None else None
        restart = task.full or (task.stored_size is not None and (
            task.size < task.offset
            or (task.stored_digest is not None and digest != task.stored_digest)))
        start = 0 if restart else task.offset
        handle.seek(0)
        reader = RecordReader(handle, start, end=task.size)
        decoder, definitions = _decoder(task, carry)
        batches = reader.blocks(max(1, min(_RECORD_BATCH, task.chunk_points)))
        first = True
        while True:
            chunk = _next_chunk(task, reader, batches, decoder, definitions)
            if first:
                chunk.restart, chunk.digest, first = restart, digest, False
            if chunk.done:
                chunk.stats = decoder.stats
                carry.setdefault((task.run_path, task.context), {}).update(decoder.metadata())
            yield chunk
            if chunk.done:
                return


def _decoder(task: FileTask, carry: Carry) -> tuple[FileDecoder, list[Any]]:
    from tensorboard.compat.proto.summary_pb2 import SummaryMetadata

    definitions: list[tuple[int, str, str, str | None, bytes | None]] = []

    def resolve(tag: str, plugin: str, dtype: str | None, metadata: Any) -> int:
        local = len(definitions)
        content = metadata.SerializeToString() if metadata is not None else None
        definitions.append((local, tag, plugin, dtype, content))
        return local

    decoder = FileDecoder(0, resolve, task.selection)
    seeds = {tag: SummaryMetadata.FromString(data) for tag, data in task.seeds.items()}
    seeds.update(carry.get((task.run_path, task.context), {}))
    decoder.seed_metadata(seeds)
    return decoder, definitions


def _next_chunk(
    task: FileTask,
    reader: RecordReader,
    batches: Iterator[Block | list[tuple[int, bytes]]],
    decoder: FileDecoder,
    definitions: list[Any],
) -> Chunk:
    before = reader.consumed
    damage_seen = len(reader.damage)
    announced = len(definitions)
    done = False
    while decoder.pending() < task.chunk_points and reader.consumed - before < _CHUNK_BYTES:
        batch = next(batches, None)
        if batch is None:
            done = True
            break
        if isinstance(batch, list):
            decoder.feed_all(batch)
        else:
            decoder.feed_block(batch)
    rows, blobs = decoder.take()
    stats = decoder.stats
    return Chunk(rows, blobs, definitions[announced:],
                 reader.consumed, reader.records, reader.damage[damage_seen:],
                 stats.first_wall_time, stats.last_wall_time, done=done,
                 torn=reader.torn if done else False)


def _failed(task: FileTask, message: str) -> Chunk:
    return Chunk({}, {}, [], task.offset, 0, [], None, None, done=True, error=message)


def decode_all(tasks: Sequence[FileTask], jobs: int) -> Iterator[tuple[FileTask, Chunk]]:
    """Chunks of every task, in task order; ``jobs > 1`` reads ahead in worker processes."""
    if jobs <= 1 or len(tasks) <= 1:
        carry: Carry = {}
        for task in tasks:
            for chunk in read_file(task, carry):
                yield task, chunk
        return
    yield from _decode_in_workers(tasks, jobs)


def _decode_in_workers(tasks: Sequence[FileTask], jobs: int) -> Iterator[tuple[FileTask, Chunk]]:
    # Every (run, context) goes to one worker so metadata carries across its files; each
    # worker reads its tasks in task order, which is the order the writer takes them in, so
    # bounded queues cannot deadlock.
    import multiprocessing  # only here: --jobs 1 need not pay for importing it
    import queue
    import threading

    # Forked workers inherit these (and NumPy) instead of each importing them while the
    # writer waits for its first chunk.
    import converter.fastscalars  # noqa: F401

    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    owners: dict[tuple[str, str], int] = {}
    assignment = [owners.setdefault((t.run_path, t.context), len(owners) % jobs) for t in tasks]
    queues = [context.Queue(maxsize=_QUEUE_CHUNKS) for _ in range(jobs)]
    workers = [
        context.Process(target=_work, args=(
            [t for t, owner in zip(tasks, assignment) if owner == number], queues[number]),
            daemon=True)
        for number in range(jobs)
    ]
    for worker in workers:
        worker.start()
    ready: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_CHUNKS)
    stop = threading.Event()
    receiver = threading.Thread(
        target=_receive, args=(tasks, [queues[owner] for owner in assignment], ready, stop),
        daemon=True)
    receiver.start()
    try:
        while True:
            try:
                item = ready.get(timeout=_POLL)
            except queue.Empty:
                _check_workers(workers)
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
        # A receiver waiting for room in ``ready`` sees the stop once it gets some; one
        # inside a message half-written by a killed worker never returns (it is a daemon).
        deadline = time.monotonic() + 1.0
        while receiver.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                ready.get(timeout=_POLL)


def _receive(tasks: Sequence[FileTask], sources: list[Any], ready: Any, stop: Any) -> None:
    """Move chunks from the workers' queues to ``ready`` in task order, then None.

    A thread of the writer's process: unpickling the next chunk then overlaps the writer's
    inserts (SQLite releases the GIL while it steps), rather than waiting for them.
    """
    import queue

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(item, timeout=_POLL)
                return True
        return False

    def next_from(source: Any) -> Any:
        while not stop.is_set():
            with contextlib.suppress(queue.Empty):
                return source.get(timeout=_POLL)
        return None

    try:
        for task, source in zip(tasks, sources):
            while True:
                chunk = next_from(source)
                if chunk is None or not hand_over(
                        chunk if isinstance(chunk, BaseException) else (task, chunk)):
                    return
                if isinstance(chunk, BaseException) or chunk.done:
                    break
        hand_over(None)
    except BaseException as error:  # noqa: BLE001 - raised by the writer
        hand_over(error)


def _check_workers(workers: Sequence[Any]) -> None:
    """Fail, rather than wait forever, when a worker died without a word (killed, out of
    memory); one that finished its files exits with 0."""
    for worker in workers:
        if worker.exitcode not in (None, 0):
            raise ConverterError(
                f"a decoding worker exited (code {worker.exitcode}) before sending all it read",
                hint="what was committed is kept: run again, with fewer --jobs if memory ran out")


def _work(tasks: list[FileTask], queue: Any) -> None:
    carry: Carry = {}
    try:
        for task in tasks:
            for chunk in read_file(task, carry):
                queue.put(chunk)
    except BaseException as error:  # noqa: BLE001 - handed to the writer, which raises it
        queue.put(error)
