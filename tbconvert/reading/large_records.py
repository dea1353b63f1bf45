"""Records larger than the read buffer: read as one bytes object of their own, or passed over
unread when they exceed the size cap.

A record read through the buffer costs its size several times over: the buffer grown to
hold it, the joined reads, then the payload sliced out of it.  One read of exactly its
payload is the only copy; a record over the cap is never read at all (issue #40).
"""

from __future__ import annotations

import gzip
import struct
from typing import BinaryIO

from tbconvert.reading.crc import masked_crc32c
from tbconvert.reading.resync import Damage

HEADER_SIZE = 12
FOOTER_SIZE = 4
_U32 = struct.Struct("<I")
# Far above any real summary (images, audio, graphs, embeddings are megabytes), and below
# what would take a machine down: the default of ``--max-record-size``.
MAX_RECORD_SIZE = 1 << 30
# The smallest cap allowed: files under 16 KiB are read in batches that do not check it, and
# no record under a megabyte is what the cap is for.
MIN_MAX_RECORD_SIZE = 1 << 20


def over_cap(length: int, cap: int) -> str:
    """Why a record of ``length`` payload bytes is skipped (the reason of its damage)."""
    return f"record of {length} bytes is over --max-record-size ({cap} bytes)"


def read_payload(
    fileobj: BinaryIO | gzip.GzipFile,
    start: int,
    length: int,
    buffered: memoryview,
    block: int,
) -> bytes | None:
    """The ``length`` bytes from file offset ``start`` as one bytes object, or None when the
    file ends first.  ``buffered`` holds the first of them, already read: the file is
    positioned just past it.

    A gzip stream cannot seek back cheaply (it decompresses again from its start), so it
    goes on from where it is, a block a read, and the pieces are joined; any other file is
    read again from ``start`` in one read that fills the one object.
    """
    if isinstance(fileobj, gzip.GzipFile):
        pieces: list[bytes | memoryview] = [buffered[:length]]
        have = len(pieces[0])
        while have < length:
            data = fileobj.read(min(block, length - have))
            if not data:
                return None
            pieces.append(data)
            have += len(data)
        return b"".join(pieces)
    fileobj.seek(start)
    data = fileobj.read(length)
    return data if len(data) == length else None


def skip_to(fileobj: BinaryIO | gzip.GzipFile, offset: int) -> bool:
    """Move the file to ``offset`` without keeping what lies before; False when it ends
    first (a gzip stream, whose size is not known beforehand)."""
    return bool(fileobj.seek(offset) == offset)


class LargeRecords:
    """The part of ``RecordReader`` that reads a record larger than its buffer alone, or
    skips it over the cap (the attributes are the reader's)."""

    _f: BinaryIO | gzip.GzipFile
    _buf: bytes
    _base: int
    _eof: bool
    _end: int | None
    _block: int
    _max_record: int
    _reason: str
    # A record read alone, which the reader yields next as a batch of its own.
    _alone: tuple[int, bytes] | None
    consumed: int
    torn: bool
    damage: list[Damage]

    def _ensure(self, offset: int, size: int) -> bool:
        raise NotImplementedError

    def _resync(self, bad: int) -> int | None:
        raise NotImplementedError

    def _large(self, pos: int, length: int) -> int | None:
        """Read the record at ``pos`` (its header checked) alone, or skip it unread when it
        is over the cap; return where to go on, or None (torn, or damage up to the end)."""
        end = pos + HEADER_SIZE + length + FOOTER_SIZE
        if self._end is not None and end > self._end:
            return self._torn_at(pos)
        start = pos + HEADER_SIZE
        if length > self._max_record:
            if not skip_to(self._f, end):
                return self._torn_at(pos)
            self._buf, self._base, self._eof = b"", end, False
            self.damage.append(Damage(pos, end - pos, over_cap(length, self._max_record)))
            self.consumed = end
            return end
        buffered = memoryview(self._buf)[start - self._base :]  # no copy: only gzip reads it
        payload = read_payload(self._f, start, length, buffered, self._block)
        self._buf, self._base, self._eof = b"", start + length, False
        if payload is None or not self._ensure(start + length, FOOTER_SIZE):
            return self._torn_at(pos)
        if masked_crc32c(payload) != _U32.unpack_from(self._buf, 0)[0]:
            self._reason = "bad data checksum"
            self._f.seek(pos + 1)
            self._buf, self._base = b"", pos + 1
            return self._resync(pos)
        self._alone = (pos, payload)
        self.consumed = end
        return end

    def _torn_at(self, pos: int) -> int | None:
        """The data ends inside the record at ``pos``: stop there, to read it on a later run."""
        self.torn = True
        self.consumed = pos
        return None

    def _take_alone(self) -> tuple[int, bytes]:
        """The record read alone, forgotten here (the caller's is then the only reference)."""
        alone, self._alone = self._alone, None
        assert alone is not None
        return alone
