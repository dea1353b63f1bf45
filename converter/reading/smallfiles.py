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

import hashlib
import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from converter.reading import chunks, scalarkeys
from converter.reading.chunks import Chunk, FileTask, KnownMetadataByContext, ReadSettings
from converter.reading.crc import masked_crc32c
from converter.reading.decoder import EventDecoder
from converter.reading.events import Event

__all__ = ["read_files"]

# A batch ends at whichever comes first.  The first batches are small: the key cache learns
# its keys from the first files, and a batch looks its keys up before reading any of them.
_BATCH_BYTES = 4 << 20
_FIRST_BATCH_FILES, _BATCH_FILES = 8, 1024
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


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
    """One file of a batch, read whole; its records are ``first:stop`` of the batch's."""

    task: FileTask
    restart: bool
    replaces: bool
    digest: str
    first: int
    stop: int
    shift: int  # file offset minus batch index, for each of its records
    damaged: bool = False


class _Batch:
    """Files read whole and laid end to end in ``buf``; ``starts``, each record's header."""

    def __init__(self, settings: ReadSettings) -> None:
        self.settings = settings
        self._regions: list[bytes] = []
        self._size = 0
        self._starts = array("q")
        # Set by check():
        self.buf = b""
        self._parts: _Parts | None = None

    def load(self, task: FileTask) -> _File | None:
        """Read ``task``'s file and find its records; None when ``read_file`` must read it."""
        try:
            with open(task.path, "rb") as handle:
                data = handle.read(task.size)
        except OSError:
            return None  # read_file says why
        if len(data) != task.size or data[:2] == b"\x1f\x8b":  # shrank, or gzip
            return None
        digest = _head_digest(data)
        if digest is None:
            return None
        restart, replaces = chunks.restart_of(task, self.settings, digest)
        start = 0 if restart else task.offset
        starts = self._starts
        first = len(starts)
        shift = start - self._size
        i, n = start, len(data)
        unpack = _U64.unpack_from
        # Nothing is checked yet: check() verifies every record of the batch at once.
        while i + 16 <= n:
            starts.append(i - shift)
            i += unpack(data, i)[0] + 16
        stop = len(starts)
        if i != n:
            del starts[first:]  # torn, damaged or past the end
            return None
        self._regions.append(data[start:])
        self._size += n - start
        return _File(task, restart, replaces, digest, first, stop, shift)

    def check(self, files: list[_File | None]) -> None:
        """Verify every record's checksums and read the template from all of them.  When
        some record is damaged, each file is verified on its own, and those that fail are
        marked ``damaged`` (read one by one: the per-record reader finds the damage)."""
        import numpy as np

        from converter.reading import blocks, fastscalars

        # Padded so that the template's reach covers the last records too.
        self.buf = b"".join(self._regions) + bytes(fastscalars.REACH)
        self._regions = []
        starts = np.frombuffer(self._starts, dtype=np.int64)
        if not len(starts):
            return
        lengths = blocks.lengths_at(self.buf, starts)
        if not blocks.verify(self.buf, starts, lengths):
            for file in files:
                if file is not None and file.stop > file.first:
                    part = slice(file.first, file.stop)
                    file.damaged = not blocks.verify(self.buf, starts[part], lengths[part])
        # The lengths of a damaged file's records still tile it: parse() stays in bounds.
        self._parts = _Parts(self.buf, starts, lengths)

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
        )


class _Parts:
    """The template read from every record of a batch, and which records need the decoder."""

    def __init__(self, buf: bytes, starts: Any, lengths: Any) -> None:
        import numpy as np

        from converter.reading import fastscalars
        from converter.reading.blocks import Block

        self.buf, self.starts, self.lengths = buf, starts, lengths
        block = Block(buf, 0, starts, lengths)
        parsed = self.parsed = fastscalars.parse(block)
        self.values = fastscalars.values(block, parsed)
        # Each record's key number (-1: not of the template, or not in the key cache).
        self.key = np.full(len(starts), -1, dtype=np.int64)
        self.tags: list[tuple[str, bool, Any]] = []
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
            value = Event.FromString(self.buf[end - int(self.lengths[record]) : end])
        except DecodeError:
            return None
        (value,) = value.summary.value  # the key cache holds keys of one value only
        own = value.metadata if value.HasField("metadata") else None
        return cached[0], cached[1], own

    def decode(self, decoder: EventDecoder, file: _File) -> bool:
        """Decode the file's records into ``decoder`` in record order; False when the first
        record of a key leaves no series for it (the file must go record by record)."""
        import numpy as np

        key = self.key[file.first : file.stop]
        # Records that may need the decoder: those of unknown keys and the first of each key
        # (which defines its series, through ``define_scalar`` where it can).
        general = key < 0
        numbers, firsts = np.unique(key, return_index=True)
        general[firsts[numbers >= 0]] = True
        series_of = np.full(max(len(self.tags), 1), -1, dtype=np.int64)
        waiting: list[tuple[int, bytes]] = []
        packed_from = 0  # file-local index of the first record not packed or decoded yet
        for local in np.flatnonzero(general).tolist():
            number = int(key[local])
            if number >= 0:
                self._feed(decoder, waiting)  # the decoder must be up to this record
                tag, simple, own = self.tags[number]
                series = decoder.define_scalar(tag, simple, own)
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
                tag, simple, _own = self.tags[number]
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

        from converter.rows import pack_rows

        index = np.flatnonzero(~general[start:stop]) + (file.first + start)
        if not len(index):
            return
        parsed = self.parsed
        wall_time = parsed.wall_time[index]
        decoder.buffer.add_packed(
            pack_rows(
                series_of[self.key[index]],
                parsed.step[index],
                self.starts[index] + file.shift,
                wall_time,
                self.values[index],
            ),
            len(index),
        )
        # As the general path: NaN wall times are kept in rows, left out of the span.
        low, high = float(np.fmin.reduce(wall_time)), float(np.fmax.reduce(wall_time))
        if low == low:
            decoder.stats.widen_span(low, high)


def _head_digest(data: bytes) -> str | None:
    """``records.head_digest`` of a file read whole into ``data``; None also when its first
    record is not whole in ``data``."""
    if len(data) < 16:
        return None
    length, stored = _HEADER.unpack_from(data, 0)
    end = 12 + length
    if end + 4 > len(data) or masked_crc32c(data[:8]) != stored:
        return None
    payload = data[12:end]
    if masked_crc32c(payload) != _U32.unpack_from(data, end)[0]:
        return None
    return hashlib.sha256(payload).hexdigest()
