"""Records larger than the read buffer (issue #40): read alone as one bytes object, their
damage and torn tails found as for any record, and records over the size cap skipped unread.

Small blocks stand in for the default 8 MiB one, so that records of kilobytes are "large".
"""

from __future__ import annotations

import gzip
import io
import os
import tracemalloc
from pathlib import Path

import pytest

from tbconvert.reading.first_record import read_first_record
from tbconvert.reading.records import Damage, RecordReader, open_event_file
from tests.support.tfrecords import frame, frame_large, header, read, write_file


class CountingFile(io.BytesIO):
    """A file that counts the bytes read from it."""

    read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.read_bytes += len(data)
        return data


def test_record_larger_than_a_block_is_read_alone(tmp_path: Path) -> None:
    big = os.urandom(1 << 20)
    data, offsets = frame_large([b"a", big, b"bc"])
    path = write_file(tmp_path / "events", data)
    tracemalloc.start()
    try:
        records, reader = read(path, block_size=4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records == list(zip(offsets, [b"a", big, b"bc"], strict=True))
    # Read through the buffer it cost three times its size (buffer, join, slice).
    assert peak < 1.5 * len(big)
    assert reader.consumed == len(data) and reader.records == 3 and not reader.torn


def test_large_record_in_a_gzip_stream(tmp_path: Path) -> None:
    big = os.urandom(100_000)
    data, offsets = frame_large([b"a", big, b"bc"])
    path = write_file(tmp_path / "events.gz", gzip.compress(data))
    with open_event_file(str(path)) as handle:
        reader = RecordReader(handle, block_size=4096)
        assert list(reader) == list(zip(offsets, [b"a", big, b"bc"], strict=True))


def test_bad_checksum_of_a_large_record_is_damage_and_reading_resumes(tmp_path: Path) -> None:
    data, offsets = frame_large([b"a", os.urandom(100_000), b"bc"])
    broken = bytearray(data)
    broken[offsets[1] + 5_000] ^= 0x40
    records, reader = read(write_file(tmp_path / "events", bytes(broken)), block_size=4096)
    assert records == [(offsets[0], b"a"), (offsets[2], b"bc")]
    assert reader.damage == [Damage(offsets[1], offsets[2] - offsets[1], "bad data checksum")]


def test_large_record_cut_short_is_a_torn_tail(tmp_path: Path) -> None:
    data, offsets = frame_large([b"a", os.urandom(100_000)])
    records, reader = read(write_file(tmp_path / "events", data[:-10]), block_size=4096)
    assert records == [(0, b"a")]
    assert reader.torn and reader.consumed == offsets[1] and reader.damage == []


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_record_over_the_cap_is_skipped_unread(gzipped: bool) -> None:
    data, offsets = frame_large([b"a", os.urandom(200_000), b"bc"])
    handle = CountingFile(gzip.compress(data) if gzipped else data)
    source = gzip.GzipFile(fileobj=handle) if gzipped else handle
    reader = RecordReader(source, block_size=256, max_record=1000)  # type: ignore[arg-type]
    assert list(reader) == [(offsets[0], b"a"), (offsets[2], b"bc")]
    reason = "record of 200000 bytes is over --max-record-size (1000 bytes)"
    assert reader.damage == [Damage(offsets[1], offsets[2] - offsets[1], reason)]
    assert reader.consumed == len(data) and not reader.torn
    if not gzipped:  # seeked past: its payload never read
        assert handle.read_bytes < 10_000


def test_record_over_the_cap_among_many_small_ones_is_skipped(tmp_path: Path) -> None:
    """Records that fit the buffer are checked a whole buffer at a time: the cap holds there."""
    payloads = [bytes([n]) * 50 for n in range(200)]
    payloads[120] = os.urandom(3000)
    data, offsets = frame(payloads)
    path = write_file(tmp_path / "events", data)
    with open(path, "rb") as handle:
        reader = RecordReader(handle, max_record=1000)
        read_back = [pair for batch in reader.blocks() for pair in _pairs(batch)]
    expected = [(o, p) for n, (o, p) in enumerate(zip(offsets, payloads, strict=True)) if n != 120]
    assert read_back == expected
    assert [(region.offset, region.length) for region in reader.damage] == [
        (offsets[120], offsets[121] - offsets[120])
    ]


def test_over_the_cap_and_cut_short_is_a_torn_tail(tmp_path: Path) -> None:
    data, _ = frame([b"a"])
    path = write_file(tmp_path / "events", data + header(5000) + b"x" * 100)
    records, reader = read(path, max_record=1000)
    assert records == [(0, b"a")] and reader.torn and reader.damage == []


def test_damaged_length_is_not_taken_for_a_record_over_the_cap(tmp_path: Path) -> None:
    data, offsets = frame([b"a", b"bc"])
    path = write_file(tmp_path / "events", header(1 << 40, good_crc=False) + data)
    records, reader = read(path, max_record=1000)
    assert records == [(12 + o, p) for o, p in zip(offsets, [b"a", b"bc"], strict=True)]
    assert [region.reason for region in reader.damage] == ["bad length checksum"]


def _pairs(batch: object) -> list[tuple[int, bytes]]:
    return batch if isinstance(batch, list) else batch.pairs()  # type: ignore[attr-defined]


def test_first_record_larger_than_a_block_or_over_the_cap(tmp_path: Path) -> None:
    big = os.urandom(200_000)
    data, _ = frame_large([big, b"a"])
    path = write_file(tmp_path / "events", data)
    with open(path, "rb") as handle:
        assert read_first_record(handle) == big
        assert handle.tell() == 0
    with open(path, "rb") as handle:
        assert RecordReader(handle, max_record=1000).record_at(0) is None
