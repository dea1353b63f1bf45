"""The single-scalar template read from every record of a whole block at once, with NumPy.

Almost every record of a training log is an Event holding one scalar, and its bytes differ
from the previous record with the same tag only in wall time, step and value.  Parsing each
with protobuf and reading its fields in Python costs about 3 us per record; here the wire
format is read for all records of a :class:`~tbconvert.reading.fast.blocks.Block` (or of a
batch of small files laid end to end) together.  Accepted, field by field and with every
length ending exactly at the end of the payload (anything else takes the general path):

    09 <wall_time: 8>  [10 <step: varint of at most 9 bytes>]
    2a <S> 0a <V> 0a <T> <tag>   15 <value: 4>                          simple_value
                                 42 <L> 08 01 [12 <D> <shape>] 22 04 <value: 4>
                                                         DT_FLOAT tensor_content, any shape
                                 [4a <M> <metadata>]

with every length (S, V, T, L, D, M) a single byte (the headers are ``reading.wire``'s).
The bytes from ``2a`` to the end with the four value bytes blanked, the record's *key*, fix
everything but wall time, step and value: two records with equal keys parse to the same tag,
kind and metadata.  What a key means is never decided here: ``block_scalars`` and ``batch``
learn it from the general path.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from tbconvert.reading import wire
from tbconvert.reading.crc import byte_view
from tbconvert.reading.fast.blocks import Block

# Two-byte fields of the template as little-endian words.
_DTYPE_FLOAT = int.from_bytes(wire.DTYPE_FLOAT, "little")
_CONTENT_4 = int.from_bytes(wire.CONTENT_4, "little")

# Widest key in bytes; longer keys (tags of about 90+ characters) go the general way.
_KEY_WIDTH = 128
# A key as uint64 words, at its widest.
WORDS = _KEY_WIDTH // 8
# Every index the template reads lies within this many bytes of a record's start (the lengths
# are single bytes): records closer to the end of the buffer are left to the general path, so
# no index needs clipping.
REACH = 640
# One multiplier per word (the word's position times 2**64 over the golden ratio), so that
# equal words in different places of a key add different amounts to its hash.
_HASH_FACTORS = np.arange(1, WORDS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


@functools.cache
def key_masks(size: int) -> tuple[np.ndarray, np.ndarray]:
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
    keep, blank = key_masks(size)
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


def equal_keys(keys: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Row-wise equality of two arrays of keys (column by column: faster than ``all(axis=1)``)."""
    equal: np.ndarray = keys[:, 0] == others[:, 0]
    for word in range(1, keys.shape[1]):
        equal &= keys[:, word] == others[:, word]
    return equal
