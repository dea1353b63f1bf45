"""Block decoding (``tbconvert.reading.fast.block_scalars``) matches the general path.

The block path (``BlockScalars``) decodes single-scalar events of a whole Block with NumPy;
every row, statistic, series and metadata must be what the general path
(``EventDecoder.feed_records``) makes from the same records (``tests/support/decoding.py``
decodes a file both ways).
"""

from __future__ import annotations

import math
import random
import struct
import warnings
from pathlib import Path

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.filters import Selection
from tests.support.decoding import decode_file
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
