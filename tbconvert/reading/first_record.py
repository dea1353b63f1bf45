"""A file's first records: the first identifies an event file across renames and tells a
replaced file from a grown one (``head_digest``, stored with the file's state, design §7); the
first few tell which writer made it (``first_tags``, design §3)."""

from __future__ import annotations

import hashlib
import io
from itertools import islice
from typing import BinaryIO

from tbconvert.reading.events import UnparseableEvent, parse_event
from tbconvert.reading.records import RecordReader, open_event_file, record_in

_HEAD_BLOCK = 4 << 10

__all__ = [
    "digest_of",
    "first_record",
    "first_tags",
    "first_tags_in",
    "head_digest",
    "read_first_record",
]


def read_first_record(fileobj: BinaryIO) -> bytes | None:
    """Return the payload of the valid record at offset 0, without scanning past it.

    Args:
        fileobj: A binary file open for reading; its position is restored afterwards.

    Returns:
        The payload, or None when the file is empty, torn, or its first record is damaged.
    """
    here = fileobj.tell()
    try:
        # A small block: sniffing the first record of many files must not read 8 MiB of each
        # (nor fetch more than a few KiB of a remote one); a longer record is read whole.
        return RecordReader(fileobj, 0, block_size=_HEAD_BLOCK).record_at(0)
    finally:
        fileobj.seek(here)


def first_record(data: bytes) -> bytes | None:
    """What ``read_first_record`` reads from a file that begins with ``data``, when ``data``
    holds the first record whole; None otherwise (a batch of small files holds them whole)."""
    return record_in(data, 0)


def head_digest(fileobj: BinaryIO) -> str | None:
    """sha256 (hex) of the first record's payload, which identifies a file across renames
    and tells a replaced file from a grown one; None when it has no valid first record."""
    return digest_of(read_first_record(fileobj))


def digest_of(head: bytes | None) -> str | None:
    """``head_digest`` of a file whose first record's payload is ``head``."""
    return hashlib.sha256(head).hexdigest() if head is not None else None


def first_tags(path: str, size: int | None = None, records: int = 8) -> tuple[str, ...]:
    """The tags of the summary values in a file's first ``records`` records, in order: what
    a writer wrote first, read without reading the file (empty when it has none yet, or the
    file cannot be read)."""
    try:
        with open_event_file(path, size) as fileobj:
            return _tags(fileobj, records)
    except OSError:
        return ()


def first_tags_in(head: bytes, records: int = 8) -> tuple[str, ...]:
    """:func:`first_tags` of a file that begins with ``head`` (records cut off at its end
    are not read)."""
    return _tags(io.BytesIO(head), records)


def _tags(fileobj: BinaryIO, records: int) -> tuple[str, ...]:
    tags: list[str] = []
    reader = RecordReader(fileobj, 0, block_size=_HEAD_BLOCK)
    for _offset, payload in islice(reader, records):
        try:
            event, _lossy = parse_event(payload)
        except UnparseableEvent:
            continue
        tags.extend(value.tag for value in event.summary.value)
    return tuple(tags)
