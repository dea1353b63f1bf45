"""Many small event files read as one batch: one NumPy pass over all their records (issue #14).

A sweep is thousands of runs of a few hundred scalar events each.  One file at a time, such
a file is checked and decoded record by record (``chunks._BY_RECORD_BYTES``), because the
block path's NumPy calls cost more than a few hundred records save.  Here the files of a
batch are read whole and laid end to end, so that one call checks every checksum of the
batch (``blocks.verify``) and one parse reads the single-scalar template of every record
(``fastscalars.parse``).  In each file, a record goes through the file's
:class:`~converter.reading.decoder.EventDecoder` only when its key is not known to the key
cache (``scalarkeys.KNOWN``) or is the first of its key in the file (that record defines
the key's series there, as it would record by record); every other record becomes a packed
row of that series, in record order.

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

from google.protobuf.message import DecodeError

from converter.reading import chunks, scalarkeys
from converter.reading.chunks import Chunk, FileTask, KnownMetadataByContext, ReadSettings
from converter.reading.decoder import EventDecoder
from converter.reading.events import Event
from converter.reading.heads import digest_of, first_record
from converter.rows import SeriesDefinition

__all__ = ["read_files"]

# A batch ends at whichever comes first.  The first batches are small: the key cache learns
# its keys from the first files, and a batch looks its keys up before reading any of them.
_BATCH_BYTES = 4 << 20
_FIRST_BATCH_FILES, _BATCH_FILES = 8, 1024
# Windows opens a descriptor in text mode unless told otherwise.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def read_files(
    tasks: Sequence[FileTask], settings: ReadSettings, carried: KnownMetadataByContext
) -> Iterator[tuple[FileTask, Chunk]]:
    """The chunks of every task in task order, as ``chunks.read_file`` makes them; files
    under ``chunks._BY_RECORD_BYTES`` are read in batches."""
    batch: list[FileTask] = []
    size = 0
    most = _FIRST_BATCH_FILES
    for task in tasks:
        small = 0 < task.size < chunks._BY_RECORD_BYTES
        if small:
            batch.append(task)
            size += task.size
            if size < _BATCH_BYTES and len(batch) < most:
                continue
            most = min(2 * most, _BATCH_FILES)
        yield from _read_batch(batch, settings, carried)
        batch, size = [], 0
        if not small:
            yield from _read_one(task, settings, carried)
    yield from _read_batch(batch, settings, carried)


def _read_one(
    task: FileTask, settings: ReadSettings, carried: KnownMetadataByContext
) -> Iterator[tuple[FileTask, Chunk]]:
    for chunk in chunks.read_file(task, settings, carried):
        yield task, chunk


def _read_batch(
    tasks: list[FileTask], settings: ReadSettings, carried: KnownMetadataByContext
) -> Iterator[tuple[FileTask, Chunk]]:
    if not tasks:
        return
    batch = _Batch(settings)
    loaded = [batch.load(task) for task in tasks]
    batch.check(loaded)
    for task, file in zip(tasks, loaded, strict=True):
        chunk = None if file is None or file.damaged else batch.chunk(file, carried)
        if chunk is None:
            yield from _read_one(task, settings, carried)
            continue
        yield task, chunk


@dataclass
class _File:
    """One file of a batch: its bytes from ``start`` lie from ``base`` in the batch's
    buffer, and its records are ``first:stop`` of the batch's (set by ``_Batch.check``)."""

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


class _Batch:
    """Files read whole and laid end to end in ``buf``; ``starts``, each record's header."""

    def __init__(self, settings: ReadSettings) -> None:
        self.settings = settings
        self._size = 0
        # Set by check():
        self.buf = b""
        self._parts: _Parts | None = None

    def load(self, task: FileTask) -> _File | None:
        """Read ``task``'s file; None when ``read_file`` must read it."""
        try:
            # A bare descriptor: a file object's buffer is a fifth of the read (a sweep's).
            descriptor = os.open(task.path, _READ_FLAGS)
            try:
                data = os.read(descriptor, task.size)
            finally:
                os.close(descriptor)
        except OSError:
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

        from converter.reading import blocks, fastscalars

        files = [file for file in loaded if file is not None]
        data = b"".join(memoryview(file.data)[file.start :] for file in files)
        starts = _walk(data, files)
        for file in files:
            file.data = b""  # in ``buf`` now
        # Padded so that the template's reach covers the last records too.
        self.buf = data + bytes(fastscalars.REACH)
        files = [file for file in files if file.stop > file.first]
        if not files:
            return
        lengths = blocks.lengths_at(self.buf, starts)
        if not blocks.verify(self.buf, starts, lengths):
            for file in files:
                part = slice(file.first, file.stop)
                file.damaged = not blocks.verify(self.buf, starts[part], lengths[part])
        # The lengths of a damaged file's records still tile it: parse() stays in bounds.
        self._parts = _Parts(self.buf, starts, lengths, files)

    def chunk(self, file: _File, carried: KnownMetadataByContext) -> Chunk | None:
        """The file's one chunk, or None when ``read_file`` must read it."""
        task = file.task
        decoder = EventDecoder(self.settings.selection, chunks.known_metadata(task, carried))
        parts = self._parts  # None when no file of the batch has records to read
        if parts is not None and file.stop > file.first and not parts.decode(decoder, file):
            return None
        if decoder.pending() >= self.settings.chunk_points:
            return None  # read_file would end its chunk there
        rows, blobs = decoder.take()
        stats = decoder.stats
        carried.setdefault((task.run_path, task.context), {}).update(decoder.metadata())
        return Chunk(
            rows,
            blobs,
            list(decoder.definitions),
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


class _Parts:
    """The template read from every record of a batch, and which records need the decoder."""

    def __init__(self, buf: bytes, starts: Any, lengths: Any, files: list[_File]) -> None:
        """Args: the batch's buffer, records and files with records, in buffer order."""
        import numpy as np

        from converter.reading import fastscalars
        from converter.reading.blocks import Block
        from converter.rows import packed_dtype

        self.buf, self.starts, self.lengths = buf, starts, lengths
        block = Block(buf, 0, starts, lengths)
        parsed = self.parsed = fastscalars.parse(block)
        # Each record's key number (-1: not of the template, or not in the key cache).
        self.key = np.full(len(starts), -1, dtype=np.int64)
        self.tags: list[tuple[str, bool, Any]] = []
        self._definitions: dict[int, SeriesDefinition | None] = {}  # by key number
        candidates = np.flatnonzero(parsed.ok)
        if len(candidates):
            firsts, numbers = np.unique(
                parsed.hashes[candidates], return_index=True, return_inverse=True
            )[1:]
            numbers = numbers.reshape(-1)
            keys = parsed.keys[candidates]
            # Equal hashes are not enough: the keys themselves must equal their first's.
            usable = fastscalars.equal_keys(keys, keys[firsts[numbers]])
            numbering = np.full(len(firsts), -1, dtype=np.int64)
            for n, record in enumerate(candidates[firsts].tolist()):
                tag = self._cached_tag(record)
                if tag is not None:
                    numbering[n] = len(self.tags)
                    self.tags.append(tag)
            self.key[candidates[usable]] = numbering[numbers[usable]]
        counts = [file.stop - file.first for file in files]
        file_of = np.repeat(np.arange(len(files)), counts)
        # Records that may need the decoder: those of unknown keys and the first of each key
        # in each file (which defines its series, through ``define_scalar`` where it can).
        self.general = self.key < 0
        known = np.flatnonzero(~self.general)
        firsts = np.unique(file_of[known] * len(self.tags) + self.key[known], return_index=True)[1]
        self.general[known[firsts]] = True
        self._no_series = np.full(max(len(self.tags), 1), -1, dtype=np.int64)
        # Every record as a packed row, its series to be set per file.
        self.rows = np.empty(len(starts), dtype=packed_dtype())
        self.rows["step"] = parsed.step
        self.rows["offset"] = starts + np.repeat([file.shift for file in files], counts)
        self.rows["wall_time"] = parsed.wall_time
        self.rows["value"] = fastscalars.values(block, parsed)

    def _cached_tag(self, record: int) -> tuple[str, bool, Any] | None:
        """The (tag, simple) the key cache holds for the record's key, if any (the key's
        field byte tells a simple value from a tensor, as ``parsed.simple`` does), and the
        metadata the record carries (None if none)."""
        parsed = self.parsed
        end = int(self.starts[record] + self.lengths[record]) + 12
        width = int(parsed.keys[record, 0]) & 0xFF  # parse() put the key's width there
        at = int(parsed.value_at[record])
        key = self.buf[end - width : at] + self.buf[at + 4 : end]
        cached = scalarkeys.KNOWN.get(key)
        if cached is None:
            return None
        try:
            event = Event.FromString(self.buf[end - int(self.lengths[record]) : end])
        except DecodeError:
            return None
        (value,) = event.summary.value  # the key cache holds keys of one value only
        own = value.metadata if value.HasField("metadata") else None
        return cached[0], cached[1], own

    def decode(self, decoder: EventDecoder, file: _File) -> bool:
        """Decode the file's records into ``decoder`` in record order; False when the first
        record of a key leaves no series for it (the file must go record by record)."""
        key = self.key[file.first : file.stop]
        general = self.general[file.first : file.stop].copy()
        series_of = self._no_series.copy()
        waiting: list[tuple[int, bytes]] = []
        packed_from = 0  # file-local index of the first record not packed or decoded yet
        # The array methods, not np.flatnonzero or np.full: their Python wrappers cost more
        # than the work on a small file's few hundred records.
        locals_ = general.nonzero()[0]
        for local, number in zip(locals_.tolist(), key[locals_].tolist(), strict=True):
            if number >= 0:
                self._feed(decoder, waiting)  # the decoder must be up to this record
                tag, simple, own = self.tags[number]
                if number not in self._definitions:  # the same for every file of the batch
                    self._definitions[number] = decoder.scalar_definition(tag, simple, own)
                definition = self._definitions[number]
                series = (
                    None if definition is None else decoder.define_scalar(definition, simple, own)
                )
                if series is not None:
                    series_of[number] = series
                    general[local] = False  # packed with the records of known keys
                    continue
            if packed_from < local:
                self._feed(decoder, waiting)
                self._pack(decoder, file, general, packed_from, local, series_of)
            waiting.append(self._pair(file.first + local, file.shift))
            packed_from = local + 1
            if number >= 0:  # the key's first record: its series must exist after it
                self._feed(decoder, waiting)
                series = (decoder.simple_series if simple else decoder.float_tensor_series).get(tag)
                if series is None:
                    return False
                series_of[number] = series
        self._feed(decoder, waiting)
        self._pack(decoder, file, general, packed_from, len(key), series_of)
        return True

    def _pair(self, record: int, shift: int) -> tuple[int, bytes]:
        start = int(self.starts[record])
        return start + shift, self.buf[start + 12 : start + 12 + int(self.lengths[record])]

    @staticmethod
    def _feed(decoder: EventDecoder, waiting: list[tuple[int, bytes]]) -> None:
        if waiting:
            decoder.feed_records(waiting)
            waiting.clear()

    def _pack(
        self,
        decoder: EventDecoder,
        file: _File,
        general: Any,
        start: int,
        stop: int,
        series_of: Any,
    ) -> None:
        """Pack the file's records ``start:stop`` (file-local) that are not ``general``."""
        import numpy as np

        first = file.first + start
        if not general[start:stop].any():
            # A sweep's usual file: every record packed.  Its rows are a slice of the batch's
            # (only this file reads them), so no gather is needed.
            index: Any = slice(first, file.first + stop)
        else:
            index = np.flatnonzero(~general[start:stop]) + first
        rows = self.rows[index]
        if not len(rows):
            return
        rows["series"] = series_of[self.key[index]]
        decoder.buffer.add_packed(rows.tobytes(), len(rows))
        # As the general path: NaN wall times are kept in rows, left out of the span.
        wall_time = rows["wall_time"]
        low, high = float(np.fmin.reduce(wall_time)), float(np.fmax.reduce(wall_time))
        if low == low:
            decoder.stats.widen_span(low, high)


def _walk(data: bytes, files: list[_File]) -> Any:
    """The header index of every record of the files laid end to end in ``data``, setting
    each file's ``first:stop`` (``damaged`` when its records overrun its end: nothing is
    checked yet)."""
    from converter.reading.blocks import walk_files

    starts, counts = walk_files(data, [file.base for file in files])
    first = 0
    for file, count in zip(files, counts, strict=True):
        file.damaged = file.damaged or count < 0
        file.first, file.stop = first, first + max(count, 0)
        first = file.stop
    return starts
