"""TFRecord framing of TensorBoard event files: streaming reads, torn tails and damage recovery.

Each record is ``u64 length | u32 masked_crc32c(length) | payload | u32 masked_crc32c(payload)``,
little-endian, with no file header or footer. A file still being written may end inside a record
(a *torn* tail, retried on the next run); bytes whose checksums fail are *damage*, skipped by
scanning forward to the next offset where a whole valid record starts.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import google_crc32c

from tbconvert.reading.crc import MASK_DELTA, U32_MASK, masked_crc32c
from tbconvert.reading.large_records import FOOTER_SIZE, HEADER_SIZE, MAX_RECORD_SIZE, LargeRecords
from tbconvert.reading.remote import open_binary
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.reading.resync import Damage, resync_candidates
from tbconvert.reading.tuning import DEFAULT_TUNING, ReadTuning

if TYPE_CHECKING:
    from tbconvert.reading.fast.blocks import Block

__all__ = [
    "MAX_RECORD_SIZE",
    "Damage",
    "RecordReader",
    "masked_crc32c",
    "open_event_file",
    "record_in",
]

_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
# Lengths whose header CRC is known good; bounded so garbage cannot grow it without limit.
_LENGTH_CACHE_MAX = 4096


def record_in(buf: bytes, i: int = 0) -> bytes | None:
    """The payload of the record whose header is at ``buf[i]``, when it lies wholly in
    ``buf`` and both its checksums verify; None otherwise (no resync, no reading)."""
    start = i + HEADER_SIZE
    if start > len(buf):
        return None
    length, stored = _HEADER.unpack_from(buf, i)
    end = start + length
    if end + FOOTER_SIZE > len(buf) or masked_crc32c(buf[i : i + 8]) != stored:
        return None
    payload = buf[start:end]
    return payload if masked_crc32c(payload) == _U32.unpack_from(buf, end)[0] else None


def _stream_size(fileobj: BinaryIO | gzip.GzipFile) -> int | None:
    """Current size of ``fileobj``, or None for a gzip stream whose decompressed size is unknown."""
    if isinstance(fileobj, gzip.GzipFile):
        return None
    try:
        return os.fstat(fileobj.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        here = fileobj.tell()
        size = fileobj.seek(0, io.SEEK_END)
        fileobj.seek(here)
        return size


class RecordReader(LargeRecords):
    """Iterate the records of one open binary file from a start offset.

    Memory stays bounded: the file is read in ``block_size`` blocks and only the unconsumed tail is
    kept; a record larger than a block is read alone, as one bytes object, and one over
    ``max_record`` bytes is skipped unread, as damage. Nothing at or past ``end`` is read.

    Attributes:
        consumed: Offset where the next read should resume: just past the last record yielded, or
            past skipped damage. Kept current during iteration.
        torn: True when the data ends inside a record (a live file mid-flush).
        damage: Every damaged region skipped, in file order.
        records: Number of records yielded.
    """

    def __init__(
        self,
        fileobj: BinaryIO | gzip.GzipFile,
        start: int = 0,
        *,
        end: int | None = None,
        block_size: int = 8 << 20,
        max_record: int = MAX_RECORD_SIZE,
        tuning: ReadTuning = DEFAULT_TUNING,
    ) -> None:
        """Prepare to read ``fileobj`` from ``start``.

        Args:
            fileobj: A binary file open for reading, positioned anywhere.
            start: Offset of the first record to read (a previous run's ``consumed``).
            end: Size snapshot taken by the caller; bytes at or past it are left for a later run.
                Defaults to the current size. Ignored for a ``gzip.GzipFile``, whose on-disk size
                says nothing about decompressed offsets; such a stream is read to EOF.
            block_size: Bytes per read.
            max_record: Payload bytes above which a record is skipped without being read.
            tuning: When a stretch of records is checked whole (``ReadTuning.whole_min_*``).
        """
        self._f = fileobj
        self._end = None if isinstance(fileobj, gzip.GzipFile) else end
        if self._end is None:
            self._end = _stream_size(fileobj)
        self._block = max(int(block_size), HEADER_SIZE + FOOTER_SIZE)
        self._max_record = max_record
        self._tuning = tuning
        self._alone: tuple[int, bytes] | None = None  # a record read alone, to yield next
        self._buf = b""
        self._base = start  # file offset of _buf[0]
        self._eof = False
        self._lengths: dict[int, int] = {}  # length -> its masked CRC, known good
        self._reason = ""
        self.consumed = start
        self.torn = False
        self.damage: list[Damage] = []
        self.records = 0

    def _ensure(self, offset: int, size: int) -> bool:
        """Make ``_buf`` hold ``size`` bytes from ``offset``; when it must read, drop what precedes.

        Returns:
            False when the stream (or ``end``) runs out first.
        """
        rel = offset - self._base
        if len(self._buf) - rel >= size:
            return True
        buf = self._buf[rel:]
        self._base = offset
        chunks = [buf]
        have = len(buf)
        end = self._end
        while have < size and not self._eof:
            if end is None:
                # Never ask a stream of unknown size for more than a block: a corrupt length must
                # not turn into a giant read() allocation.
                want = self._block
            else:
                want = min(max(size - have, self._block), end - offset - have)
            data = self._f.read(want) if want > 0 else b""
            if not data:
                self._eof = True
                break
            chunks.append(data)
            have += len(data)
        self._buf = b"".join(chunks) if len(chunks) > 1 else buf
        return have >= size

    def _header_ok(self, offset: int) -> tuple[int, bool]:
        """Check the buffered header at ``offset``; returns (length, whether its CRC verifies)."""
        i = offset - self._base
        length, stored = _HEADER.unpack_from(self._buf, i)
        if self._lengths.get(length) == stored:
            return length, True
        if masked_crc32c(self._buf[i : i + 8]) != stored:
            return length, False
        if length > self._max_record:  # the hot loop must stop at it: never cached
            return length, True
        if len(self._lengths) >= _LENGTH_CACHE_MAX:
            self._lengths.clear()
        self._lengths[length] = stored
        return length, True

    def _data_ok(self, offset: int, length: int) -> bool:
        """Check the payload CRC of the wholly buffered record at ``offset``."""
        i = offset - self._base + HEADER_SIZE
        j = i + length
        stored: int = _U32.unpack_from(self._buf, j)[0]
        return masked_crc32c(self._buf[i:j]) == stored

    def _fits(self, offset: int, length: int) -> bool:
        """Whether a record of ``length`` at ``offset`` ends by ``end``; buffers it whole if so."""
        total = HEADER_SIZE + length + FOOTER_SIZE
        if self._end is not None and offset + total > self._end:
            return False
        return self._ensure(offset, total)

    def _damaged(self, bad: int, resume: int) -> None:
        """Record damage from ``bad`` up to ``resume``."""
        self.damage.append(Damage(bad, resume - bad, self._reason))

    def _resync(self, bad: int) -> int | None:
        """Find where valid records resume after damage at ``bad``; None means stop reading."""
        p = bad + 1
        while self._ensure(p, HEADER_SIZE):
            buf, base = self._buf, self._base
            last = len(buf) - HEADER_SIZE  # last index with a whole header buffered
            resume = base + last + 1
            for i in resync_candidates(buf, p - base, last):
                cand = base + i
                length, ok = self._header_ok(cand)
                if not ok:
                    continue
                if not self._fits(cand, length):
                    self._damaged(bad, cand)
                    self.torn = True
                    self.consumed = cand
                    return None
                if self._data_ok(cand, length):
                    self._damaged(bad, cand)
                    return cand
                # _fits() may have moved the buffer: rescan from the next byte.
                resume = cand + 1
                break
            p = resume
        end = self._end if self._end is not None else self._base + len(self._buf)
        self._damaged(bad, end)
        self.consumed = end
        return None

    def resume_at(self, pos: int) -> int | None:
        """Handle whatever stopped the fast loop at ``pos``; return where to go on, or None."""
        if not self._ensure(pos, HEADER_SIZE):
            self.torn = len(self._buf) > pos - self._base
            self.consumed = pos
            return None
        length, ok = self._header_ok(pos)
        if ok and length > min(self._block, self._max_record):
            return self._large(pos, length)
        if ok:
            if not self._fits(pos, length):
                self.torn = True
                self.consumed = pos
                return None
            if self._data_ok(pos, length):
                return pos
            self._reason = "bad data checksum"
        else:
            self._reason = "bad length checksum"
        return self._resync(pos)

    def record_at(self, offset: int) -> bytes | None:
        """The payload of the valid record at ``offset``, or None (torn, damaged, past the
        end); reads nothing beyond it and leaves the iteration state alone."""
        if not self._buf and offset == self._base:
            # Nothing read yet: the file may be positioned anywhere (iterating seeks too).
            self._f.seek(offset)
        if not self._ensure(offset, HEADER_SIZE):
            return None
        length, ok = self._header_ok(offset)
        if ok and length > min(self._block, self._max_record):
            # Read alone, or not at all over the cap, as iterating would.
            return self._take_alone()[1] if self._large(offset, length) and self._alone else None
        if not ok or not self._fits(offset, length) or not self._data_ok(offset, length):
            return None
        start = offset - self._base + HEADER_SIZE
        return self._buf[start : start + length]

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        """Yield ``(record_offset, payload)`` for each valid record, updating the attributes.

        Yields:
            The offset of each record's header and its payload bytes.
        """
        for records in self.record_lists(1):
            yield from records

    def record_lists(self, size: int = 2048) -> Iterator[list[tuple[int, bytes]]]:
        """Yield lists of up to ``size`` ``(record_offset, payload)`` pairs.

        The attributes (``consumed``, ``records``) describe the stream just past the last record
        of the list when it is yielded; the per-record bookkeeping is what the lists save.
        """
        return self._read(size, whole=False)

    def blocks(self, size: int = 8192) -> Iterator[Block | list[tuple[int, bytes]]]:
        """Like :meth:`record_lists`, but where a whole buffer of records verifies at once, yield
        :class:`~tbconvert.reading.fast.blocks.Block` s of up to ``size`` records instead of payload
        pairs.
        """
        return self._read(size, whole=True)

    def _read(self, size: int, whole: bool) -> Iterator[Any]:
        self._f.seek(self._base)
        pos: int | None = self._base
        # Past damage, the rest of that buffer is read record by record: trying the whole
        # rest again after every damaged record would cost quadratic time on bad files.
        checked_until = -1
        while pos is not None:
            buf, base = self._buf, self._base
            i = pos - base
            if whole and pos >= checked_until:
                i, damaged = yield from self._verified(buf, base, i, size)
                if damaged:
                    checked_until = base + len(buf)
            i = yield from self._checked(buf, base, i, size)
            pos = self.resume_at(base + i)
            if self._alone is not None:
                # Yielded without a name in this frame: the generator must not hold it.
                self.records += 1
                yield [self._take_alone()]

    def _verified(
        self, buf: bytes, base: int, i: int, size: int
    ) -> Generator[Any, None, tuple[int, bool]]:
        """Yield the buffer's records from ``i`` as Blocks, as far as they verify (halving
        the stretch until it does); return where the per-record reader must go on, and
        whether it will meet a bad record there."""
        if len(buf) - i < self._tuning.whole_min_bytes:
            return i, False
        from tbconvert.reading.fast import blocks  # NumPy: not for logdirs of small files only

        starts, end = blocks.walk(buf, i)
        if len(starts) < self._tuning.whole_min_records:
            return i, False
        lengths = blocks.lengths_at(buf, starts)
        over = (lengths > self._max_record).nonzero()[0]
        if len(over):  # a record over the cap: the per-record reader skips it
            first = int(over[0])
            starts, lengths, end = starts[:first], lengths[:first], int(starts[first])
        count = len(starts)
        while count >= self._tuning.whole_min_records and not blocks.verify(
            buf, starts[:count], lengths[:count]
        ):
            count //= 2
        damaged = count < len(starts)
        if count < self._tuning.whole_min_records:
            return i, damaged
        if damaged:
            starts, lengths, end = starts[:count], lengths[:count], int(starts[count])
        for k in range(0, len(starts), size):
            piece = starts[k : k + size]
            self.consumed = base + (int(starts[k + size]) if k + size < len(starts) else end)
            self.records += len(piece)
            yield blocks.Block(buf, base, piece, lengths[k : k + size])
        return end, damaged

    def _checked(self, buf: bytes, base: int, i: int, size: int) -> Generator[Any, None, int]:
        """Yield lists of records from ``buf[i]``, checking each; return where it stopped."""
        hdr = _HEADER.unpack_from
        u32 = _U32.unpack_from
        crc = google_crc32c.value
        lengths = self._lengths
        cap = self._max_record
        delta, mask = MASK_DELTA, U32_MASK
        listed: list[tuple[int, bytes]] = []
        append = listed.append
        n = len(buf)
        # Hot loop: it only handles success; resume_at() re-examines whatever makes it stop.
        # The masking is crc.mask() written inline (a call per record costs measurably).
        while i + 12 <= n:
            length, stored = hdr(buf, i)
            if lengths.get(length) != stored:
                c = crc(buf[i : i + 8])
                if (((c >> 15) | (c << 17)) + delta) & mask != stored or length > cap:
                    break
                if len(lengths) >= _LENGTH_CACHE_MAX:
                    lengths.clear()
                lengths[length] = stored
            j = i + 12 + length
            if j + 4 > n:
                break
            payload = buf[i + 12 : j]
            c = crc(payload)
            if (((c >> 15) | (c << 17)) + delta) & mask != u32(buf, j)[0]:
                break
            append((base + i, payload))
            i = j + 4
            if len(listed) >= size:
                self.consumed = base + i
                self.records += len(listed)
                yield listed
                listed = []
                append = listed.append
        self.consumed = max(self.consumed, base + i)
        self.records += len(listed)
        if listed:
            yield listed
        return i


def open_event_file(
    path: str, size: int | None = None, remote: RemoteReads | None = None
) -> BinaryIO:
    """Open an event file for binary reading, decompressing gzip (magic ``1f 8b``) transparently.

    Args:
        path: File to open: a local path, or a URL read by ranges (``remote``).
        size: The size a remote object was listed with (saves asking for it).
        remote: How this pass reads remote objects (options, heads read once).

    Returns:
        A readable binary file object; a ``gzip.GzipFile`` for compressed files.
    """
    raw = open_binary(path, size, remote)
    if raw.read(2) != b"\x1f\x8b":
        raw.seek(0)
        return raw
    raw.seek(0)
    stream = gzip.GzipFile(fileobj=raw, mode="rb")
    stream.myfileobj = raw  # type: ignore[assignment]  # closed with it, as if it opened the path
    return stream  # type: ignore[return-value]
