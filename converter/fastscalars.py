"""Single-scalar Events of a whole :class:`~converter.blocks.Block` decoded at once with NumPy.

Almost every record of a training log is an Event holding one scalar, and its bytes differ
from the previous record with the same tag only in wall time, step and value.  Parsing each
with protobuf and reading its fields in Python costs about 3 us per record; here the wire
format is read for all records of a block together.  Accepted, field by field and with every
length ending exactly at the end of the payload (anything else takes the general path):

    09 <wall_time: 8>  [10 <step: varint of at most 9 bytes>]
    2a <S> 0a <V> 0a <T> <tag>   15 <value: 4>                          simple_value
                                 42 <L> 08 01 [12 <D> <shape>] 22 04 <value: 4>
                                                         DT_FLOAT tensor_content, any shape
                                 [4a <M> <metadata>]

with every length (S, V, T, L, D, M) a single byte.  The bytes from ``2a`` to the end with
the four value bytes blanked, the record's *key*, fix everything but wall time, step and
value: two records with equal keys parse to the same tag, kind and metadata.  Keys are learnt
by the decoder from records the general path has decoded, after checking that protobuf reads
them as this module does (see ``FileDecoder.feed_block``).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from converter.blocks import Block

# Widest key in bytes; longer keys (tags of about 90+ characters) go the general way.
_KEY_WIDTH = 128
_WORDS = _KEY_WIDTH // 8
# Every index the template reads lies within this many bytes of a record's start (the lengths
# are single bytes): records closer to the end of the buffer are left to the general path, so
# no index needs clipping.
_REACH = 640
_HASH_FACTORS = np.arange(1, _WORDS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


@functools.cache
def _key_masks(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks of ``size`` bytes (as single items): item ``n`` of the first keeps the first ``n``
    bytes, item ``at`` of the second blanks the 4 bytes from ``at``."""
    keep = np.tri(size + 1, size, -1, dtype=np.uint8) * np.uint8(0xFF)
    blank = np.full((size - 3, size), 0xFF, dtype=np.uint8)
    for at in range(size - 3):
        blank[at, at : at + 4] = 0
    return keep.view(f"V{size}").ravel(), blank.view(f"V{size}").ravel()


@dataclass
class Parsed:
    """The template read from every record of a block (arrays indexed by record).

    Attributes:
        ok: The record matches the template.
        simple: Its value is a ``simple_value`` (else a tensor).
        wall_time, step: The Event's fields.
        value_at: Buffer index of the 4 value bytes.
        hashes, keys: Each record's key hash and key (up to 16 uint64 words).
    """

    ok: np.ndarray
    simple: np.ndarray
    wall_time: np.ndarray
    step: np.ndarray
    value_at: np.ndarray
    hashes: np.ndarray
    keys: np.ndarray


def parse(block: Block) -> Parsed:
    """Read the template from every record of ``block``."""
    data = np.frombuffer(block.buf, dtype=np.uint8)
    ok = (block.lengths >= 20) & (block.starts <= len(data) - _REACH)
    start = np.where(ok, block.starts + 12, 0)
    end = start + block.lengths
    ok &= data[start] == 0x09
    wall_time = _view(data, "<f8")[start + 1]
    ok &= wall_time != 0  # proto3 omits 0.0; -0.0 would need Python's ordering of zeros
    has_step = ok & (data[start + 9] == 0x10)
    step, size, complete = _varint(data, start + 10, has_step)
    summary = np.where(has_step, start + 10 + size, start + 9)
    value = summary + 2
    tag = value + 2
    kind = tag + 2 + data[tag + 1]
    ok &= complete & (data[summary] == 0x2A) & (data[value] == 0x0A) & (data[tag] == 0x0A)
    ok &= (value + data[summary + 1] == end) & (tag + data[value + 1] == end)
    ok &= (data[summary + 1] | data[value + 1] | data[tag + 1]) < 0x80
    value_at, after, simple, ok = _value_field(data, kind, ok)
    metadata = after != end
    ok &= ~metadata | ((data[after] == 0x4A) & (data[after + 1] < 0x80)
                       & (after + 2 + data[after + 1] == end))
    hashes, keys, ok = _keys(data, summary, value_at, end, ok)
    return Parsed(ok, simple, wall_time, step, value_at, hashes, keys)


def _view(data: np.ndarray, dtype: str) -> np.ndarray:
    """``data`` read as ``dtype`` at every byte offset (unaligned)."""
    width = np.dtype(dtype).itemsize
    return np.ndarray((len(data) - width + 1,), dtype=dtype, buffer=data, strides=(1,))


def _varint(data: np.ndarray, at: np.ndarray, live: np.ndarray) -> tuple[Any, ...]:
    """Decode the varints at ``at`` where ``live``, of at most 9 bytes (values below 2**63).

    Returns:
        Values (int64), sizes in bytes, and whether each ended within 9 bytes.
    """
    value = np.zeros(len(at), dtype=np.uint64)
    size = np.zeros(len(at), dtype=np.int64)
    for k in range(9):
        byte = data[at + k]
        value |= np.where(live, byte & 0x7F, 0).astype(np.uint64) << np.uint64(7 * k)
        size += live
        live = live & (byte >= 0x80)
        if not live.any():
            break
    return value.view(np.int64), size, ~live


def _value_field(data: np.ndarray, kind: np.ndarray, ok: np.ndarray) -> tuple[Any, ...]:
    """Where the value's 4 bytes are and where the field holding them ends."""
    field = data[kind]
    size = data[kind + 1].astype(np.int64)
    simple = field == 0x15
    # A tensor: dtype DT_FLOAT, any shape (or none), 4 bytes of tensor_content, nothing else.
    shaped = data[kind + 4] == 0x12
    shape_size = np.where(shaped, data[kind + 5].astype(np.int64) + 2, 0)
    content = kind + 4 + shape_size
    tensor = (field == 0x42) & (_view(data, "<u2")[kind + 2] == 0x0108)
    tensor &= (_view(data, "<u2")[content] == 0x0422) & (size == 8 + shape_size) & (size < 0x80)
    tensor &= ~shaped | (data[kind + 5] < 0x80)
    value_at = np.where(simple, kind + 1, content + 2)
    after = np.where(simple, kind + 5, kind + 2 + size)
    return value_at, after, simple, ok & (simple | tensor)


def _keys(data: np.ndarray, summary: np.ndarray, value_at: np.ndarray, end: np.ndarray,
          ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's key (its summary field, value blanked, first byte replaced by the key's
    length so that keys of different lengths differ) as uint64 words, and a hash of it.

    Keys are as many whole words wide as the block's widest needs (zero words add nothing
    to the hash, so a key hashes the same at any width).
    """
    width = end - summary
    ok = ok & (width <= _KEY_WIDTH)
    widest = int(np.max(np.where(ok, width, 0), initial=0))
    size = max(8, -(-widest // 8) * 8)
    keep, blank = _key_masks(size)
    # 1-D views with size-byte items: NumPy gathers these much faster than 2-D rows.
    rows = _view(data, f"V{size}")[summary].view(np.uint8).reshape(-1, size)
    rows &= keep[np.where(ok, width, 0)].view(np.uint8).reshape(-1, size)
    rows &= blank[np.where(ok, value_at - summary, 0)].view(np.uint8).reshape(-1, size)
    rows[:, 0] = np.where(ok, width, 0)
    keys = rows.view(np.uint64)
    return keys @ _HASH_FACTORS[: size // 8], keys, ok


# A scalars row (series_id, step, file_id, record_offset, value_index, wall_time, value):
# struct makes the tuples straight from packed rows, faster than zip() over columns.
_ROW = struct.Struct("<qqqqqdd")
_ROW_DTYPE = np.dtype([(name, "<i8") for name in ("series", "step", "file", "offset", "index")]
                      + [("wall_time", "<f8"), ("value", "<f8")])
# A block path row as packed: (series_id, step, record_offset, wall_time, value).  The file id
# is the same for a whole chunk and the value index is 0: SQLite binds two parameters fewer a
# row (executemany ~8% faster) and workers send 40 bytes a row instead of 56.
_PACKED = struct.Struct("<qqqdd")
_PACKED_DTYPE = np.dtype([("series", "<i8"), ("step", "<i8"), ("offset", "<i8"),
                          ("wall_time", "<f8"), ("value", "<f8")])


def pack_rows(series: np.ndarray, step: np.ndarray, offset: np.ndarray,
              wall_time: np.ndarray, value: np.ndarray) -> bytes:
    """Scalars rows of the block path packed, for :class:`PackedRows`."""
    table = np.empty(len(series), dtype=_PACKED_DTYPE)
    table["series"], table["step"], table["offset"] = series, step, offset
    table["wall_time"], table["value"] = wall_time, value
    return table.tobytes()


class PackedRows:
    """A chunk's scalar rows in record order, those of the block path still packed.

    Iterating makes the row tuples (ints and floats, as the general path makes them) one at
    a time, so each is consumed while fresh in the cache and no list of them is ever built;
    packed rows are also what workers send to the writer (bytes pickle cheaply).  Iterable
    any number of times.  A SQLite writer takes :meth:`general_rows` and the narrower
    :meth:`block_rows` instead.
    """

    __slots__ = ("_count", "_parts", "file_id")

    def __init__(self, tuples: list[tuple[Any, ...]], packed: list[tuple[int, bytes]],
                 file_id: int) -> None:
        """Args: the general path's row tuples, ``(position, packed bytes)`` pairs, each
        packed run belonging before the tuple at ``position``, and the rows' file id."""
        parts: list[list[tuple[Any, ...]] | bytes] = []
        done = 0
        for position, table in packed:
            if position > done:
                parts.append(tuples[done:position])
            parts.append(table)
            done = position
        if done < len(tuples):
            parts.append(tuples[done:])
        self._parts = parts
        self._count = len(tuples) + sum(len(table) for _, table in packed) // _PACKED.size
        self.file_id = file_id

    def with_store_ids(self, series_ids: Sequence[int], file_id: int) -> PackedRows:
        """The same rows with local series numbers mapped through ``series_ids`` and the
        file id set; packed runs are rewritten by NumPy, never unpacked here."""
        from converter.decode import with_store_ids

        lookup = np.asarray(series_ids, dtype=np.int64)
        parts: list[list[tuple[Any, ...]] | bytes] = []
        for part in self._parts:
            if isinstance(part, list):
                parts.append(with_store_ids(part, series_ids, file_id))
                continue
            table = np.frombuffer(part, dtype=_PACKED_DTYPE).copy()
            table["series"] = lookup[table["series"]]
            parts.append(table.tobytes())
        remapped = PackedRows.__new__(PackedRows)
        remapped._parts, remapped._count, remapped.file_id = parts, self._count, file_id
        return remapped

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return chain.from_iterable(
            part if isinstance(part, list) else self._whole_rows(part) for part in self._parts)

    def general_rows(self) -> list[tuple[Any, ...]]:
        """The rows the general path made (whole rows), in record order."""
        return [row for part in self._parts if isinstance(part, list) for row in part]

    def block_rows(self) -> Iterator[tuple[Any, ...]]:
        """The other rows, as ``(series_id, step, record_offset, wall_time, value)``."""
        return chain.from_iterable(
            _PACKED.iter_unpack(part) for part in self._parts if isinstance(part, bytes))

    def _whole_rows(self, part: bytes) -> Iterator[tuple[Any, ...]]:
        packed = np.frombuffer(part, dtype=_PACKED_DTYPE)
        table = np.zeros(len(packed), dtype=_ROW_DTYPE)
        for name in _PACKED_DTYPE.names or ():
            table[name] = packed[name]
        table["file"] = self.file_id
        return _ROW.iter_unpack(table.tobytes())


def values(block: Block, parsed: Parsed) -> np.ndarray:
    """The float32 value of every record, widened exactly to float64."""
    data = np.frombuffer(block.buf, dtype=np.uint8)
    return _view(data, "<f4")[np.where(parsed.ok, parsed.value_at, 0)].astype(np.float64)


class ScalarKeys:
    """Keys known to be scalars of a series, looked up for a whole block at once."""

    def __init__(self) -> None:
        """Start with no key known."""
        self._hashes = np.empty(0, dtype=np.uint64)  # sorted
        self._keys = np.empty((0, _WORDS), dtype=np.uint64)
        self._series = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._hashes)

    def lookup(self, parsed: Parsed) -> np.ndarray:
        """The series id of every record's key, -1 where unknown (or not the template)."""
        if not len(self._hashes):
            return np.full(len(parsed.ok), -1, dtype=np.int64)
        index = np.minimum(np.searchsorted(self._hashes, parsed.hashes), len(self._hashes) - 1)
        # Equal hashes are not enough: the keys themselves must be equal (the first byte
        # holds the width, so the words past a narrower block's width need no comparing).
        known = parsed.ok & (self._hashes[index] == parsed.hashes)
        known &= _equal(self._keys[:, : parsed.keys.shape[1]][index], parsed.keys)
        return np.where(known, self._series[index], -1)

    def add(self, parsed: Parsed, record: int, series_id: int) -> None:
        """Learn the key of ``parsed`` record ``record`` as a scalar of ``series_id``."""
        position = int(np.searchsorted(self._hashes, parsed.hashes[record]))
        self._hashes = np.insert(self._hashes, position, parsed.hashes[record])
        key = np.zeros(_WORDS, dtype=np.uint64)
        key[: parsed.keys.shape[1]] = parsed.keys[record]
        self._keys = np.insert(self._keys, position, key, axis=0)
        self._series = np.insert(self._series, position, series_id)

    def same_key(self, parsed: Parsed, record: int, after: int) -> np.ndarray:
        """Indices past ``after`` of the records whose key equals that of ``record``."""
        candidates = np.flatnonzero(parsed.hashes[after:] == parsed.hashes[record]) + after
        equal = _equal(parsed.keys[candidates], parsed.keys[record][None, :])
        return candidates[equal & parsed.ok[candidates]]


def _equal(keys: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Row-wise equality of two arrays of keys (column by column: faster than ``all(axis=1)``)."""
    equal = keys[:, 0] == others[:, 0]
    for word in range(1, keys.shape[1]):
        equal &= keys[:, word] == others[:, word]
    return equal
