"""The records of a batch of small files, parsed together (``small_files``, issue #14).

One NumPy pass reads the single-scalar template of every record of the batch
(``block_template.parse``) and numbers their keys.  A file's records then go to its
:class:`~tbconvert.reading.decoder.EventDecoder` only where the decoder has something to
decide (:meth:`BatchParts.decode`); a file of nothing but version headers and records of
learnt keys needs no decoder at all (:meth:`BatchParts.settled`), which is a sweep's usual
file.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.protobuf.message import DecodeError

from tbconvert.filters import Selection
from tbconvert.reading import wire
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.events import Event
from tbconvert.reading.fast import GeneralPath
from tbconvert.reading.fast.template import LearntKeys
from tbconvert.reading.routing import KnownMetadata, Routing, count_version_header
from tbconvert.rows import FileRows, SeriesDefinition

__all__ = ["BatchParts", "FileRecords", "Settled"]

_FLOAT64 = struct.Struct("<d")
# An Event of a wall time and a version string under 128 bytes, what every writer puts first
# in a file: where the version's header and its length byte are.
_VERSION_AT = 9
_VERSION_LENGTH_AT = _VERSION_AT + 1


class FileRecords(Protocol):
    """Where one file's records lie in the batch: ``first:stop`` of its records, and the
    file offset less the buffer index of each of them."""

    @property
    def first(self) -> int: ...

    @property
    def stop(self) -> int: ...

    @property
    def shift(self) -> int: ...


@dataclass
class Settled:
    """What a file's decoder would have made of it (see :meth:`BatchParts.settled`)."""

    rows: dict[str, FileRows]
    definitions: list[SeriesDefinition]
    stats: DecodeStats
    metadata: KnownMetadata
    blobs: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class _Defined:
    """The series a sequence of keys' first records define, in order (see ``_defined``)."""

    definitions: list[SeriesDefinition]
    tags: frozenset[str]
    metadata: KnownMetadata
    series_of: Any  # local series number by key number, -1 for the keys not in it


class BatchParts:
    """The template read from every record of a batch, and which records need the decoder."""

    def __init__(
        self,
        buf: bytes,
        starts: Any,
        lengths: Any,
        files: Sequence[FileRecords],
        selection: Selection,
        learnt_keys: LearntKeys,
    ) -> None:
        """Args: the batch's buffer, records and files with records, in buffer order; what
        to keep (the routing defines the series of each key: ``define_scalar``); the keys
        the conversion has learnt."""
        import numpy as np

        from tbconvert.reading.fast import block_template
        from tbconvert.reading.fast.blocks import Block
        from tbconvert.rows import packed_dtype

        self.buf, self.starts, self.lengths = buf, starts, lengths
        block = Block(buf, 0, starts, lengths)
        parsed = self.parsed = block_template.parse(block)
        # Each record's key number (-1: not of the template, or not a learnt key).
        self.key = np.full(len(starts), -1, dtype=np.int64)
        self._learnt = learnt_keys.tags
        self.tags: list[tuple[str, bool, Any]] = []
        candidates = np.flatnonzero(parsed.ok)
        if len(candidates):
            firsts, numbers = np.unique(
                parsed.hashes[candidates], return_index=True, return_inverse=True
            )[1:]
            numbers = numbers.reshape(-1)
            keys = parsed.keys[candidates]
            # Equal hashes are not enough: the keys themselves must equal their first's.
            usable = block_template.equal_keys(keys, keys[firsts[numbers]])
            numbering = np.full(len(firsts), -1, dtype=np.int64)
            for n, record in enumerate(candidates[firsts].tolist()):
                tag = self._learnt_tag(record)
                if tag is not None:
                    numbering[n] = len(self.tags)
                    self.tags.append(tag)
            self.key[candidates[usable]] = numbering[numbers[usable]]
        # By key number, what ``define_scalar`` defines from a key's first record (it depends
        # on the selection alone), None where the general path would not take its fast path.
        self._selection = selection
        definer = Routing(selection)
        self._definitions = [definer.scalar_definition(*tag) for tag in self.tags]
        counts = [file.stop - file.first for file in files]
        file_of = np.repeat(np.arange(len(files)), counts)
        # Records that may need the decoder: those of unknown keys and the first of each key
        # in each file (which defines its series, through ``define_scalar`` where it can).
        self.general = self.key < 0
        known = np.flatnonzero(~self.general)
        firsts = np.unique(file_of[known] * len(self.tags) + self.key[known], return_index=True)[1]
        self.general[known[firsts]] = True
        self._no_series = np.full(max(len(self.tags), 1), -1, dtype=np.int64)
        self._series_of_keys: dict[tuple[int, ...], _Defined | None] = {}
        # Every record as a packed row, its series to be set per file.
        self.rows = np.empty(len(starts), dtype=packed_dtype())
        self.rows["step"] = parsed.step
        self.rows["offset"] = starts + np.repeat([file.shift for file in files], counts)
        self.rows["wall_time"] = parsed.wall_time
        self.rows["value"] = block_template.values(block, parsed)

    def _learnt_tag(self, record: int) -> tuple[str, bool, Any] | None:
        """The (tag, simple) learnt for the record's key, if any (the key's
        field byte tells a simple value from a tensor, as ``parsed.simple`` does), and the
        metadata the record carries (None if none)."""
        parsed = self.parsed
        end = int(self.starts[record] + self.lengths[record]) + 12
        width = int(parsed.keys[record, 0]) & 0xFF  # parse() put the key's width there
        at = int(parsed.value_at[record])
        key = self.buf[end - width : at] + self.buf[at + 4 : end]
        cached = self._learnt.get(key)
        if cached is None:
            return None
        try:
            event = Event.FromString(self.buf[end - int(self.lengths[record]) : end])
        except DecodeError:
            return None
        (value,) = event.summary.value  # keys are learnt from one value only
        own = value.metadata if value.HasField("metadata") else None
        return cached[0], cached[1], own

    def settled(
        self, file: FileRecords, known: Collection[str], chunk_points: int
    ) -> Settled | None:
        """The file's rows, series, statistics and metadata as its decoder would make them,
        when they follow from the batch alone: its records are version headers (leading) and
        records of learnt keys, each key's series defined by its first record (no ``known``
        tag: remembered or carried metadata, nor a tag twice), and fewer than
        ``chunk_points`` rows.  None otherwise (:meth:`decode` then reads the file)."""
        first, stop = file.first, file.stop
        marked = self.general[first:stop].nonzero()[0]
        numbers = self.key[marked + first].tolist()
        stats = DecodeStats()
        versions = 0
        # Leading records of no learnt key (the first ``marked`` ones: a file's first record
        # is the first of its key) must be version headers; a later one leaves ``keys``
        # undefined.
        while versions < len(numbers) and numbers[versions] < 0:
            wall_time = self._version_wall_time(first + versions)
            if wall_time is None:
                return None
            versions += 1
            count_version_header(stats, wall_time)
        keys = tuple(numbers[versions:])
        if keys not in self._series_of_keys:
            self._series_of_keys[keys] = self._defined(keys)
        defined = self._series_of_keys[keys]
        if defined is None or not defined.tags.isdisjoint(known):
            return None
        count = stop - first - versions
        if count >= chunk_points:
            return None
        rows: dict[str, FileRows] = {}
        if count:
            index = slice(first + versions, stop)
            packed = self._packed(self.rows[index], index, defined.series_of, stats)
            rows["scalars"] = FileRows([packed], count)
            stats.points["scalars"] += count
        return Settled(rows, list(defined.definitions), stats, dict(defined.metadata))

    def _defined(self, keys: tuple[int, ...]) -> _Defined | None:
        """What the first records of ``keys`` (key numbers, in record order) define in a file
        with no ``known`` tag, as a fresh routing's ``define_scalar`` defines it; None when
        one is not of a learnt key or defines no series (a tag repeated, say).  Files of a
        sweep share a few such sequences, so each is asked once."""
        routing = Routing(self._selection)
        series_of = self._no_series.copy()
        for number in keys:
            definition = self._definitions[number] if number >= 0 else None
            if definition is None:
                return None
            _, simple, own = self.tags[number]
            series = routing.define_scalar(definition, simple, own)
            if series is None:
                return None
            series_of[number] = series
        tags = frozenset(definition.tag for definition in routing.definitions)
        return _Defined(list(routing.definitions), tags, routing.metadata(), series_of)

    def _version_wall_time(self, record: int) -> float | None:
        """The wall time of a record that is a version header and nothing else, if finite
        (the decoder leaves an infinite one out of the span, a finite one is the span)."""
        start, length = int(self.starts[record]) + 12, int(self.lengths[record])
        buf = self.buf
        if (
            length < _VERSION_LENGTH_AT + 1
            or buf[start] != wire.WALL_TIME
            or buf[start + _VERSION_AT] != wire.FILE_VERSION
            or buf[start + _VERSION_LENGTH_AT] != length - _VERSION_LENGTH_AT - 1
            or not buf[start + _VERSION_LENGTH_AT + 1 : start + length].isascii()
        ):
            return None
        wall_time: float = _FLOAT64.unpack_from(buf, start + 1)[0]
        return wall_time if math.isfinite(wall_time) else None

    def decode(self, decoder: GeneralPath, file: FileRecords) -> bool:
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
                definition = self._definitions[number]
                series = (
                    None
                    if definition is None
                    else decoder.routing.define_scalar(definition, simple, own)
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
                series = decoder.routing.scalar_series(tag, simple)
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
    def _feed(decoder: GeneralPath, waiting: list[tuple[int, bytes]]) -> None:
        if waiting:
            decoder.feed(waiting)
            waiting.clear()

    def _pack(
        self,
        decoder: GeneralPath,
        file: FileRecords,
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
        if len(rows):
            decoder.buffer.add_packed(
                self._packed(rows, index, series_of, decoder.stats), len(rows)
            )

    def _packed(self, rows: Any, index: Any, series_of: Any, stats: DecodeStats) -> bytes:
        """``rows`` (the batch's at ``index``) packed with their series set; widens the
        span."""
        import numpy as np

        rows["series"] = series_of[self.key[index]]
        # As the general path: NaN wall times are kept in rows, left out of the span.
        wall_time = rows["wall_time"]
        low, high = float(np.fmin.reduce(wall_time)), float(np.fmax.reduce(wall_time))
        if low == low:
            stats.widen_span(low, high)
        packed: bytes = rows.tobytes()
        return packed
