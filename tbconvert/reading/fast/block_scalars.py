"""Single-scalar Events of a whole :class:`~tbconvert.reading.fast.blocks.Block` decoded at once.

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
from records the general path (``decoder.EventDecoder``) has decoded, after checking that
protobuf reads them as this module does (see :class:`BlockScalars`).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from google.protobuf.message import DecodeError

from tbconvert.reading import wire
from tbconvert.reading.crc import byte_view
from tbconvert.reading.events import Event
from tbconvert.reading.fast.blocks import Block
from tbconvert.reading.wire import DT_FLOAT
from tbconvert.rows import pack_rows

if TYPE_CHECKING:
    from tbconvert.reading.fast import GeneralPath

_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")
# Two-byte fields of the template as little-endian words.
_DTYPE_FLOAT = int.from_bytes(wire.DTYPE_FLOAT, "little")
_CONTENT_4 = int.from_bytes(wire.CONTENT_4, "little")

# Widest key in bytes; longer keys (tags of about 90+ characters) go the general way.
_KEY_WIDTH = 128
_WORDS = _KEY_WIDTH // 8
# Every index the template reads lies within this many bytes of a record's start (the lengths
# are single bytes): records closer to the end of the buffer are left to the general path, so
# no index needs clipping.
REACH = 640
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
    ok = (block.lengths >= 20) & (block.starts <= len(data) - REACH)
    start = np.where(ok, block.starts + 12, 0)
    end = start + block.lengths
    ok &= data[start] == wire.WALL_TIME
    wall_time = byte_view(data, "<f8")[start + 1]
    ok &= wall_time != 0  # proto3 omits 0.0; -0.0 would need Python's ordering of zeros
    has_step = ok & (data[start + 9] == wire.STEP)
    step, size, complete = _varint(data, start + 10, has_step)
    summary = np.where(has_step, start + 10 + size, start + 9)
    value = summary + 2
    tag = value + 2
    kind = tag + 2 + data[tag + 1]
    ok &= complete & (data[summary] == wire.SUMMARY)
    ok &= (data[value] == wire.VALUE) & (data[tag] == wire.TAG)
    ok &= (value + data[summary + 1] == end) & (tag + data[value + 1] == end)
    ok &= (data[summary + 1] | data[value + 1] | data[tag + 1]) < 0x80
    value_at, after, simple, ok = _value_field(data, kind, ok)
    metadata = after != end
    ok &= ~metadata | (
        (data[after] == wire.METADATA)
        & (data[after + 1] < 0x80)
        & (after + 2 + data[after + 1] == end)
    )
    hashes, keys, ok = _keys(data, summary, value_at, end, ok)
    return Parsed(ok, simple, wall_time, step, value_at, hashes, keys)


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
    simple = field == wire.SIMPLE_VALUE
    # A tensor: dtype DT_FLOAT, any shape (or none), 4 bytes of tensor_content, nothing else.
    shaped = data[kind + 4] == wire.SHAPE
    shape_size = np.where(shaped, data[kind + 5].astype(np.int64) + 2, 0)
    content = kind + 4 + shape_size
    tensor = (field == wire.TENSOR) & (byte_view(data, "<u2")[kind + 2] == _DTYPE_FLOAT)
    tensor &= (
        (byte_view(data, "<u2")[content] == _CONTENT_4) & (size == 8 + shape_size) & (size < 0x80)
    )
    tensor &= ~shaped | (data[kind + 5] < 0x80)
    value_at = np.where(simple, kind + 1, content + 2)
    after = np.where(simple, kind + 5, kind + 2 + size)
    return value_at, after, simple, ok & (simple | tensor)


def _keys(
    data: np.ndarray, summary: np.ndarray, value_at: np.ndarray, end: np.ndarray, ok: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    rows = byte_view(data, f"V{size}")[summary].view(np.uint8).reshape(-1, size)
    rows &= keep[np.where(ok, width, 0)].view(np.uint8).reshape(-1, size)
    rows &= blank[np.where(ok, value_at - summary, 0)].view(np.uint8).reshape(-1, size)
    rows[:, 0] = np.where(ok, width, 0)
    keys = rows.view(np.uint64)
    return keys @ _HASH_FACTORS[: size // 8], keys, ok


def values(block: Block, parsed: Parsed) -> np.ndarray:
    """The float32 value of every record, widened exactly to float64."""
    data = np.frombuffer(block.buf, dtype=np.uint8)
    numbers = byte_view(data, "<f4")[np.where(parsed.ok, parsed.value_at, 0)]
    # A signalling NaN widens to a quiet one, as struct's does on the general path; NumPy
    # would also print a RuntimeWarning for it.
    with np.errstate(invalid="ignore"):
        return numbers.astype(np.float64)


class ScalarKeys:
    """Keys known to be scalars of a series, looked up for a whole block at once.

    Keys learnt are appended to lists and sorted into the arrays only at the next look-up:
    a small file learns all its keys inside one block, and inserting into sorted arrays key
    by key cost more than reading its records (issue #14).
    """

    def __init__(self) -> None:
        """Start with no key known."""
        self._hashes = np.empty(0, dtype=np.uint64)  # sorted
        self._keys = np.empty((0, _WORDS), dtype=np.uint64)
        self._series = np.empty(0, dtype=np.int64)
        self._learnt: list[tuple[int, np.ndarray, int]] = []  # not in the arrays yet

    def __len__(self) -> int:
        return len(self._hashes) + len(self._learnt)

    def lookup(self, parsed: Parsed) -> np.ndarray:
        """The series id of every record's key, -1 where unknown (or not the template)."""
        if self._learnt:
            self._merge()
        if not len(self._hashes):
            return np.full(len(parsed.ok), -1, dtype=np.int64)
        index = np.minimum(np.searchsorted(self._hashes, parsed.hashes), len(self._hashes) - 1)
        # Equal hashes are not enough: the keys themselves must be equal (the first byte
        # holds the width, so the words past a narrower block's width need no comparing).
        known = parsed.ok & (self._hashes[index] == parsed.hashes)
        known &= equal_keys(self._keys[:, : parsed.keys.shape[1]][index], parsed.keys)
        return np.where(known, self._series[index], -1)

    def add(self, parsed: Parsed, record: int, series_id: int) -> None:
        """Learn the key of ``parsed`` record ``record`` as a scalar of ``series_id``."""
        key = np.zeros(_WORDS, dtype=np.uint64)
        key[: parsed.keys.shape[1]] = parsed.keys[record]
        self._learnt.append((int(parsed.hashes[record]), key, series_id))

    def _merge(self) -> None:
        hashes = np.concatenate(
            (self._hashes, np.array([h for h, _k, _s in self._learnt], dtype=np.uint64))
        )
        keys = np.concatenate((self._keys, np.stack([k for _h, k, _s in self._learnt])))
        series = np.concatenate(
            (self._series, np.array([s for _h, _k, s in self._learnt], dtype=np.int64))
        )
        self._learnt.clear()
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._keys, self._series = hashes[order], keys[order], series[order]


def equal_keys(keys: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Row-wise equality of two arrays of keys (column by column: faster than ``all(axis=1)``)."""
    equal: np.ndarray = keys[:, 0] == others[:, 0]
    for word in range(1, keys.shape[1]):
        equal &= keys[:, word] == others[:, word]
    return equal


class BlockScalars:
    """The block path of one file's decoder: records of known keys become packed rows with
    no protobuf parse; every other record goes through the general path, in record order.

    A key is learnt from a record only when the general path takes its own fast path for it
    (so every record with that key would become exactly the row the general path makes).
    """

    def __init__(self, general: GeneralPath) -> None:
        """Args: the file's general decoder, which decodes what this path cannot."""
        self._general = general
        self._keys = ScalarKeys()

    def feed(self, block: Block) -> None:
        """Decode every record of ``block`` into the general decoder's buffer."""
        parsed = parse(block)
        if not parsed.ok.any():
            self._general.feed_records(block.pairs())
            return
        series = self._keys.lookup(parsed)
        numbers = values(block, parsed)
        offsets = block.starts + block.base
        unknown = np.flatnonzero(series < 0)
        buffer = self._general.buffer
        before = buffer.scalar_tuples()
        if len(unknown):
            self._learn_unknown(block, parsed, series, unknown, offsets)
        self._pack(series, parsed, offsets, numbers, before)
        known = parsed.wall_time[series >= 0]
        if len(known):
            # As the general path: NaN wall times are kept in rows, left out of the span.
            low, high = float(np.fmin.reduce(known)), float(np.fmax.reduce(known))
            if low == low:
                self._general.stats.widen_span(low, high)

    def _learn_unknown(
        self,
        block: Block,
        parsed: Parsed,
        series: np.ndarray,
        unknown: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        """Decode the ``unknown`` records in order, learning keys: a record whose key is
        learnt by the time the loop reaches it gets its series in ``series`` (to be packed)."""
        # Records with equal keys share a number: a key learnt from its first record makes
        # the later ones known as the loop reaches them, with no search per key (which cost
        # more than a small file's records).  A key that fails to learn is not tried again.
        hashes = parsed.hashes[unknown]
        firsts, key_numbers = np.unique(hashes, return_index=True, return_inverse=True)[1:]
        key_numbers = key_numbers.reshape(-1)
        # Equal hashes are not enough: a record whose key differs from its hash's first
        # record's is left to the general path.
        keys = parsed.keys[unknown]
        learnable = parsed.ok[unknown] & equal_keys(keys, keys[firsts[key_numbers]])
        # The records are taken in stretches between the first learnable record of each key
        # (where a key is tried), as one loop over them would: in a stretch, a learnable
        # record of a key learnt before it is known (packed with the known records), every
        # other one waits for the general path, which decodes the waiting records, in order,
        # before a key is learnt from its first record and at the end.  A file's first block
        # is mostly records of keys it learns as it goes: visiting them one by one in Python
        # cost more than decoding them.
        learnt = np.full(len(firsts), -1, dtype=np.int64)  # key number -> series
        learnable_at = np.flatnonzero(learnable)
        tries = np.sort(learnable_at[np.unique(key_numbers[learnable_at], return_index=True)[1]])
        heads = block.starts[unknown] + 12
        ends = heads + block.lengths[unknown]
        places, buf = offsets[unknown], block.buf
        waiting: list[tuple[int, bytes]] = []
        start = 0
        for at in [*tries.tolist(), len(unknown)]:
            if at > start:
                numbers = learnt[key_numbers[start:at]]
                known = learnable[start:at] & (numbers >= 0)
                series[unknown[start:at][known]] = numbers[known]
                queued = np.flatnonzero(~known) + start
                bounds = zip(heads[queued].tolist(), ends[queued].tolist(), strict=True)
                waiting += zip(places[queued].tolist(), [buf[h:e] for h, e in bounds], strict=True)
            if at == len(unknown):
                break
            record = int(unknown[at])
            waiting.append((int(places[at]), block.payload(record)))
            self._general.feed_records(waiting)
            waiting.clear()
            series_of = self._learn(block, parsed, record)
            if series_of is not None:
                self._keys.add(parsed, record, series_of)
                learnt[key_numbers[at]] = series_of
            start = at + 1
        if waiting:
            self._general.feed_records(waiting)

    def _pack(
        self,
        series: np.ndarray,
        parsed: Parsed,
        offsets: np.ndarray,
        numbers: np.ndarray,
        before: int,
    ) -> None:
        """Pack the rows of the block's known records (``series >= 0``), each run of them
        placed before the first scalar tuple the general path made from a later record of
        the block (tuples from ``before`` on are this block's), so the rows keep record
        order."""
        known = np.flatnonzero(series >= 0)
        if not len(known):
            return
        buffer = self._general.buffer
        tuples = buffer.scalar_offsets(before)
        # Known records before each of the block's tuples, then after the last one.
        cuts = np.searchsorted(offsets[known], tuples).tolist() if tuples else []
        cuts.append(len(known))
        start = 0
        for position, cut in enumerate(cuts, start=before):
            if cut > start:
                first, last = int(known[start]), int(known[cut - 1])
                # Contiguous records (the common case) are packed from views, not copies.
                run: Any = (
                    slice(first, last + 1) if last - first == cut - start - 1 else known[start:cut]
                )
                packed = pack_rows(
                    series[run], parsed.step[run], offsets[run], parsed.wall_time[run], numbers[run]
                )
                buffer.add_packed(packed, cut - start, position)
                start = cut

    def _learn(self, block: Block, parsed: Parsed, record: int) -> int | None:
        """The series of ``record``'s key if the general path takes its fast path for it,
        which it then does for every record with the same key (same tag, kind, metadata)."""
        try:
            event = Event.FromString(block.payload(record))
        except DecodeError:
            return None
        summary_values = event.summary.value
        at = int(parsed.value_at[record])
        number = block.buf[at : at + 4]
        # Protobuf must read the record exactly as the block path does.
        if (
            len(summary_values) != 1
            or event.step != int(parsed.step[record])
            or _FLOAT64.pack(event.wall_time) != parsed.wall_time[record].tobytes()
        ):
            return None
        value = summary_values[0]
        kind = value.WhichOneof("value")
        if parsed.simple[record]:
            same = kind == "simple_value" and (
                _FLOAT64.pack(value.simple_value) == _FLOAT64.pack(_FLOAT32.unpack(number)[0])
            )
            return self._general.routing.scalar_series(value.tag, True) if same else None
        tensor = value.tensor
        same = kind == "tensor" and tensor.dtype == DT_FLOAT and tensor.tensor_content == number
        return self._general.routing.scalar_series(value.tag, False) if same else None
