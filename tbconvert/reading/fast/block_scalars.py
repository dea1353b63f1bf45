"""Single-scalar Events of a whole :class:`~tbconvert.reading.fast.blocks.Block` decoded at once.

The template of every record of the block is read with NumPy (``block_template``); the
records whose key is known to be a scalar of a series in this file become packed rows with no
protobuf parse, and every other record goes through the general path, in record order.  Keys
are learnt per file, from records the general path (``decoder.EventDecoder``) has just decoded,
after checking that protobuf reads them as the template does (see :class:`BlockScalars`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import numpy as np
from google.protobuf.message import DecodeError

from tbconvert.reading import wire
from tbconvert.reading.events import Event
from tbconvert.reading.fast.block_template import WORDS, Parsed, equal_keys, parse, values
from tbconvert.reading.fast.blocks import Block
from tbconvert.rows import pack_rows

if TYPE_CHECKING:
    from tbconvert.reading.fast import GeneralPath

_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")


class ScalarKeys:
    """Keys known to be scalars of a series, looked up for a whole block at once.

    Keys learnt are appended to lists and sorted into the arrays only at the next look-up:
    a small file learns all its keys inside one block, and inserting into sorted arrays key
    by key cost more than reading its records (issue #14).
    """

    def __init__(self) -> None:
        """Start with no key known."""
        self._hashes = np.empty(0, dtype=np.uint64)  # sorted
        self._keys = np.empty((0, WORDS), dtype=np.uint64)
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
        key = np.zeros(WORDS, dtype=np.uint64)
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
        same = (
            kind == "tensor" and tensor.dtype == wire.DT_FLOAT and tensor.tensor_content == number
        )
        return self._general.routing.scalar_series(value.tag, False) if same else None
