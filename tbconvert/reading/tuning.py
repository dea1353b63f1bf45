"""The reading side's speed thresholds: which path a file takes and how records are batched.

None of them changes a row: every path they choose between gives the same rows (the
equivalence tests and ``tests/safety/test_oracle.py`` hold each to that).  They are fields
of one frozen value carried by :class:`~tbconvert.reading.chunks.ReadSettings`, so a
``--jobs`` worker reads with the tuning its conversion was given, and a test passes, say,
``ReadTuning(by_record_bytes=0)`` rather than changing a module's constant.  Why each default
is what it is: docs/performance.md#read-tuning.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BY_RECORD_BYTES", "DEFAULT_TUNING", "HUGE_RECORD_BYTES", "ReadTuning"]

BY_RECORD_BYTES = 16 << 10
HUGE_RECORD_BYTES = 16 << 20


@dataclass(frozen=True)
class ReadTuning:
    """Thresholds of the reading side (bytes unless named otherwise).

    Attributes:
        by_record_bytes: A file with fewer bytes to read is decoded record by record, and
            read in a batch of such files (``small_files``): the block path would learn every
            key of the file first, which costs more than it saves on a few hundred records.
            At 0 every file takes the block path.
        batch_bytes: A batch of small files ends once it holds this many bytes.
        first_batch_files, batch_files: ...or this many files: the first batch, doubling
            with each batch up to ``batch_files``.
        whole_min_bytes, whole_min_records: A stretch of a buffer is checked and split in
            one NumPy pass only when it holds at least this many bytes and records: below
            them, checking records one by one costs less than NumPy's fixed cost per call.
        huge_record_bytes: A record at least this large that holds one image is decoded with
            its image cut from the payload (``huge_images``): below it, protobuf's copy of
            the image costs little.
    """

    by_record_bytes: int = BY_RECORD_BYTES
    batch_bytes: int = 4 << 20
    first_batch_files: int = 8
    batch_files: int = 1024
    whole_min_bytes: int = 4096
    whole_min_records: int = 64
    huge_record_bytes: int = HUGE_RECORD_BYTES


DEFAULT_TUNING = ReadTuning()
