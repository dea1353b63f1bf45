"""Tests for tbconvert.reading.records: framing, torn tails, damage recovery and resumption.

Records are framed by tensorboard's own RecordWriter (an independent implementation of the format),
so a bug shared by our reader and a writer of ours cannot hide.
"""

from __future__ import annotations

import gzip
import io
import math
import pickle
import random
import struct
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.filters import Selection
from tbconvert.reading import records as records_module
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast import blocks
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
from tbconvert.rows import remap_to_store_ids
from tests.support.eventfiles import (
    double_content_scalar,
    event_file_name,
    file_version_event,
    scalar_metadata,
    shape1_scalar,
    simple_value,
    strip_repeated_metadata,
    summary_event,
    tensor_value,
    tf2_scalar,
    torch_new_style_scalar,
    write_tbx_scalars,
)

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
payloads_st = st.lists(st.binary(max_size=40), max_size=6)
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
    path.write_bytes(data)
    return path


def read(path: Path, start: int = 0, **kwargs: int) -> tuple[list[tuple[int, bytes]], RecordReader]:
    with open(path, "rb") as f:
        reader = RecordReader(f, start, **kwargs)
        return list(reader), reader


def header(length: int, *, good_crc: bool = True) -> bytes:
    raw = struct.pack("<Q", length)
    crc = tb_masked_crc(raw) ^ (0 if good_crc else 1)
    return raw + struct.pack("<I", crc)


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


# ------------------------------------------------------------- whole buffers at once (blocks)
#
# RecordReader.blocks() frames and checksums a whole buffer in one go and falls back to the
# record-by-record reader when anything is off; it must read exactly what batches() reads.


@pytest.fixture
def eager_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Try the whole-buffer path on every buffer, however few records it holds."""
    monkeypatch.setattr(records_module, "_WHOLE_MIN_BYTES", 0)
    monkeypatch.setattr(records_module, "_WHOLE_MIN_RECORDS", 1)


def read_blocks(
    path: Path, start: int = 0, size: int = 3, **kwargs: int
) -> tuple[list[tuple[int, bytes]], RecordReader, int]:
    """Records as blocks() yields them (Blocks flattened), the reader, and how many Blocks."""
    found: list[tuple[int, bytes]] = []
    whole = 0
    with open(path, "rb") as f:
        reader = RecordReader(f, start, **kwargs)
        for item in reader.blocks(size):
            if isinstance(item, list):
                found.extend(item)
            else:
                whole += 1
                assert reader.consumed == item.base + int(item.starts[-1] + 16 + item.lengths[-1])
                found.extend(item.pairs())
    return found, reader, whole


def assert_same_reading(path: Path, start: int = 0, **kwargs: int) -> int:
    records, reader = read(path, start, **kwargs)
    found, again, whole = read_blocks(path, start, **kwargs)
    assert found == records
    assert (again.consumed, again.records, again.damage, again.torn) == (
        reader.consumed,
        reader.records,
        reader.damage,
        reader.torn,
    )
    return whole


@PROPERTY
@given(
    payloads=st.lists(st.binary(max_size=40), min_size=1, max_size=30),
    flips=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=1, exclude_max=True),
            st.integers(min_value=1, max_value=255),
        ),
        max_size=3,
    ),
    cut=st.floats(min_value=0, max_value=1),
    start=st.floats(min_value=0, max_value=1, exclude_max=True),
    block_size=block_sizes,
)
def test_blocks_read_what_batches_read(
    tmp_path: Path,
    eager_blocks: None,
    payloads: list[bytes],
    flips: list[tuple[float, int]],
    cut: float,
    start: float,
    block_size: int,
) -> None:
    data, offsets = frame(payloads)
    damaged = bytearray(data)
    for where, xor in flips:
        damaged[int(where * len(data))] ^= xor
    path = write_file(tmp_path / "f", bytes(damaged[: max(1, int(cut * len(data)))]))
    whole = assert_same_reading(path, block_size=block_size)
    if not flips and cut == 1 and block_size > len(data):
        assert whole > 0
    assert_same_reading(path, offsets[int(start * len(offsets))], block_size=block_size)


@pytest.mark.parametrize("period", [1, 3, 10, 37])
def test_blocks_follow_cycles_of_record_sizes(
    tmp_path: Path, eager_blocks: None, period: int
) -> None:
    # Sizes repeating with the tag cycle are guessed and checked at once; the guess must
    # break where the cycle does (a longer step, an odd record) and be right everywhere else.
    rnd = random.Random(period)
    cycle = [rnd.randrange(4, 60) for _ in range(period)]
    payloads = []
    for k in range(6000):
        size = cycle[k % period] + (k >= 3000) + (k >= 4500)
        payloads.append(bytes([k % 251]) * (700 if k % 997 == 5 else size))
    data, offsets = frame(payloads)
    path = write_file(tmp_path / "f", data + data[:30])
    for block_size in (4096, 50_000, 8 << 20):
        assert assert_same_reading(path, block_size=block_size) > 0
        assert_same_reading(path, offsets[1234], block_size=block_size)
    starts, end = blocks.walk(data, 0)
    assert starts.tolist() == offsets and end == len(data)


def test_walk_stops_before_a_record_past_the_buffer() -> None:
    data, offsets = frame([b"abcd" * k for k in range(1, 200)])
    for cut in (len(data), len(data) - 1, offsets[150] + 20, offsets[150], 15, 0):
        starts, end = blocks.walk(data[:cut], 0)
        whole = [o for o, nxt in zip(offsets, [*offsets[1:], len(data)], strict=True) if nxt <= cut]
        assert starts.tolist() == whole
        assert end == [*offsets, len(data)][len(whole)]


@pytest.mark.parametrize("shortest", [0, 4, 9])
def test_verify_catches_every_flipped_byte(shortest: int) -> None:
    # Payloads under 4 bytes are checked one by one, the others all together.
    data, offsets = frame([bytes(range(k, k + shortest + k % 5)) for k in range(12)])
    starts = np.array(offsets, dtype=np.int64)
    lengths = blocks.lengths_at(data, starts)
    assert blocks.verify(data, starts, lengths)
    for pos in range(len(data)):
        for xor in (1, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[pos] ^= xor
            assert not blocks.verify(bytes(damaged), starts, lengths), (pos, xor)


def test_damaged_big_file_reads_the_same_in_blocks(tmp_path: Path) -> None:
    rnd = random.Random(5)
    payloads = [rnd.randbytes(rnd.randrange(4, 90)) for _ in range(40_000)]
    data, _ = frame(payloads)
    damaged = bytearray(data)
    for pos in rnd.sample(range(len(data)), 25):
        damaged[pos] ^= 1 << rnd.randrange(8)
    path = write_file(tmp_path / "f", bytes(damaged) + data[:7])
    for block_size in (64 << 10, 8 << 20):
        assert assert_same_reading(path, block_size=block_size) > 0


# ------------------------------------------------ block decoding matches the general path
#
# The block path (fast.block_scalars.BlockScalars) decodes single-scalar events of a whole Block
# with
# NumPy; every row, statistic, series and metadata must be what the general path
# (EventDecoder.feed_records) makes from the same records.

W0 = 1_700_000_000.0
SPECIAL_VALUES = [0.5, math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, 3.4e38, -2.5]
BIG_STEPS = [2**31 - 1, 2**31, 2**31 + 5, 2**40, 2**53 + 1, 2**63 - 1, -1, -(2**40), 127, 128]


def exact(value: Any) -> Any:
    """Floats by their bits (NaN payloads and signed zeros included)."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, tuple):
        return tuple(exact(item) for item in value)
    return value


def decode_file(
    path: Path,
    *,
    whole: bool,
    selection: Selection | None = None,
    seeds: dict[str, Any] | None = None,
    size: int = 100,
) -> tuple[dict[str, Any], int]:
    """Everything an EventDecoder makes of a file, and how many records its general path
    decoded."""
    decoder = EventDecoder(selection or Selection(), seeds or {})
    general = 0
    feed_records = decoder.feed_records

    def counted(batch: list[tuple[int, bytes]], **options: Any) -> None:
        nonlocal general
        general += len(batch)
        feed_records(batch, **options)

    decoder.feed_records = counted  # type: ignore[method-assign]
    rows: dict[str, list[Any]] = {}
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        for item in reader.blocks(size) if whole else reader.batches(size):
            decoder.feed(item)
            taken, _ = decoder.take()  # as reading.chunks does after each chunk
            for table, table_rows in taken.items():
                # As a --jobs worker sends them; iterated twice, as a retried chunk is.
                again = pickle.loads(pickle.dumps(table_rows))
                assert len(table_rows) == len(again)
                assert [exact(row) for row in again] == [exact(row) for row in table_rows]
                rows.setdefault(table, []).extend(exact(row) for row in table_rows)
                # The writer's remap to store ids, whatever form the rows took.
                store_ids = [1000 + 7 * number for number in range(len(decoder.definitions))]
                remapped = remap_to_store_ids(table_rows, store_ids, 42)
                assert [exact(row) for row in remapped] == [
                    exact((store_ids[row[0]], row[1], 42, *row[3:])) for row in table_rows
                ]
    stats = decoder.stats
    return {
        "rows": rows,
        "series": [tuple(definition[1:]) for definition in decoder.definitions],
        "metadata": {tag: m.SerializeToString() for tag, m in decoder.metadata().items()},
        "stats": (
            dict(stats.points),
            dict(stats.skipped),
            dict(stats.undecodable),
            stats.filtered_values,
            dict(stats.other_events),
            stats.lossy_records,
            stats.unparseable,
            exact(stats.first_wall_time),
            exact(stats.last_wall_time),
        ),
        "reader": (reader.consumed, reader.records, reader.damage, reader.torn),
    }, general


def _tensorboardx_scalars(run: Path) -> Path:
    points = []
    for step in [*range(400), *BIG_STEPS]:
        wall = W0 + step * 0.25 if abs(step) < 2**40 else W0
        # The earliest and latest wall times fall on records the block path decodes.
        wall = {7: 0.0, 8: math.nan, 10: -0.0, 300: -1e6, 301: 1e12}.get(step, wall)
        for k, tag in enumerate(("loss", "acc/top1", "lr")):
            points.append((tag, step, wall, SPECIAL_VALUES[(step + k) % len(SPECIAL_VALUES)]))
    return write_tbx_scalars(run, points)


def _histogram(tag: str, step: int) -> Summary.Value:
    histo = HistogramProto(
        min=0.0,
        max=step + 1.0,
        num=3,
        sum=1.5,
        sum_squares=2.0,
        bucket_limit=[1.0, step + 1.0],
        bucket=[1.0, 2.0],
    )
    return Summary.Value(tag=tag, histo=histo)


def _protobuf_events(run: Path) -> Path:
    # Keys over 64 bytes widen a block's keys to 128; over 128 they go the general way.
    long_tag, longer_tag = "long/" + "x" * 60, "longer/" + "y" * 120
    custom = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom"))
    payloads = [file_version_event(W0).SerializeToString(), b""]
    stripped = strip_repeated_metadata(
        summary_event(s, W0 + s, [tf2_scalar("stripped", s / 3)]) for s in range(300)
    )
    for step in range(300):
        wall = {5: 0.0, 6: math.nan, 7: math.inf, 250: -0.0}.get(step, W0 + step)
        number = SPECIAL_VALUES[step % len(SPECIAL_VALUES)]
        values = [
            tf2_scalar("train/loss", number),
            tf2_scalar("train/acc", step / 7),
            tensor_value("no_shape", number, shape=None),
            torch_new_style_scalar("new_style", number),
            double_content_scalar("double", step / 9),
            shape1_scalar("shape1", number),
            tf2_scalar(long_tag if step < 150 else "short", number),
            tf2_scalar(longer_tag, number),
            tensor_value("custom", number, metadata=custom),
            simple_value("mixed", number) if step % 2 else tf2_scalar("mixed", number),
            simple_value("with_metadata", number, metadata=scalar_metadata()),
        ]
        for value in values:
            payloads.append(summary_event(step, wall, [value]).SerializeToString())
        payloads.append(stripped[step].SerializeToString())
        bad = summary_event(step, wall, [simple_value("accXuracy", number)])
        payloads.append(bad.SerializeToString().replace(b"accXuracy", b"acc\xffuracy"))
        if step % 17 == 0:
            merged = [simple_value("m1", number), simple_value("m2", step), _histogram("h", step)]
            payloads.append(summary_event(step, wall, merged).SerializeToString())
        if step % 50 == 0:
            payloads.append(Event(step=step, wall_time=W0).SerializeToString())
    path = run / event_file_name(W0)
    run.mkdir(parents=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for payload in payloads:
            writer.write(payload)
    return path


def _damaged(path: Path, target: Path) -> Path:
    data = bytearray(path.read_bytes())
    rnd = random.Random(13)
    for pos in rnd.sample(range(len(data)), 12):
        data[pos] ^= 1 << rnd.randrange(8)
    return write_file(target, bytes(data[: len(data) - 9]))


@pytest.fixture(scope="module")
def event_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("blocks")
    tbx = _tensorboardx_scalars(root / "tbx")
    proto = _protobuf_events(root / "proto")
    return {
        "tbx": tbx,
        "proto": proto,
        "tbx_damaged": _damaged(tbx, root / "tbx_damaged"),
        "proto_damaged": _damaged(proto, root / "proto_damaged"),
    }


@pytest.mark.parametrize("name", ["tbx", "proto", "tbx_damaged", "proto_damaged"])
@pytest.mark.parametrize("size", [64, 100, 8192])
def test_block_decoding_matches_the_general_path(
    event_files: dict[str, Path], name: str, size: int
) -> None:
    general, _ = decode_file(event_files[name], whole=False)
    whole, decoded_in_general = decode_file(event_files[name], whole=True, size=size)
    assert whole == general
    assert general["stats"][0]["scalars"] > 1000
    if name == "tbx" and size > 64:
        # Only each key's first record, and the few not in the template, go the slow way.
        assert decoded_in_general < general["reader"][1] / 10


@pytest.mark.parametrize(
    "selection",
    [
        Selection(tags=("train/*", "mixed")),
        Selection(exclude_tags=("*acc*", "lr")),
        Selection(plugins=frozenset({"histograms", "tensors"})),
    ],
)
def test_block_decoding_applies_the_same_selection(
    event_files: dict[str, Path], selection: Selection
) -> None:
    for name in ("tbx", "proto"):
        general, _ = decode_file(event_files[name], whole=False, selection=selection)
        whole, _ = decode_file(event_files[name], whole=True, selection=selection)
        assert whole == general


def test_block_decoding_with_seeded_metadata(event_files: dict[str, Path]) -> None:
    # A resumed read knows tags' metadata from earlier runs (TF1 writers send it once).
    seeds = {"no_shape": scalar_metadata(), "custom": scalar_metadata()}
    general, _ = decode_file(event_files["proto"], whole=False, seeds=seeds)
    whole, _ = decode_file(event_files["proto"], whole=True, seeds=seeds)
    assert whole == general


_SIGNALLING_NAN = b"\x01\x00\xa0\x7f"  # float32 bits


def _with_signalling_nans(path: Path, events: list[Event]) -> Path:
    """Write ``events`` with every float32 1.0 in them made a signalling NaN."""
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for event in events:
            writer.write(event.SerializeToString().replace(b"\x00\x00\x80\x3f", _SIGNALLING_NAN))
    return path


def test_signalling_nan_value_matches(tmp_path: Path) -> None:
    quiet = struct.unpack("<f", b"\x00\x00\xc0\x7f")[0]
    events = [
        summary_event(s, W0 + s, [simple_value("x", quiet), tf2_scalar("y", 1.0)])
        for s in range(300)
    ]
    path = _with_signalling_nans(tmp_path / "f", events)
    general, _ = decode_file(path, whole=False)
    whole, _ = decode_file(path, whole=True)
    assert whole == general


def test_signalling_nan_in_the_block_path_warns_nothing(tmp_path: Path) -> None:
    # NumPy warns when it widens a signalling NaN; a user's terminal must not show that.
    events = [summary_event(s, W0 + s, [simple_value("x", 1.0)]) for s in range(300)]
    path = _with_signalling_nans(tmp_path / "f", events)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole, in_general = decode_file(path, whole=True)
    assert in_general < len(events) / 10  # the block path read the others
    general, _ = decode_file(path, whole=False)
    assert whole == general
    values = [struct.unpack("<d", row[-1][1])[0] for row in whole["rows"]["scalars"]]
    assert len(values) == len(events) and all(math.isnan(value) for value in values)


def test_densely_damaged_buffer_is_walked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a damaged record the rest of the buffer is read record by record: walking and
    # verifying the rest again after each of many damaged records would take quadratic time.
    rnd = random.Random(8)
    data, offsets = frame([rnd.randbytes(40) for _ in range(20_000)])
    damaged = bytearray(data)
    for offset in offsets[100::50]:
        damaged[offset + 20] ^= 1
    path = write_file(tmp_path / "f", bytes(damaged))
    walks = []
    walk = blocks.walk
    monkeypatch.setattr(blocks, "walk", lambda buf, i: walks.append(i) or walk(buf, i))
    assert assert_same_reading(path) > 0
    assert len(walks) == 1
