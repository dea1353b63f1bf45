"""Many small event files read as one batch: one NumPy pass over all their records.

A sweep is thousands of runs of a few hundred scalar events each.  One file at a time, such
a file is checked and decoded record by record (``ReadTuning.by_record_bytes``), because the
block path's NumPy calls cost more than a few hundred records save.  Here the files of a
batch are read whole and laid end to end, so that one call checks every checksum of the
batch (``blocks.verify``) and one parse reads the single-scalar template of every record
(``block_template.parse``).  In each file, a record goes through the file's
:class:`~tbconvert.reading.decoder.EventDecoder` only when its key is not among the keys the
conversion has learnt (``fast.template.LearntKeys``) or is the first of its key in the file
(that record defines the key's series there, as it would record by record); every other record
becomes a packed row of that series, in record order (``fast.batch``).  A file of nothing but
its version header and records of learnt keys needs no decoder at all.

Each file still becomes exactly the one chunk ``chunks.read_file`` makes of it.  A file that
would not (torn or damaged, more points than a chunk, a first record past its planned size,
gzip), or in which the first record of a key leaves no series for it (filtered out, or
another plugin's), is handed to ``read_file`` whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tbconvert.reading import chunks
from tbconvert.reading.chunks import Chunk, FileTask, KnownMetadataByOwner, ReadSettings
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast.batch import BatchParts, Settled
from tbconvert.reading.first_record import digest_of, first_record
from tbconvert.reading.remote import fetch_all, is_remote

__all__ = ["FileBatch", "read_batch", "read_files"]

# Windows opens a descriptor in text mode unless told otherwise.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def read_files(
    tasks: Sequence[FileTask], settings: ReadSettings, known_metadata: KnownMetadataByOwner
) -> Iterator[tuple[FileTask, Chunk]]:
    """The chunks of every task in task order, as ``chunks.read_file`` makes them; files
    under ``settings.tuning.by_record_bytes`` are read in batches (:func:`read_batch`).

    A batch ends at whichever of the tuning's bounds comes first.  The first batches are
    small: the key cache learns its keys from the first files, and a batch looks its keys up
    before reading any of them.
    """
    tuning = settings.tuning
    batch: list[FileTask] = []
    size = 0
    most = tuning.first_batch_files
    for task in tasks:
        small = not task.sidecar and 0 < task.size < tuning.by_record_bytes
        if small:
            batch.append(task)
            size += task.size
            if size < tuning.batch_bytes and len(batch) < most:
                continue
            most = min(2 * most, tuning.batch_files)
        yield from read_batch(batch, settings, known_metadata)
        batch, size = [], 0
        if not small:
            yield from _read_one(task, settings, known_metadata)
    yield from read_batch(batch, settings, known_metadata)


def _read_one(
    task: FileTask, settings: ReadSettings, known_metadata: KnownMetadataByOwner
) -> Iterator[tuple[FileTask, Chunk]]:
    if task.sidecar:
        from tbconvert.reading.sidecars import read_sidecar  # rare: kept off start-up

        yield task, read_sidecar(task, settings)
        return
    for chunk in chunks.read_file(task, settings, known_metadata):
        yield task, chunk


def read_batch(
    tasks: list[FileTask], settings: ReadSettings, known_metadata: KnownMetadataByOwner
) -> Iterator[tuple[FileTask, Chunk]]:
    """The chunks of a batch of small files, read whole and checked together; a file the
    batch cannot take is handed to ``chunks.read_file``."""
    if not tasks:
        return
    batch = FileBatch(settings)
    loaded = [
        batch.load(task, data) for task, data in zip(tasks, _contents(tasks, settings), strict=True)
    ]
    batch.check(loaded)
    for task, file in zip(tasks, loaded, strict=True):
        chunk = None if file is None or file.damaged else batch.chunk(file, known_metadata)
        if chunk is None:
            yield from _read_one(task, settings, known_metadata)
            continue
        yield task, chunk


@dataclass
class _File:
    """One file of a batch: its bytes from ``start`` lie from ``base`` in the batch's
    buffer, and its records are ``first:stop`` of the batch's (set by ``FileBatch.check``)."""

    task: FileTask
    restart: bool
    replaces: bool
    digest: str
    data: bytes
    start: int
    base: int
    first: int = 0
    stop: int = 0
    damaged: bool = False  # torn, damaged or past its end: read_file finds out how

    @property
    def shift(self) -> int:
        """File offset minus buffer index, for each of its records."""
        return self.start - self.base


class FileBatch:
    """Small files read whole and laid end to end in ``buf``.

    Attributes:
        settings: What the conversion reads with.
        buf: The files' bytes from where each is read (set by :meth:`check`).
        parts: The template read from every record of the batch (set by :meth:`check`;
            None when no file of the batch has records to read).
    """

    def __init__(self, settings: ReadSettings) -> None:
        """Args: what the conversion reads with."""
        self.settings = settings
        self._size = 0
        self.buf = b""
        self.parts: BatchParts | None = None

    def load(self, task: FileTask, data: bytes | None) -> _File | None:
        """Take ``task``'s file (None: it could not be read); None when ``read_file`` must
        read it."""
        if data is None:
            return None  # read_file says why
        if len(data) != task.size or data[:2] == b"\x1f\x8b":  # shrank, or gzip
            return None
        # As read_file would; a first record not whole in the planned size is left to it.
        digest = digest_of(first_record(data))
        if digest is None:
            return None
        restart, replaces = chunks.restart_of(task, self.settings, digest)
        start = 0 if restart else task.offset
        if start > len(data):
            return None
        file = _File(task, restart, replaces, digest, data, start, self._size)
        self._size += len(data) - start
        return file

    def check(self, loaded: list[_File | None]) -> None:
        """Find every file's records, verify their checksums and read the template from all
        of them.  A file whose records do not end exactly at its end, or (when some record
        of the batch is damaged) whose own records fail, is marked ``damaged``."""

        from tbconvert.reading.fast import block_template, blocks

        files = [file for file in loaded if file is not None]
        data = b"".join(memoryview(file.data)[file.start :] for file in files)
        starts = _walk(data, files)
        for file in files:
            file.data = b""  # in ``buf`` now
        # Padded so that the template's reach covers the last records too.
        self.buf = data + bytes(block_template.REACH)
        files = [file for file in files if file.stop > file.first]
        if not files:
            return
        lengths = blocks.lengths_at(self.buf, starts)
        if not blocks.verify(self.buf, starts, lengths):
            for file in files:
                part = slice(file.first, file.stop)
                file.damaged = not blocks.verify(self.buf, starts[part], lengths[part])
        # The lengths of a damaged file's records still tile it: parse() stays in bounds.
        settings = self.settings
        self.parts = BatchParts(
            self.buf, starts, lengths, files, settings.selection, settings.learnt_keys
        )

    def chunk(self, file: _File, known_metadata: KnownMetadataByOwner) -> Chunk | None:
        """The file's one chunk, or None when ``read_file`` must read it."""
        task = file.task
        owner = (task.run_path, task.context)
        parts = self.parts
        settled = None
        if parts is not None and file.stop > file.first:
            known = task.known_metadata.keys() | known_metadata.get(owner, {}).keys()
            settled = parts.settled(file, known, self.settings.chunk_points)
        if settled is None:
            settled = self._decode(file, known_metadata)
            if settled is None:
                return None
        stats = settled.stats
        known_metadata.setdefault(owner, {}).update(settled.metadata)
        return Chunk(
            settled.rows,
            settled.blobs,
            settled.definitions,
            task.size,
            file.stop - file.first,
            [],
            stats.first_wall_time,
            stats.last_wall_time,
            done=True,
            restart=file.restart,
            replaces=file.replaces,
            digest=file.digest,
            stats=stats,
            read=task.size - (0 if file.restart else task.offset),
        )

    def _decode(self, file: _File, known_metadata: KnownMetadataByOwner) -> Settled | None:
        """The file read through its decoder; None when ``read_file`` must read it."""
        decoder = EventDecoder(
            self.settings.selection,
            chunks.known_metadata_of(file.task, known_metadata),
            learnt_keys=self.settings.learnt_keys,
        )
        parts = self.parts
        if parts is not None and file.stop > file.first and not parts.decode(decoder, file):
            return None
        if decoder.pending() >= self.settings.chunk_points:
            return None  # read_file would end its chunk there
        rows, blobs = decoder.take()
        return Settled(rows, list(decoder.definitions), decoder.stats, decoder.metadata(), blobs)


def _contents(tasks: Sequence[FileTask], settings: ReadSettings) -> list[bytes | None]:
    """Each task's file, read whole up to its planned size (None: it cannot be read).  The
    objects of a remote logdir are fetched all at once, concurrently (``remote.fetch_all``)."""
    if is_remote(tasks[0].path):
        fetched = fetch_all([(task.path, task.size) for task in tasks], settings.remote)
        return [None if isinstance(data, OSError) else data for data in fetched]
    return [_read_local(task) for task in tasks]


def _read_local(task: FileTask) -> bytes | None:
    try:
        # A bare descriptor: a file object's buffer is a fifth of the read (a sweep's).
        descriptor = os.open(task.path, _READ_FLAGS)
        try:
            return os.read(descriptor, task.size)
        finally:
            os.close(descriptor)
    except OSError:
        return None


def _walk(data: bytes, files: list[_File]) -> Any:
    """The header index of every record of the files laid end to end in ``data``, setting
    each file's ``first:stop`` (``damaged`` when its records overrun its end: nothing is
    checked yet)."""
    from tbconvert.reading.fast.blocks import walk_files

    starts, counts = walk_files(data, [file.base for file in files])
    first = 0
    for file, count in zip(files, counts, strict=True):
        file.damaged = file.damaged or count < 0
        file.first, file.stop = first, first + max(count, 0)
        first = file.stop
    return starts
