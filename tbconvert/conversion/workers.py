"""Decoding the files of a conversion, in this process or in ``--jobs`` worker processes.

Workers run only ``tbconvert.reading``: they never touch the store.  Every (run, context) goes
to one worker, so plugin metadata carries across its files, and chunks reach the single
writer in task order whatever the number of workers.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from tbconvert.conversion import stopping
from tbconvert.conversion.options import ConvertTuning
from tbconvert.errors import ConverterError
from tbconvert.reading.chunks import Chunk, FileTask, KnownMetadataByOwner, ReadSettings
from tbconvert.reading.small_files import read_files

# Workers yield the CPU to the writer when both want it: the writer sets the pace, and a
# worker only has to keep its parcels ahead (docs/performance.md#worker-niceness).
_WORKER_NICENESS = 10

# Parcels (lists of chunks, bounded by ``ConvertTuning.parcel_*``) a worker may hold ready
# before the writer takes them: a parcel weighs about one chunk, so this bounds memory.
_QUEUE_CHUNKS = 4
# Seconds between looks at whether a --jobs conversion is being stopped, and between a
# worker's looks at whether its parent is still there (where the kernel does not tell it).
_POLL = 0.1
# Linux's prctl option asking for a signal when the parent dies (<linux/prctl.h>).
_PR_SET_PDEATHSIG = 1


class Decoding:
    """The chunks of every task, in task order (iterate once); ``jobs > 1`` reads ahead in
    worker processes, and ``waiting`` then says whether the writer would wait for the next.
    """

    def __init__(
        self,
        tasks: Sequence[FileTask],
        settings: ReadSettings,
        jobs: int,
        tuning: ConvertTuning | None = None,
    ) -> None:
        """Args: the files to read, how to read them, the number of worker processes, and
        the bounds of the parcels they send (default: ``ConvertTuning()``)."""
        self._tasks = tasks
        self._settings = settings
        self._jobs = jobs
        self._tuning = tuning if tuning is not None else ConvertTuning(read=settings.tuning)
        self._ready: Any = None  # the receiver's hand-overs, with workers
        self._left = 0  # chunks of the hand-over in use not yielded yet

    def __iter__(self) -> Iterator[tuple[FileTask, Chunk]]:
        if self._jobs <= 1 or len(self._tasks) <= 1:
            return read_files(self._tasks, self._settings, {})
        return self._from_workers()

    def waiting(self) -> bool:
        """Whether the next chunk is not decoded yet: never in this process (it decodes
        when asked); with workers, when nothing decoded is ready for the writer."""
        return self._ready is not None and not self._left and self._ready.empty()

    def _from_workers(self) -> Iterator[tuple[FileTask, Chunk]]:
        # Every (run, context) goes to one worker so metadata carries across its files; each
        # worker reads its tasks in task order, which is the order the writer takes them in,
        # so bounded queues cannot deadlock.
        import multiprocessing  # only here: --jobs 1 need not pay for importing it
        import queue
        import threading

        # Forked workers inherit these (and NumPy) instead of each importing them while the
        # writer waits for its first chunk.
        import tbconvert.reading.fast.block_scalars  # noqa: F401

        tasks, jobs = self._tasks, self._jobs
        context: Any = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        owners: dict[tuple[str, str], int] = {}
        assignment = [owners.setdefault((t.run_path, t.context), len(owners) % jobs) for t in tasks]
        queues = [context.Queue(maxsize=_QUEUE_CHUNKS) for _ in range(jobs)]
        workers = [
            context.Process(
                target=_worker_process,
                args=(
                    os.getpid(),
                    [t for t, owner in zip(tasks, assignment, strict=False) if owner == number],
                    self._settings,
                    self._tuning,
                    queues[number],
                ),
                daemon=True,
            )
            for number in range(jobs)
        ]
        for worker in workers:
            worker.start()
        ready: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_CHUNKS)
        self._ready = ready
        stop = threading.Event()
        receiver = threading.Thread(
            target=_receive,
            args=(tasks, assignment, queues, ready, stop, self._tuning.parcel_chunks),
            daemon=True,
        )
        receiver.start()
        try:
            while True:
                try:
                    item = ready.get(timeout=_POLL)
                except queue.Empty:
                    _check_workers(workers)
                    stopping.check()
                    continue
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                self._left = len(item)
                for entry in item:
                    self._left -= 1
                    yield entry
        finally:
            stop.set()
            for worker in workers:
                if worker.is_alive():
                    worker.terminate()
                worker.join()
            # A receiver waiting for room in ``ready`` sees the stop once it gets some; one
            # inside a message half-written by a killed worker never returns (a daemon).
            deadline = time.monotonic() + 1.0
            while receiver.is_alive() and time.monotonic() < deadline:
                with contextlib.suppress(queue.Empty):
                    ready.get(timeout=_POLL)


def _receive(
    tasks: Sequence[FileTask],
    owners: list[int],
    parcels: list[Any],
    ready: Any,
    stop: Any,
    parcel_chunks: int,
) -> None:
    """Move chunks from the workers' parcels to ``ready`` in task order, in lists (of at most
    ``parcel_chunks``), then None.

    A thread of the writer's process: unpickling the next parcel then overlaps the writer's
    inserts (SQLite releases the GIL while it steps), rather than waiting for them.  What it
    has in order goes over as one list whenever it would wait for a worker or holds a
    parcel's worth, so a sweep's thousands of small chunks do not cost a hand-over each.
    """
    import queue

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                ready.put(item, timeout=_POLL)
                return True
        return False

    held: list[deque[Any]] = [deque() for _ in parcels]
    ordered: list[tuple[FileTask, Chunk]] = []

    def hand_over_ordered() -> bool:
        sent = not ordered or hand_over(ordered.copy())
        ordered.clear()
        return sent

    def next_from(owner: int) -> Any:
        if not held[owner]:
            if not hand_over_ordered():
                return None
            while not stop.is_set():
                with contextlib.suppress(queue.Empty):
                    held[owner].extend(parcels[owner].get(timeout=_POLL))
                    break
            else:
                return None
        return held[owner].popleft()

    try:
        for task, owner in zip(tasks, owners, strict=True):
            while True:
                chunk = next_from(owner)
                if chunk is None:
                    return
                if isinstance(chunk, BaseException):
                    hand_over_ordered()
                    hand_over(chunk)
                    return
                ordered.append((task, chunk))
                if len(ordered) >= parcel_chunks:
                    hand_over_ordered()
                if chunk.done:
                    break
        hand_over_ordered()
        hand_over(None)
    except BaseException as error:
        hand_over(error)


def _check_workers(workers: Sequence[Any]) -> None:
    """Fail, rather than wait forever, when a worker died without a word (killed, out of
    memory); one that finished its files exits with 0."""
    for worker in workers:
        if worker.exitcode not in (None, 0):
            raise ConverterError(
                f"a decoding worker exited (code {worker.exitcode}) before sending all it read",
                hint="what was committed is kept: run again, with fewer --jobs if memory ran out",
            )


def _worker_process(parent: int, *work: Any) -> None:
    """A worker process's body: :func:`_work`, for as long as the writer (``parent``) lives,
    at a lower priority than the writer and leaving signals to it."""
    end_with_parent(parent)
    stopping.ignore_in_worker()
    if hasattr(os, "nice"):
        os.nice(_WORKER_NICENESS)
    _work(*work)


def _work(tasks: list[FileTask], settings: ReadSettings, tuning: ConvertTuning, queue: Any) -> None:
    """Decode ``tasks`` in order, sending their chunks in parcels: lists of chunks that end
    once they hold a chunk's worth of points, ``tuning.parcel_bytes`` of blobs or
    ``tuning.parcel_chunks`` chunks, or took ``tuning.parcel_seconds`` to decode; then an
    error if decoding failed.

    Without the time bound a few files of mixed plugins (tens of milliseconds each, few
    points) made one parcel, and --jobs 2 decoded them all before the writer saw the first.
    """
    known_metadata: KnownMetadataByOwner = {}
    parcel: list[Any] = []
    points = size = 0
    started = time.perf_counter()
    try:
        for _task, chunk in read_files(tasks, settings, known_metadata):
            parcel.append(chunk)
            points += chunk.points()
            size += chunk.blob_bytes()
            if (
                points >= settings.chunk_points
                or size >= tuning.parcel_bytes
                or len(parcel) >= tuning.parcel_chunks
                or time.perf_counter() - started >= tuning.parcel_seconds
            ):
                queue.put(parcel)
                parcel, points, size = [], 0, 0
                started = time.perf_counter()
    except BaseException as error:
        parcel.append(error)
    if parcel:
        queue.put(parcel)


def end_with_parent(parent: int) -> None:
    """End this worker when ``parent`` (the writer's process) dies, whatever kills it.

    A writer killed with ``kill -9`` runs no clean-up: its workers, blocked on a full queue
    no one reads, would stay alive for good, reparented, holding the logdir's files open.
    Linux kills them itself (``PR_SET_PDEATHSIG``); everywhere, a thread watching the
    parent's pid ends the worker within ``_POLL`` seconds of the reparenting.
    """
    import threading

    _ask_the_kernel_for_sigkill_on_parent_death()
    # The parent may have died before the request took effect: no signal would come then.
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent,), name="tbconvert-parent-watch", daemon=True
    ).start()


def _ask_the_kernel_for_sigkill_on_parent_death() -> bool:
    """Linux only; elsewhere (or without a C library) False, and the watch thread does it."""
    import ctypes
    import ctypes.util
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    # An orphan is reparented (to init or a subreaper), so its parent pid changes.
    while os.getppid() == parent:
        time.sleep(_POLL)
    os._exit(1)
