"""Tests for tbconvert.reading.records (with crc, resync and first_record): framing, torn
tails, damage recovery and resumption.

Records are framed by tensorboard's own RecordWriter (an independent implementation of the format),
so a bug shared by our reader and a writer of ours cannot hide.  Whole buffers read at once are
``test_blocks.py``'s; what the records decode to, ``test_block_scalars.py`` and ``test_decoder.py``.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.reading import resync
from tbconvert.reading.first_record import first_record, read_first_record
from tbconvert.reading.records import (
    FOOTER_SIZE,
    HEADER_SIZE,
    Damage,
    RecordReader,
    masked_crc32c,
    open_event_file,
    record_in,
)
from tests.support.tfrecords import PROPERTY, block_sizes, frame, header, read, write_file

payloads_st = st.lists(st.binary(max_size=40), max_size=6)

# ---------------------------------------------------------------------------------- properties


@PROPERTY
@given(payloads=payloads_st, block_size=block_sizes)
def test_round_trip(tmp_path: Path, payloads: list[bytes], block_size: int) -> None:
    data, offsets = frame(payloads)
    path = write_file(tmp_path / "events.out.tfevents.1", data)
    records, reader = read(path, block_size=block_size)
    assert records == list(zip(offsets, payloads, strict=True))
    assert reader.consumed == len(data)
    assert reader.records == len(payloads)
    assert reader.damage == []
    assert not reader.torn


@PROPERTY
@given(payloads=st.lists(st.binary(max_size=12), min_size=1, max_size=4), block_size=block_sizes)
def test_truncation_at_every_offset(tmp_path: Path, payloads: list[bytes], block_size: int) -> None:
    data, offsets = frame(payloads)
    ends = [o + HEADER_SIZE + len(p) + FOOTER_SIZE for o, p in zip(offsets, payloads, strict=True)]
    full = write_file(tmp_path / "full", data)
    for cut in range(len(data) + 1):
        complete = [(o, p) for o, p, e in zip(offsets, payloads, ends, strict=True) if e <= cut]
        boundary = max([0] + [e for e in ends if e <= cut])
        cut_path = write_file(tmp_path / "cut", data[:cut])
        # A truncated file, and the whole file read with an older size snapshot, look the same.
        for records, reader in (read(cut_path, block_size=block_size), read(full, end=cut)):
            assert records == complete, cut
            assert reader.damage == []
            assert reader.consumed == boundary
            assert reader.torn == (cut != boundary)


@PROPERTY
@given(
    payloads=st.lists(st.binary(max_size=30), min_size=1, max_size=5),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    xor=st.integers(min_value=1, max_value=255),
    block_size=block_sizes,
)
def test_single_flipped_byte(
    tmp_path: Path, payloads: list[bytes], where: float, xor: int, block_size: int
) -> None:
    data, offsets = frame(payloads)
    pos = int(where * len(data))
    hit = max(k for k, off in enumerate(offsets) if off <= pos)
    damaged = bytearray(data)
    damaged[pos] ^= xor
    path = write_file(tmp_path / "flipped", bytes(damaged))
    records, reader = read(path, block_size=block_size)
    expected = [(o, p) for k, (o, p) in enumerate(zip(offsets, payloads, strict=True)) if k != hit]
    assert records == expected
    resume = offsets[hit + 1] if hit + 1 < len(offsets) else len(data)
    reason = "bad length checksum" if pos - offsets[hit] < HEADER_SIZE else "bad data checksum"
    assert reader.damage == [Damage(offsets[hit], resume - offsets[hit], reason)]
    assert reader.consumed == len(data)
    assert not reader.torn


@PROPERTY
@given(payloads=payloads_st, more=payloads_st, split=st.floats(min_value=0, max_value=1))
def test_resume_after_append(
    tmp_path: Path, payloads: list[bytes], more: list[bytes], split: float
) -> None:
    data, offsets = frame(payloads + more)
    # The first read sees a prefix cut anywhere, as when a writer is mid-flush.
    cut = int(split * len(data))
    path = write_file(tmp_path / "live", data[:cut])
    first, reader = read(path)
    with open(path, "ab") as f:
        f.write(data[cut:])
    second, again = read(path, reader.consumed)
    assert first + second == list(zip(offsets, payloads + more, strict=True))
    assert again.consumed == len(data)
    assert reader.damage == again.damage == []
    assert not again.torn


# ---------------------------------------------------------------------------------- plain tests


def test_crc_test_vector() -> None:
    vector = b"\x1a\x11CRC test, one two"
    assert masked_crc32c(vector) == 0x5794D08A
    assert masked_crc32c(memoryview(vector)) == 0x5794D08A
    # The resync scan skips all-zero windows on the strength of this.
    assert masked_crc32c(bytes(8)) != 0


def test_huge_length_with_valid_crc_is_a_torn_tail(tmp_path: Path) -> None:
    data, offsets = frame([b"a", b"bc"])
    path = write_file(tmp_path / "huge", data + header(2**60) + b"xyz")
    tracemalloc.start()
    try:
        records, reader = read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert records == list(zip(offsets, [b"a", b"bc"], strict=True))
    assert reader.torn
    assert reader.consumed == len(data)
    assert reader.damage == []


def test_huge_length_in_gzip_stream_does_not_allocate(tmp_path: Path) -> None:
    data, _ = frame([b"a"])
    path = write_file(tmp_path / "huge.gz", gzip.compress(data + header(2**60) + b"xyz"))
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=1024)
        assert [p for _, p in reader] == [b"a"]
    assert reader.torn
    assert reader.consumed == len(data)


def test_huge_length_with_bad_crc_is_damage_to_end(tmp_path: Path) -> None:
    data, _ = frame([b"a"])
    path = write_file(tmp_path / "huge", data + header(2**60, good_crc=False) + b"xyz")
    size = path.stat().st_size
    records, reader = read(path)
    assert [p for _, p in records] == [b"a"]
    assert reader.damage == [Damage(len(data), size - len(data), "bad length checksum")]
    assert reader.consumed == size
    assert not reader.torn


def test_garbage_only_file(tmp_path: Path) -> None:
    garbage = random.Random(7).randbytes(100_000)
    path = write_file(tmp_path / "events.out.tfevents.garbage", garbage)
    records, reader = read(path, block_size=4096)
    assert records == []
    assert reader.records == 0
    assert reader.damage == [Damage(0, len(garbage), "bad length checksum")]
    assert reader.consumed == len(garbage)
    assert not reader.torn


def test_big_non_event_file_is_scanned(tmp_path: Path) -> None:
    garbage = random.Random(11).randbytes(4 << 20)
    path = write_file(tmp_path / "events.out.tfevents.big", garbage)
    records, reader = read(path, block_size=1 << 20)
    assert records == []
    assert reader.damage == [Damage(0, len(garbage), "bad length checksum")]
    assert reader.consumed == len(garbage)


@pytest.mark.parametrize("block_size", [64, 8 << 20])
@pytest.mark.parametrize("filler", [b"\x00" * 50_000, b"\x00\x00\x00\x01" * 5000, b"\xff" * 3000])
def test_records_found_after_damage(tmp_path: Path, block_size: int, filler: bytes) -> None:
    head, _ = frame([b"first"])
    tail_payloads = [b"second", b"", b"third"]
    tail, tail_offsets = frame(tail_payloads)
    path = write_file(tmp_path / "mixed", head + filler + tail)
    records, reader = read(path, block_size=block_size)
    base = len(head) + len(filler)
    tail_records = [(base + o, p) for o, p in zip(tail_offsets, tail_payloads, strict=True)]
    assert records == [(0, b"first"), *tail_records]
    assert reader.damage == [Damage(len(head), len(filler), "bad length checksum")]
    assert reader.consumed == path.stat().st_size
    assert not reader.torn


def test_damage_then_torn_tail(tmp_path: Path) -> None:
    data, _ = frame([b"first", b"second"])
    path = write_file(tmp_path / "mixed", b"\x01garbage!" + data[:-3])
    records, reader = read(path)
    assert records == [(9, b"first")]
    assert reader.damage == [Damage(0, 9, "bad length checksum")]
    assert reader.torn
    assert reader.consumed == 9 + len(frame([b"first"])[0])


def test_torn_record_right_after_damage_resumes(tmp_path: Path) -> None:
    data, _ = frame([b"only"])
    path = write_file(tmp_path / "live", b"\x01garbage!" + data[:-3])
    records, reader = read(path)
    assert records == []
    assert reader.damage == [Damage(0, 9, "bad length checksum")]
    assert reader.torn
    assert reader.consumed == 9
    with open(path, "ab") as f:
        f.write(data[-3:])
    records, reader = read(path, reader.consumed)
    assert records == [(9, b"only")]
    assert reader.damage == [] and not reader.torn


def test_end_snapshot_is_respected(tmp_path: Path) -> None:
    data, offsets = frame([b"one", b"two", b"three"])
    path = write_file(tmp_path / "growing", data)
    records, reader = read(path, end=offsets[2])
    assert [p for _, p in records] == [b"one", b"two"]
    assert reader.consumed == offsets[2]
    assert not reader.torn
    records, reader = read(path, reader.consumed)
    assert records == [(offsets[2], b"three")]


def test_consumed_is_current_during_iteration(tmp_path: Path) -> None:
    data, offsets = frame([b"x", b"yy", b"zzz"])
    path = write_file(tmp_path / "f", data)
    with open(path, "rb") as f:
        reader = RecordReader(f)
        seen = [(reader.consumed, reader.records) for _ in reader]
    assert seen == [(offsets[1], 1), (offsets[2], 2), (len(data), 3)]


@pytest.mark.mutant_gap
def test_a_stream_without_a_file_descriptor_is_read_to_its_end(tmp_path: Path) -> None:
    # An in-memory stream has no fileno(): its size is found by seeking to its end, and the
    # reader then starts where the stream stood.  That size is a snapshot, as a file's is: a
    # record appended after the reader was made is not read.
    stream = io.BytesIO()
    writer = RecordWriter(stream)
    payloads = [bytes([number]) * (number + 1) for number in range(20)]
    for payload in payloads:
        writer.write(payload)
    size = stream.tell()
    stream.seek(0)
    reader = RecordReader(stream)
    stream.seek(0, io.SEEK_END)
    writer.write(b"appended later")
    stream.seek(0)
    assert [payload for batch in reader.record_lists() for _offset, payload in batch] == payloads
    assert reader.consumed == size and not reader.torn


@pytest.mark.mutant_gap
def test_known_good_lengths_keep_a_clean_file_on_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records of 60 different lengths: each new length's CRC is checked on the fast path and
    # remembered; the record-by-record path is only asked to start and at the end.
    path = tmp_path / "records"
    payloads = [bytes([number]) * (number + 1) for number in range(60)]
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for payload in payloads:
            writer.write(payload)
    slow_calls: list[int] = []
    slow = RecordReader.resume_at

    def counted(self: RecordReader, pos: int) -> int | None:
        slow_calls.append(pos)
        return slow(self, pos)

    monkeypatch.setattr(RecordReader, "resume_at", counted)
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        read = [payload for batch in reader.record_lists(1000) for _offset, payload in batch]
    assert read == payloads
    assert slow_calls == [0, path.stat().st_size]  # to fill the buffer, and at its end


def _tensorboardx_events(logdir: Path) -> Path:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(logdir))
    for step in range(5):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.close()
    (path,) = logdir.glob("events.out.tfevents.*")
    return path


def test_tensorboardx_event_file(tmp_path: Path) -> None:
    path = _tensorboardx_events(tmp_path / "run")
    records, reader = read(path)
    events = [Event.FromString(p) for _, p in records]
    assert events[0].file_version.startswith("brain.Event:")
    scalars = [(e.step, e.summary.value[0].tag) for e in events if e.HasField("summary")]
    assert scalars == [(step, "loss") for step in range(5)]
    assert reader.consumed == path.stat().st_size
    assert reader.damage == [] and not reader.torn
    with open(path, "rb") as f:
        assert read_first_record(f) == records[0][1]


def test_gzip_event_file(tmp_path: Path) -> None:
    path = _tensorboardx_events(tmp_path / "run")
    plain, _ = read(path)
    gz = write_file(tmp_path / "events.out.tfevents.gz", gzip.compress(path.read_bytes()))
    with open_event_file(str(gz)) as f:
        # An on-disk size snapshot says nothing about decompressed offsets, so it is ignored.
        reader = RecordReader(f, end=gz.stat().st_size)
        assert list(reader) == plain
        assert reader.consumed == path.stat().st_size
    with open_event_file(str(gz)) as f:
        assert read_first_record(f) == plain[0][1]
    with open_event_file(str(gz)) as f:
        assert list(RecordReader(f, plain[2][0])) == plain[2:]
    with open_event_file(str(path)) as f:
        assert not isinstance(f, gzip.GzipFile)
        assert list(RecordReader(f)) == plain


def test_read_first_record(tmp_path: Path) -> None:
    data, _ = frame([b"first", b"second"])
    cases = {
        b"": None,
        data[:10]: None,
        data[:20]: None,
        data: b"first",
        b"\x00" + data: None,
        data[:-2] + b"\x00\x00": b"first",
    }
    for content, expected in cases.items():
        path = write_file(tmp_path / "f", content)
        with open(path, "rb") as f:
            f.seek(3)
            assert read_first_record(f) == expected, content
            assert f.tell() == 3


@PROPERTY
@given(
    payloads=st.lists(st.binary(max_size=40), min_size=0, max_size=3),
    cut=st.one_of(st.just(0), st.integers(1, 24)),
    flip=st.one_of(st.none(), st.integers(0, 30)),
)
def test_first_record_of_bytes_is_the_first_record_of_the_file(
    payloads: list[bytes], cut: int, flip: int | None
) -> None:
    # A batch of small files takes each file's digest from its bytes in memory; it must be
    # the one read_first_record reads from the file, whatever the file is torn or damaged.
    whole = frame(payloads)[0]
    data = bytearray(whole[: max(len(whole) - cut, 0)])
    if flip is not None and flip < len(data):
        data[flip] ^= 0x20
    assert first_record(bytes(data)) == read_first_record(io.BytesIO(bytes(data)))
    # At any record's offset, what a reader positioned there reads first.
    at = 0
    for payload in payloads:
        expected = RecordReader(io.BytesIO(bytes(data)), at).record_at(at)
        assert record_in(bytes(data), at) == expected
        at += HEADER_SIZE + len(payload) + FOOTER_SIZE


# --------------------------------------------------------- dense resync candidates (resync.py)


def test_dense_candidates_match_brute_force() -> None:
    # Arrays of small integers put a possible length at nearly every offset; the vectorised
    # header check used there must agree with a byte-by-byte one.
    from tbconvert.reading.resync import dense_candidates as _dense_candidates
    from tbconvert.reading.resync import resync_candidates as _candidates

    rnd = random.Random(3)
    words = [struct.pack("<q", rnd.randrange(-300, 300)) for _ in range(3000)]
    for k in sorted(rnd.sample(range(len(words)), 40), reverse=True):
        words.insert(k, header(rnd.randrange(1 << 20)) + b"\x00" * rnd.randrange(4))
    buf = b"".join(words)
    hi = len(buf) - HEADER_SIZE

    def verifies(i: int) -> bool:
        return tb_masked_crc(buf[i : i + 8]) == struct.unpack_from("<I", buf, i + 8)[0]

    brute = [i for i in range(hi + 1) if buf[i + 5 : i + 8] == b"\x00\x00\x00" and verifies(i)]
    assert len(brute) >= 40
    assert list(_dense_candidates(buf, 0, hi)) == brute
    assert list(_dense_candidates(buf, 7, hi - 7)) == [i for i in brute if 7 <= i <= hi - 7]
    # The scan that switches to the vectorised check part-way must miss none either.
    assert [i for i in _candidates(buf, 0, hi) if verifies(i)] == brute


def _dense_buffer(at: list[int], size: int, length: int = 40) -> bytes:
    """``size`` bytes of 0x01 with a header of ``length`` (CRC valid) at each offset."""
    buf = bytearray(b"\x01" * size)
    for offset in at:
        buf[offset : offset + 12] = header(length)
    return bytes(buf)


@pytest.mark.mutant_gap
def test_dense_candidates_reach_both_ends_of_the_range() -> None:
    buf = _dense_buffer([0, 100, 188], 200)
    assert list(resync.dense_candidates(buf, 0, 188)) == [0, 100, 188]
    assert list(resync.dense_candidates(buf, 100, 100)) == [100]
    assert list(resync.dense_candidates(buf, 188, 188)) == [188]
    assert list(resync.dense_candidates(buf, 101, 187)) == []


@pytest.mark.mutant_gap
def test_dense_candidates_skip_lengths_of_2_to_the_40_or_more() -> None:
    # The length CRC verifies, but a length that large is never where records resume.
    for length in (1 << 40, 1 << 48, 1 << 56):
        buf = _dense_buffer([50], 100, length)
        assert list(resync.dense_candidates(buf, 0, 88)) == [], length
    assert list(resync.dense_candidates(_dense_buffer([50], 100, (1 << 40) - 1), 0, 88)) == [50]


@pytest.mark.mutant_gap
def test_dense_candidates_from_freshly_built_crc_tables() -> None:
    # The per-byte CRC tables are built once per process: build them here from scratch.
    resync._crc_tables.cache_clear()
    rnd = random.Random(5)
    buf = bytearray(rnd.choice(b"\x00\x00\x00\x01\x02\x80") for _ in range(6000))
    for offset in rnd.sample(range(0, 5980, 20), 40):
        buf[offset : offset + 12] = header(rnd.randrange(1 << 20))
    data = bytes(buf)
    expected = [
        i
        for i in range(0, len(data) - 11)
        if data[i + 5 : i + 8] == b"\x00\x00\x00"
        and tb_masked_crc(data[i : i + 8]) == struct.unpack_from("<I", data, i + 8)[0]
    ]
    assert len(expected) >= 40
    assert list(resync.dense_candidates(data, 0, len(data) - 12)) == expected
