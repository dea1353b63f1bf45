"""TFRecord files for the reading tests: framed by tensorboard's own ``RecordWriter`` (an
independent implementation of the format, so a bug shared by our reader and a writer of ours
cannot hide), read back record by record with ``RecordReader``, and headers built by hand.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.reading.records import RecordReader

# The property tests of records and blocks: few examples, files written in tmp_path.
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# Buffers smaller than one record, than a few, and larger than any file written.
block_sizes = st.sampled_from([16, 37, 8 << 20])


def frame(payloads: list[bytes]) -> tuple[bytes, list[int]]:
    """Frame payloads with tensorboard's writer; return the bytes and each record's offset."""
    out = io.BytesIO()
    writer = RecordWriter(out)
    offsets = []
    for payload in payloads:
        offsets.append(out.tell())
        writer.write(payload)
    return out.getvalue(), offsets


def write_file(path: Path, data: bytes) -> Path:
    """``data`` as the file ``path``, which is returned."""
    path.write_bytes(data)
    return path


def read(path: Path, start: int = 0, **kwargs: int) -> tuple[list[tuple[int, bytes]], RecordReader]:
    """Every (offset, payload) read record by record from ``start``, and the reader after it
    (``consumed``, ``records``, ``damage``, ``torn``)."""
    with open(path, "rb") as f:
        reader = RecordReader(f, start, **kwargs)
        return list(reader), reader


def header(length: int, *, good_crc: bool = True) -> bytes:
    """A record header of ``length`` whose length CRC (TensorBoard's masked CRC) verifies, or
    with ``good_crc=False`` fails."""
    raw = struct.pack("<Q", length)
    crc = tb_masked_crc(raw) ^ (0 if good_crc else 1)
    return raw + struct.pack("<I", crc)


def frame_large(payloads: list[bytes]) -> tuple[bytes, list[int]]:
    """:func:`frame` for records of megabytes, checksummed with google_crc32c's C code
    (tensorboard's pure-Python CRC takes a second for 5 MB)."""
    import google_crc32c

    def masked(data: bytes) -> bytes:
        crc = google_crc32c.value(data)
        return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)

    parts, offsets, at = [], [], 0
    for payload in payloads:
        length = struct.pack("<Q", len(payload))
        offsets.append(at)
        parts += [length, masked(length), payload, masked(payload)]
        at += len(payload) + 16
    return b"".join(parts), offsets
