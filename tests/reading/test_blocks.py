"""Whole buffers at once (``tbconvert.reading.fast.blocks``): ``RecordReader.blocks()`` frames
and checksums a whole buffer in one go and falls back to the record-by-record reader when
anything is off; it must read exactly what ``batches()`` reads.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.reading.fast import blocks
from tbconvert.reading.records import RecordReader, open_event_file
from tbconvert.reading.tuning import DEFAULT_TUNING, ReadTuning
from tests.support.tfrecords import PROPERTY, block_sizes, frame, read, write_file

# Try the whole-buffer path on every buffer, however few records it holds.
EAGER_BLOCKS = ReadTuning(whole_min_bytes=0, whole_min_records=1)


def read_blocks(
    path: Path, start: int = 0, size: int = 3, tuning: ReadTuning = DEFAULT_TUNING, **kwargs: int
) -> tuple[list[tuple[int, bytes]], RecordReader, int]:
    """Records as blocks() yields them (Blocks flattened), the reader, and how many Blocks."""
    found: list[tuple[int, bytes]] = []
    whole = 0
    with open(path, "rb") as f:
        reader = RecordReader(f, start, tuning=tuning, **kwargs)
        for item in reader.blocks(size):
            if isinstance(item, list):
                found.extend(item)
            else:
                whole += 1
                assert reader.consumed == item.base + int(item.starts[-1] + 16 + item.lengths[-1])
                found.extend(item.pairs())
    return found, reader, whole


def assert_same_reading(
    path: Path, start: int = 0, tuning: ReadTuning = DEFAULT_TUNING, **kwargs: int
) -> int:
    records, reader = read(path, start, **kwargs)
    found, again, whole = read_blocks(path, start, tuning=tuning, **kwargs)
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
    whole = assert_same_reading(path, tuning=EAGER_BLOCKS, block_size=block_size)
    if not flips and cut == 1 and block_size > len(data):
        assert whole > 0
    assert_same_reading(
        path, offsets[int(start * len(offsets))], tuning=EAGER_BLOCKS, block_size=block_size
    )


@pytest.mark.parametrize("period", [1, 3, 10, 37])
def test_blocks_follow_cycles_of_record_sizes(tmp_path: Path, period: int) -> None:
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
        assert assert_same_reading(path, tuning=EAGER_BLOCKS, block_size=block_size) > 0
        assert_same_reading(path, offsets[1234], tuning=EAGER_BLOCKS, block_size=block_size)
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


@pytest.mark.mutant_gap
def test_a_buffer_of_exactly_the_minimum_size_is_read_in_blocks(tmp_path: Path) -> None:
    # 64 records of 48-byte payloads: 64 * (12 + 48 + 4) = 4096 bytes, the least the block
    # path takes (ReadTuning.whole_min_bytes).
    path = tmp_path / "records"
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for number in range(64):
            writer.write(bytes([number]) * 48)
    assert path.stat().st_size == 4096
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        items = list(reader.blocks(8192))
    assert [type(item).__name__ for item in items] == ["Block"]
    assert [bytes(payload) for _offset, payload in items[0].pairs()] == [
        bytes([number]) * 48 for number in range(64)
    ]
