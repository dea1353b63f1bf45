"""Where valid records may resume after damage: candidate header offsets in a buffer.

Only lengths below 2**40 (top three bytes zero) are candidates; where candidates are dense
(arrays of small integers), checking each in Python would crawl, so the length CRC of every
offset is then checked at once with NumPy, through per-byte CRC tables.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import google_crc32c

from tbconvert.reading.crc import unmask_array

if TYPE_CHECKING:
    import numpy as np

HEADER_SIZE = 12
_ZERO_HEADER = bytes(HEADER_SIZE)
_NONZERO = re.compile(b"[^\x00]")
# Resync candidates checked one by one in a buffer before switching to the vectorised check.
_DENSE_AFTER = 1024
_DENSE_CHUNK = 1 << 20


@dataclass(frozen=True)
class Damage:
    """A region of an event file skipped because its checksums failed (or its record was
    over the size cap).

    Attributes:
        offset: First byte of the damaged region.
        length: Bytes skipped (resume offset minus ``offset``).
        reason: Short human-readable cause, e.g. ``"bad length checksum"``.
    """

    offset: int
    length: int
    reason: str


def resync_candidates(buf: bytes, lo: int, hi: int) -> Iterator[int]:
    """Yield indices in ``[lo, hi]`` that may start a valid header, in increasing order.

    Only lengths below 2**40 (top three bytes zero) are candidates. They are found with
    ``bytes.find``, so garbage costs little Python work; where candidates are dense (arrays of small
    integers), checking each in Python would crawl, so the header CRC is then vectorised.
    """
    tried = 0
    q = buf.find(b"\x00\x00\x00", lo + 5)
    while 0 <= q - 5 <= hi:
        if buf[q - 5 : q + 7] == _ZERO_HEADER:
            # An all-zero header never verifies: hop over zero runs, not byte by byte.
            m = _NONZERO.search(buf, q + 7)
            q = buf.find(b"\x00\x00\x00", max(q + 1, (m.start() if m else len(buf)) - 6))
            continue
        tried += 1
        if tried > _DENSE_AFTER:
            yield from dense_candidates(buf, q - 5, hi)
            return
        yield q - 5
        q = buf.find(b"\x00\x00\x00", q + 1)


@functools.cache
def _crc_tables() -> np.ndarray:
    """Per-byte-position CRC-32C contributions: crc(8 bytes) is the XOR of one entry per byte."""
    import numpy as np

    zero = google_crc32c.value(bytes(8))
    tables = np.empty((8, 256), dtype=np.uint32)
    for k in range(8):
        for b in range(256):
            tables[k, b] = google_crc32c.value(bytes(k) + bytes([b]) + bytes(7 - k)) ^ zero
    tables[0] ^= zero  # CRC is affine, not linear: fold the constant into one table
    return tables


def dense_candidates(buf: bytes, lo: int, hi: int) -> Iterator[int]:
    """Yield indices in ``[lo, hi]`` whose 12 bytes form a header with a valid length CRC."""
    import numpy as np

    tables = _crc_tables()
    data = np.frombuffer(buf, dtype=np.uint8)
    for s in range(lo, hi + 1, _DENSE_CHUNK):
        n = min(_DENSE_CHUNK, hi + 1 - s)
        crc = tables[0][data[s : s + n]]
        for k in range(1, 8):
            crc ^= tables[k][data[s + k : s + k + n]]
        stored = np.ndarray((n,), dtype="<u4", buffer=buf, offset=s + 8, strides=(1,))
        hit = (crc == unmask_array(stored)) & (data[s + 5 : s + 5 + n] == 0)
        hit &= (data[s + 6 : s + 6 + n] == 0) & (data[s + 7 : s + 7 + n] == 0)
        for i in np.flatnonzero(hit):
            yield s + int(i)
