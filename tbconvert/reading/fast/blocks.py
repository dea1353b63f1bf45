"""Framing and checksums of a whole read buffer at once, for the common case of undamaged data.

Checking records one by one costs several Python calls per record (unpack the header, slice
the payload, two CRC calls, compare), about 1 us; here the framing walk is the only per-record
Python step, and every length and payload checksum of the buffer is checked by one C call.

The check relies on the linearity of CRC-32C.  Let ``g`` be the CRC register with initial
value 0 and no final XOR; for any message ``m``, ``g(m || le32(g(m))) == 0``, and ``g`` of a
concatenation is 0 when every part's is.  TFRecord stores ``crc(m) = ~g(m with its first 4
bytes inverted)`` (the usual initial value 0xFFFFFFFF is the same as inverting the first 4
bytes), masked.  So in a copy of the buffer the first 4 bytes of every length and payload are
inverted and every stored checksum is replaced by its unmasked, inverted value; then ``g`` of
the copy is 0 when all records are intact (payloads under 4 bytes are checked one by one and
blanked).  Otherwise the reader checks shorter stretches, and the per-record reader finds the
damage.  Two damaged records could in principle cancel out (probability 2**-32, the same as
one damaged record passing its own CRC).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from itertools import pairwise

import google_crc32c
import numpy as np

from tbconvert.reading.crc import byte_view, masked_crc32c, unmask_array

_ALL_ONES = np.uint32(0xFFFFFFFF)
_U64 = struct.Struct("<Q")
# Header (length, length CRC) plus payload CRC.
_OVERHEAD = 16
# Records followed one by one between guesses (doubling while guesses fail), records per
# guess (doubling while guesses hold), the longest cycle of record sizes looked for, and
# the records it must have held for.
_STEP_MIN, _STEP_MAX = 64, 8192
_GUESS_MIN, _GUESS_MAX = 256, 1 << 16
_CYCLE_MAX, _CYCLE_SEEN = 256, 48


@dataclass(frozen=True)
class Block:
    """Consecutive records of one buffer whose framing and checksums verified.

    Attributes:
        buf: The read buffer holding them.
        base: File offset of ``buf[0]``.
        starts: Buffer index of each record's header (int64, increasing).
        lengths: Payload length of each record (int64).
    """

    buf: bytes
    base: int
    starts: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def payload(self, k: int) -> bytes:
        """The payload of record ``k``."""
        i = int(self.starts[k]) + 12
        return self.buf[i : i + int(self.lengths[k])]

    def pairs(self) -> list[tuple[int, bytes]]:
        """``(record_offset, payload)`` for every record, as the per-record reader yields."""
        buf, base = self.buf, self.base
        return [
            (base + i, buf[i + 12 : i + 12 + n])
            for i, n in zip(self.starts.tolist(), self.lengths.tolist(), strict=True)
        ]


def walk(buf: bytes, i: int) -> tuple[np.ndarray, int]:
    """Follow the length fields from ``buf[i]``: the header index of every whole record.

    Nothing is checked here (``verify`` does it for all records together).  Record sizes
    in a log repeat with the cycle of tags a training loop writes, so once a cycle is seen,
    the next stretch of records is guessed to repeat it and the guess is checked for all of
    them at once: the guessed starts are exactly those the length fields lead to, up to the
    first record whose length differs.  Elsewhere the lengths are followed one by one.

    Returns:
        The header indices (int64) of the records lying wholly in ``buf``, and the index
        just past the last of them.
    """
    last = len(buf) - _OVERHEAD
    found: list[np.ndarray] = []
    run, guess = _STEP_MIN, _GUESS_MIN
    while i <= last:
        cycle = _cycle(found[-1], i) if found else None
        if cycle is not None:
            starts, i = _follow(buf, i, cycle, guess)
            found.append(starts)
            if len(starts) >= _GUESS_MIN:
                run, guess = _STEP_MIN, min(2 * guess, _GUESS_MAX)
                continue
            guess = _GUESS_MIN
        starts, i = _step(buf, i, run)
        found.append(starts)
        run = min(2 * run, _STEP_MAX)  # lengths that do not repeat: guess less often
    starts = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    if i > len(buf):  # the last record runs past the buffer
        i, starts = int(starts[-1]), starts[:-1]
    return starts, i


def _step(buf: bytes, i: int, count: int, end: int | None = None) -> tuple[np.ndarray, int]:
    """Follow up to ``count`` length fields one by one, of records starting before ``end``
    (default: the end of ``buf``) less a header and footer."""
    starts = array("q")
    append = starts.append
    unpack = _U64.unpack_from
    last = (len(buf) if end is None else end) - _OVERHEAD
    while i <= last and len(starts) < count:
        append(i)
        i += unpack(buf, i)[0] + _OVERHEAD
    return np.frombuffer(starts, dtype=np.int64), i


def _cycle(starts: np.ndarray, end: int) -> np.ndarray | None:
    """The sizes of the shortest cycle that the last records (ending at ``end``) repeat over
    at least ``_CYCLE_SEEN`` records and twice, or None."""
    sizes = np.diff(np.append(starts[-_CYCLE_MAX * 2 :], end))
    n = len(sizes)
    repeats = np.flatnonzero(sizes[-2::-1][: n // 2] == sizes[-1]) + 1
    for period in repeats[:8].tolist():
        seen = max(2 * period, _CYCLE_SEEN)
        if seen <= n and np.array_equal(sizes[n - seen + period :], sizes[n - seen : n - period]):
            return sizes[n - period :]
    return None


def _follow(buf: bytes, i: int, cycle: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """Guess that the next ``count`` records repeat ``cycle``; keep the guess up to the first
    record whose length field disagrees, and return those starts and the next one."""
    within = np.cumsum(cycle) - cycle  # each record's start within one cycle
    turn, place = divmod(np.arange(count), len(cycle))
    starts = i + turn * int(cycle.sum()) + within[place]
    starts = starts[starts <= len(buf) - _OVERHEAD]
    lengths = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))[starts]
    wrong = np.flatnonzero(starts[:-1] + _OVERHEAD + lengths[:-1].astype(np.int64) != starts[1:])
    kept = int(wrong[0]) + 1 if len(wrong) else len(starts)
    return starts[:kept], int(starts[kept - 1]) + _OVERHEAD + int(lengths[kept - 1])


def walk_files(buf: bytes, bases: list[int]) -> tuple[np.ndarray, list[int]]:
    """Follow the length fields of small files laid end to end in ``buf``, file ``k`` from
    ``bases[k]`` to the next base (the last to the end of ``buf``).

    Files of a sweep repeat one another's record sizes (same tags, same steps), so a file as
    long as one already walked is guessed to lie like it, and all guesses are checked at once:
    a guess stands only if each guessed record's length field leads to the next guessed
    record and the last one's to the file's end, which is exactly what following the lengths
    finds.  A file whose guess fails is walked.  Nothing else is checked.

    Returns:
        The header index of every record, file after file, and each file's number of records
        (-1 for a file whose records do not end exactly at its end: none of them listed).
    """
    bounds = [*bases, len(buf)]
    laid: dict[int, np.ndarray] = {}  # file length -> its records' starts from its base
    pieces: list[np.ndarray] = []
    counts: list[int] = []
    guessed: list[int] = []
    for k, (base, limit) in enumerate(pairwise(bounds)):
        like = laid.get(limit - base)
        if like is not None:
            pieces.append(like + base)
            counts.append(len(like))
            guessed.append(k)
            continue
        starts, count = _walk_file(buf, base, limit)
        if count > 0:
            laid[limit - base] = starts - base
        pieces.append(starts)
        counts.append(count)
    if guessed:
        starts = np.concatenate([pieces[k] for k in guessed])
        sizes = np.array([counts[k] for k in guessed])
        lasts = np.cumsum(sizes) - 1
        following = np.empty_like(starts)
        following[:-1] = starts[1:]
        following[lasts] = [bounds[k + 1] for k in guessed]
        wrong = starts + _OVERHEAD + lengths_at(buf, starts) != following
        if wrong.any():
            failed = np.flatnonzero(np.logical_or.reduceat(wrong, lasts - sizes + 1))
            for k in (guessed[n] for n in failed.tolist()):
                pieces[k], counts[k] = _walk_file(buf, bounds[k], bounds[k + 1])
    starts = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
    return starts, counts


def _walk_file(buf: bytes, base: int, limit: int) -> tuple[np.ndarray, int]:
    # One by one, not walk(): the sizes of records do not repeat within a small file long
    # enough for its guesses to pay.
    starts, end = _step(buf, base, limit, limit)
    if end != limit:
        return np.empty(0, dtype=np.int64), -1
    return starts, len(starts)


def lengths_at(buf: bytes, starts: np.ndarray) -> np.ndarray:
    """The payload lengths stored in the headers at ``starts``."""
    view = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    lengths: np.ndarray = view[starts].astype(np.int64)
    return lengths


def verify(buf: bytes, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether every record at ``starts`` has a valid length and payload checksum.

    Records must be consecutive, each starting where the previous one ends.
    """
    if not len(starts):
        return False
    first = int(starts[0])
    size = int(starts[-1] + lengths[-1]) + _OVERHEAD - first
    copy = np.frombuffer(buf, dtype=np.uint8, count=size, offset=first).copy()
    header = starts - first
    footer = header + 12 + lengths
    short = int(lengths.min()) < 4
    if short and not _blank_short(buf, first, copy, header, lengths):
        return False
    # The length, its checksum and the payload's first 4 bytes lie in 16 bytes: one gather.
    heads = byte_view(copy, "V16")
    words = heads[header].view("<u4").reshape(-1, 4)
    words[:, 0] ^= _ALL_ONES
    words[:, 2] = ~unmask_array(words[:, 2])
    if short:
        words[:, 3] ^= np.where(lengths < 4, 0, _ALL_ONES).astype(np.uint32)
    else:
        words[:, 3] ^= _ALL_ONES
    heads[header] = words.view("V16").ravel()
    if short:
        footer = footer[lengths >= 4]
    footers = byte_view(copy, "<u4")
    footers[footer] = ~unmask_array(footers[footer])
    return _register(copy) == 0


def _blank_short(
    buf: bytes, first: int, copy: np.ndarray, header: np.ndarray, lengths: np.ndarray
) -> bool:
    """Check payloads too short to invert 4 bytes of one by one, then blank them and their
    checksums in ``copy`` (zeros add nothing to ``g``).  False when one fails its check."""
    short = lengths < 4
    for start, length in zip((header[short] + 12).tolist(), lengths[short].tolist(), strict=True):
        stored = int(copy[start + length : start + length + 4].view("<u4")[0])
        if masked_crc32c(buf[first + start : first + start + length]) != stored:
            return False
        copy[start : start + length + 4] = 0
    return True


def _register(data: np.ndarray) -> int:
    """``g(data)``: the CRC-32C register from 0, without the final inversion."""
    try:
        # The C function reads any contiguous buffer without release, which arrays are.
        crc = google_crc32c.extend(0xFFFFFFFF, data)
    except TypeError:
        crc = google_crc32c.extend(0xFFFFFFFF, data.tobytes())
    return int(crc) ^ 0xFFFFFFFF
