"""Block decoding (``tbconvert.reading.fast.block_scalars``) matches the general path.

The block path (``BlockScalars``) decodes single-scalar events of a whole Block with NumPy;
every row, statistic, series and metadata must be what the general path
(``EventDecoder.feed_records``) makes from the same records (``tests/support/decoding.py``
decodes a file both ways).
"""

from __future__ import annotations

import math
import random
import sqlite3
import struct
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert import convert
from tbconvert.filters import Selection
from tbconvert.plugins._tensorproto import DT_FLOAT
from tbconvert.reading.fast import block_template
from tests.support.decoding import decode_file, exact
from tests.support.eventfiles import (
    append_events,
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
    write_events,
    write_tbx_scalars,
)
from tests.support.tfrecords import write_file

W0 = 1_700_000_000.0
SPECIAL_VALUES = [0.5, math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, 3.4e38, -2.5]
BIG_STEPS = [2**31 - 1, 2**31, 2**31 + 5, 2**40, 2**53 + 1, 2**63 - 1, -1, -(2**40), 127, 128]


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


# ------------------------------------------------- records the block path must read or leave
#
# Each test below builds records that protobuf reads one way and a careless template
# would read another; the block path must give the general path's rows.


@pytest.mark.mutant_gap
def test_block_path_with_freshly_built_key_masks(tmp_path: Path) -> None:
    # The key masks are built once per process and size: build them here from scratch.
    path = _protobuf_events(tmp_path / "proto")
    general, _ = decode_file(path, whole=False)
    block_template.key_masks.cache_clear()
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < general["reader"][1] / 2


_BLOCK_KINDS = {
    "tf2": lambda step: tf2_scalar("loss", step / 3),
    "no_shape": lambda step: tensor_value("loss", step / 3, shape=None),
    "shape1": lambda step: shape1_scalar("loss", step / 3),
    "simple_with_metadata": lambda step: simple_value("loss", step / 3, metadata=scalar_metadata()),
    "custom_metadata": lambda step: tensor_value(
        "loss",
        step / 3,
        metadata=SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars")),
    ),
    # The widest key the block path takes: 2a S 0a V 0a T, a 117-byte tag, 15 and 4 bytes.
    "widest_key": lambda step: simple_value("k" * 117, step / 3),
}


@pytest.mark.mutant_gap
@pytest.mark.parametrize("kind", sorted(_BLOCK_KINDS))
def test_each_encoding_the_block_path_reads_takes_it(tmp_path: Path, kind: str) -> None:
    # Steps up to 2**14 (varints of 1 to 3 bytes); the rows must be the general path's,
    # and all but each buffer's first records and its last ~640 bytes come from blocks.
    steps = [*range(300), *range(16000, 16300)]
    path = write_events(
        tmp_path / "run" / "events.out.tfevents.1.h",
        [summary_event(step, 1e9 + step, [_BLOCK_KINDS[kind](step)]) for step in steps],
    )
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert len(general["rows"]["scalars"]) == len(steps)
    assert decoded_in_general < 40


def _framed_offsets(events: list[Event], start: int) -> list[int]:
    """Where each event's record starts when framed after ``start`` bytes."""
    offsets = []
    for event in events:
        offsets.append(start)
        start += 12 + len(event.SerializeToString()) + 4
    return offsets


@pytest.mark.mutant_gap
def test_block_rows_read_from_the_middle_of_a_file_keep_their_file_offsets(
    tmp_path: Path,
) -> None:
    first = [summary_event(s, 1e9 + s, [tf2_scalar("loss", s / 2)]) for s in range(400)]
    more = [summary_event(s, 1e9 + s, [tf2_scalar("loss", s / 2)]) for s in range(400, 800)]
    path = write_events(tmp_path / "logs" / "run" / "events.out.tfevents.1.h", first)
    convert(tmp_path / "logs", tmp_path / "s.db")
    appended_at = path.stat().st_size
    append_events(path, more)
    convert(tmp_path / "logs", tmp_path / "s.db")  # reads from the stored offset on
    version = Event(wall_time=1e9, file_version="brain.Event:2")
    expected = list(enumerate(_framed_offsets([version, *first], 0)[1:])) + list(
        zip(range(400, 800), _framed_offsets(more, appended_at), strict=True)
    )
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        found = connection.execute("SELECT step, record_offset FROM scalars ORDER BY step")
        assert found.fetchall() == expected


@pytest.mark.mutant_gap
def test_a_files_wall_time_span_covers_records_in_any_order(tmp_path: Path) -> None:
    # Enough single-scalar records for the NumPy block path (which leaves the last ~640 bytes
    # of a buffer to the general path), the extremes in the middle.
    times = [5e8 + 1000 - step for step in range(300)]
    times[100], times[150] = 4e8, 7e8
    events = [summary_event(step, t, [simple_value("loss", 0.5)]) for step, t in enumerate(times)]
    write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h", events, version_wall_time=6e8
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        span = connection.execute("SELECT first_wall_time, last_wall_time FROM event_files")
        assert span.fetchall() == [(4e8, 7e8)]


def _raw_events(path: Path, payloads: list[bytes]) -> Path:
    """An event file of raw Event payloads after a file-version record, framed as TFRecords."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(Event(wall_time=1e9, file_version="brain.Event:2").SerializeToString())
        for payload in payloads:
            writer.write(payload)
    return path


@pytest.mark.mutant_gap
def test_a_record_whose_first_field_is_not_the_wall_time_is_read_as_protobuf_reads_it(
    tmp_path: Path,
) -> None:
    # Two records start with an unknown fixed64 field (tag 0x79, field 15) where the others
    # have their wall time (0x09): protobuf reads wall time 0 and the same step and value.
    # One has step 100, the other step 0 (not written, so its summary is where a record
    # without a step has it).
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    payloads[100] = b"\x79" + payloads[100][1:]
    payloads[200] = (
        b"\x79" + summary_event(0, 5e8, [simple_value("loss", 7.0)]).SerializeToString()[1:]
    )
    odd = [Event.FromString(payloads[at]) for at in (100, 200)]
    assert [(e.wall_time, e.step, e.summary.value[0].simple_value) for e in odd] == [
        (0.0, 100, 50.0),
        (0.0, 0, 7.0),
    ]
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < 40  # the block path did read the others
    walls = {(row[1], row[6]): row[5] for row in general["rows"]["scalars"]}
    assert walls[100, exact(50.0)] == walls[0, exact(7.0)] == exact(0.0)
    assert walls[99, exact(49.5)] == exact(1e9 + 99)


@pytest.mark.mutant_gap
def test_a_record_whose_field_after_the_step_is_no_summary_is_no_scalar(tmp_path: Path) -> None:
    # Record 100's summary field (0x2a, field 5) is a graph_def (0x22, field 4) of the same
    # bytes: protobuf reads a graph, which is kept as one, not as a scalar.
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    at = payloads[100].index(b"\x2a\x0d")
    payloads[100] = payloads[100][:at] + b"\x22" + payloads[100][at + 1 :]
    assert Event.FromString(payloads[100]).WhichOneof("what") == "graph_def"
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < 40
    assert 100 not in [row[1] for row in general["rows"]["scalars"]]


@pytest.mark.mutant_gap
def test_the_first_series_of_a_file_is_known_to_the_block_path_like_any_other(
    tmp_path: Path,
) -> None:
    # The file's series are numbered from 0.  Two files of the same record sizes: in one,
    # "loss" is series 0; in the other, the first record's tag is "lost" (series 0), so
    # "loss" is series 1.  The general path decodes what the block path cannot: once per key
    # (the other file has one key more) and the records near the buffer's end, which lie
    # alike.  A known key must stay known in every block, whatever its series number.
    def decoded(first_tag: str) -> int:
        events = [
            summary_event(step, 1e9 + step, [simple_value(first_tag if step == 0 else "loss", 1)])
            for step in range(1000)
        ]
        path = write_events(tmp_path / first_tag / "events.out.tfevents.1.h", events)
        general, _ = decode_file(path, whole=False)
        whole, decoded_in_general = decode_file(path, whole=True, size=100)
        assert whole == general
        return decoded_in_general

    assert decoded("lost") == decoded("loss") + 1


@pytest.mark.mutant_gap
def test_a_negative_zero_wall_time_next_to_a_zero_one_gives_the_general_paths_span(
    tmp_path: Path,
) -> None:
    # Record 100's wall time is -0.0 (written: it is not proto3's default 0.0), record 101's
    # is 0.0 (omitted).  The general path keeps the first of equal extremes, so the file's
    # first wall time is -0.0; the block path must leave such records to it.
    walls = [10.0 + step for step in range(300)]
    walls[100], walls[101] = -0.0, 0.0
    events = [
        summary_event(step, wall, [simple_value("loss", 1.0)]) for step, wall in enumerate(walls)
    ]
    assert events[100].SerializeToString()[:1] == b"\x09"  # the -0.0 is written
    assert events[101].SerializeToString()[:1] == b"\x10"  # the 0.0 is not
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events, version_wall_time=5)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert general["stats"][7] == exact(-0.0)  # first_wall_time, by its bits
    assert whole == general
    assert decoded_in_general < 40


@pytest.mark.mutant_gap
def test_records_the_template_rejects_are_never_learnt_as_one_key(tmp_path: Path) -> None:
    # Values that also carry a node_name (field 7 after the value) are not the block path's
    # template, though protobuf reads their tag, step and value as usual.  The rejected
    # records all have the same (empty) key, so none may be learnt: "acc" would then be
    # packed into "loss"'s series.
    def value(step: int) -> Summary.Value:
        if step in (150, 160):
            tag = "loss" if step == 150 else "acc"
            return Summary.Value(tag=tag, simple_value=step / 2, node_name="n")
        return simple_value("loss", step / 2)

    events = [summary_event(step, 1e9 + step, [value(step)]) for step in range(300)]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=100)
    assert [series[:2] for series in general["series"]] == [("loss", "scalars"), ("acc", "scalars")]
    assert [row[0] for row in general["rows"]["scalars"]].count(1) == 1  # one point of acc
    assert whole == general
    assert decoded_in_general < 40


def _length_whose_header_reads_as_a_template_start() -> int:
    """A record length whose header, read from its first byte as an Event, starts like the
    block path's template: length byte 0x09 (a wall-time field), then in the CRC a step
    field (0x10) holding a two-byte varint, so that the template's summary field begins at
    the record's payload."""
    for k in range(1, 1 << 16):
        raw = struct.pack("<Q", 9 + 256 * k)
        crc = struct.pack("<I", tb_masked_crc(raw))
        if crc[1] == 0x10 and crc[2] >= 0x80 and crc[3] < 0x80:
            return 9 + 256 * k
    raise AssertionError("no such length")


@pytest.mark.mutant_gap
def test_records_near_the_buffers_end_are_read_at_their_own_place(tmp_path: Path) -> None:
    # The block path leaves a buffer's last ~640 bytes to the general path, and reads nothing
    # for them.  Here the buffer's first record is built so that its header and payload, read
    # as a template record, give exactly the key of the file's "loss" scalars (27-byte Events
    # with two-byte steps): records read there instead of at their own place would be packed
    # with the first record's bytes.
    length = _length_whose_header_reads_as_a_template_start()
    steps = range(200, 600)
    loss = [summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]) for step in steps]
    summary_field = loss[0].SerializeToString()[12:]  # 2a 0d 0a 0b 0a 04 loss 15 <value>
    assert len(loss[0].SerializeToString()) == 27 and summary_field[:2] == b"\x2a\x0d"
    first = summary_field + b"\x00" * (length - len(summary_field))  # no Event: unparseable
    path = tmp_path / "run" / "events.out.tfevents.1.h"
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(first)
        for event in loss:
            writer.write(event.SerializeToString())
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert [row[1] for row in general["rows"]["scalars"]] == list(steps)
    assert whole == general
    assert decoded_in_general < 40


@pytest.mark.mutant_gap
def test_two_tags_whose_keys_hash_alike_stay_apart(tmp_path: Path) -> None:
    # A key's hash is linear in its 8-byte words (word i times (i + 1) * a constant), so
    # adding 3 to word 1 and taking 2 from word 2 keeps it.  Word 0 of these keys holds the
    # width, the lengths and the tag's first two bytes; words 1 and 2 the tag's bytes 2 to 9
    # and 10 to 17.  Tags whose byte 2 is 3 more and byte 10 2 less hash alike, and must
    # still be two series.
    first = "ab" + "a" + "cdefghi" + "c" + "1234567"
    second = "ab" + "d" + "cdefghi" + "a" + "1234567"
    assert len(first) == len(second) == 18
    events = [
        summary_event(step, 1e9 + step, [simple_value(first if step % 2 else second, step / 2)])
        for step in range(300)
    ]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    general, _ = decode_file(path, whole=False)
    whole, _ = decode_file(path, whole=True, size=100)
    assert [series[0] for series in general["series"]] == [second, first]
    assert whole == general


_F32 = struct.Struct("<f")


def _crafted_tensor_event(step: int, decoy: float, content: float) -> bytes:
    """A TF2-style scalar of tag "w" whose DT_FLOAT tensor holds, between its dtype and its
    4-byte tensor_content, 4 bytes that protobuf keeps as an unknown field (version_number,
    an int32, with the wire type of bytes): ``decoy`` where a template record has its value,
    ``content`` the value protobuf reads."""
    tensor = b"\x08\x01\x1a\x04" + _F32.pack(decoy) + b"\x22\x04" + _F32.pack(content)
    value = b"\x0a\x01w\x42" + bytes([len(tensor)]) + tensor
    summary = b"\x0a" + bytes([len(value)]) + value
    assert step < 128  # a one-byte varint
    return (
        (b"\x09" + struct.pack("<d", 1e9 + step) + b"\x10" + bytes([step]) + b"\x2a")
        + bytes([len(summary)])
        + summary
    )


@pytest.mark.mutant_gap
def test_a_tensor_with_a_field_before_its_content_gives_protobufs_value(tmp_path: Path) -> None:
    # The block path reads a tensor's value at a fixed place, so it must refuse one whose
    # tensor_content is not there.  The first "w" carries the scalars metadata; the first
    # crafted one reads alike both ways (so the block path could learn its key); the later
    # ones hold another number where a template record has its value.
    first = summary_event(0, 1e9, [tf2_scalar("w", 1.5)]).SerializeToString()
    crafted = [_crafted_tensor_event(1, 1.5, 1.5)]
    crafted += [_crafted_tensor_event(step, float(step), 1.5) for step in range(2, 100)]
    read = Event.FromString(crafted[5]).summary.value[0].tensor
    assert (read.dtype, read.tensor_content) == (DT_FLOAT, _F32.pack(1.5))
    filler = [
        summary_event(step, 1e9 + step, [simple_value("loss", 0.5)]).SerializeToString()
        for step in range(100, 300)
    ]
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", [first, *crafted, *filler])
    general, _ = decode_file(path, whole=False)
    whole, _ = decode_file(path, whole=True, size=8192)
    assert [row[6] for row in general["rows"]["scalars"] if row[1] < 100] == [exact(1.5)] * 100
    assert whole == general


@pytest.mark.mutant_gap
def test_a_step_varint_with_a_zero_continuation_byte_is_read_whole(tmp_path: Path) -> None:
    # Record 100's step varint is 80 followed by the bytes of a "loss" summary field: a
    # varint byte 0x80 carries no bits but does continue, so protobuf reads the step on into
    # the summary's bytes and no scalar; it is no record of the block path's template.
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    summary_field = payloads[1][payloads[1].index(b"\x2a\x0d") :]
    payloads[100] = b"\x09" + struct.pack("<d", 1e9 + 100) + b"\x10\x80" + summary_field
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert len(general["rows"]["scalars"]) == 299
    assert whole == general
    assert decoded_in_general < 40
