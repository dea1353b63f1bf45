"""TensorBoard as the independent oracle (issues #17, #15): every view equals what TensorBoard
itself reads from the same files.

The logdir is written by tensorboardX's ``SummaryWriter`` and by hand-built
``tensorboard.compat.proto`` Events (every encoding docs/design.md §5 lists), several thousand
single-scalar records per file with tags interleaved, so that the NumPy block path
(``tbconvert/reading/fast/block_scalars.py``) runs over many blocks, with other records spliced in
between;
conversion uses a small ``chunk_points`` so that every file spans many transactions.

The expected rows come from TensorBoard alone: each file is read with its own
``EventFileLoader`` (which runs ``data_compat.migrate_event`` and
``dataclass_compat.migrate_event``, the layers its data server reads through), each value is
given the plugin of its tag's first metadata in the file (as ``dataclass_compat`` does), and
its tensor is turned into numbers with ``tensor_util.make_ndarray``, as TensorBoard's data
provider and plugins do.  Nothing here calls tbconvert's decoders; the store is read with
plain SQL through the public views.

What is compared, per (run, context, tag, step) in record order:

* ``v_scalars``: value and wall time bit for bit as float64; NaN is NULL, ±inf kept.  Rows
  of one step are compared as a multiset (the views carry no record order).
* ``v_images``, ``v_audio``: the encoded bytes byte for byte, per index.
* ``v_histograms``: the buckets TensorBoard shows (its ``[k,3]`` tensor; for a converted
  HistogramProto TensorBoard rounds to float32, so the stored float64 is rounded the same way
  before the bits are compared).
* ``v_texts``: every element of the string tensor, row-major, UTF-8.
* ``v_params``: every hparam of each ``session_start_info``, typed.
* ``v_tensors``: everything else (pr_curves, custom_scalars, hparams experiment and
  session_end_info), bytes and shape.

SQLite stores a REAL ``-0.0`` as the integer 0 (it keeps integral REAL values as integers),
so on SQLite the expected ``-0.0`` of a REAL column is ``0.0``; PostgreSQL keeps the sign.
"""

from __future__ import annotations

import io
import json
import math
import struct
import wave
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.hparams import plugin_data_pb2 as hparams_pb2
from tensorboard.util import tensor_util

import tbconvert
from tbconvert.conversion.options import ConvertTuning
from tbconvert.reading.fast.template import LearntKeys
from tbconvert.reading.tuning import ReadTuning
from tests.support.eventfiles import (
    event_file_name,
    strip_repeated_metadata,
    summary_event,
    tensor_value,
    write_events,
)
from tests.support.snapshots import StoreFactory, connect, is_server

# Slow (its logdir is converted per backend and reading path): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

W0 = 1_795_100_000.0
CHUNK_POINTS = 97  # points per transaction: every file spans many chunks
RECORDS = 2400  # single-scalar records per scalar file
DBL_MAX = 1.7976931348623157e308
NAN, INF = float("nan"), float("inf")
TAGS = ("loss", "metrics/accuracy", "lr")

# Values as a writer's caller passes them, cycled through the records of each encoding.
F32_VALUES = [
    0.5,
    -1.25,
    NAN,
    INF,
    -INF,
    -0.0,
    1e-45,
    3.4028234663852886e38,
    0.1,
    2.0**40 + 1,
    1e-30,
    123456.789,
    0.0,
]
F64_VALUES = [0.1, 1e300, 5e-324, -0.0, NAN, INF, -INF, 2.0**53 + 1, 1 / 3, -2.5e-310, 0.0]
INT32_VALUES = [0, -(2**31), 2**31 - 1, 7, -1]
INT64_VALUES = [2**53 + 1, -(2**63), 2**63 - 1, 0, -42]
F16_VALUES = [65504.0, 6e-08, NAN, INF, -0.0, 0.333, -2.0]


# --------------------------------------------------------------------------- writing


class Written(NamedTuple):
    """One event file and where Aim's layout rules (design §3) put it."""

    path: Path
    run_path: str
    context: str


def step_for(i: int) -> int:
    """Steps as real logs have them: 0 (no field), climbing, duplicated, going back after a
    resume, negative (10-byte varints), and beyond 2^53."""
    if i % 997 == 500:
        return -i
    if i % 751 == 300:
        return 2**62 + i
    if 1200 <= i < 1500:
        return i // len(TAGS) - 100  # a resumed run logs 100 steps again
    return i // len(TAGS)


def wall_for(i: int) -> float:
    """Wall times: increasing, some 0.0 (no field on the wire), some NaN."""
    if i % 401 == 7:
        return 0.0
    if i % 613 == 5:
        return NAN
    return W0 + i * 0.001


def scalar_file(path: Path, make: Callable[[str, int], Summary.Value], strip: bool = False) -> Path:
    """RECORDS single-value Events, tags interleaved, built by ``make(tag, i)``."""
    events = [
        summary_event(step_for(i), wall_for(i), [make(TAGS[i % len(TAGS)], i)])
        for i in range(RECORDS)
    ]
    return write_events(
        path, strip_repeated_metadata(events) if strip else events, version_wall_time=W0
    )


def cycle(values: list[Any], i: int) -> Any:
    return values[(i // len(TAGS)) % len(values)]


def png(width: int, height: int, seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def wav(frames: int, rate: int, seed: int) -> bytes:
    samples = np.random.default_rng(seed).integers(-3000, 3000, frames, dtype=np.int16)
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples.tobytes())
    return out.getvalue()


def metadata(plugin: str, content: bytes = b"") -> SummaryMetadata:
    return SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name=plugin, content=content)
    )


def string_tensor(values: list[bytes], shape: list[int]) -> TensorProto:
    tensor = TensorProto(dtype=7, string_val=values)
    tensor.tensor_shape.SetInParent()
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    return tensor


def double_tensor(rows: np.ndarray) -> TensorProto:
    tensor = TensorProto(dtype=2, tensor_content=np.asarray(rows, "<f8").tobytes())
    for size in rows.shape:
        tensor.tensor_shape.dim.add(size=size)
    return tensor


def write_hand_built(root: Path) -> list[Written]:
    """Run ``protos``: one context per family of encodings, as TF1, TF2, torch and custom
    ``tf.summary.write`` calls produce them."""
    run = root / "protos"
    name = event_file_name(W0)
    encodings: dict[str, Callable[[str, int], Summary.Value]] = {
        "tf1": lambda tag, i: Summary.Value(tag=tag, simple_value=cycle(F32_VALUES, i)),
        "tf2": lambda tag, i: tensor_value(tag, cycle(F32_VALUES, i)),
        "torch_new_style": lambda tag, i: tensor_value(
            tag, cycle(F32_VALUES, i), field="val", shape=None
        ),
        "torch_double": lambda tag, i: tensor_value(
            tag, cycle(F64_VALUES, i), dtype="float64", field="val", shape=None
        ),
        "double_content": lambda tag, i: tensor_value(tag, cycle(F64_VALUES, i), dtype="float64"),
        "shape1": lambda tag, i: tensor_value(tag, cycle(F32_VALUES, i), shape=(1,)),
        "int32": lambda tag, i: tensor_value(
            tag, cycle(INT32_VALUES, i), dtype="int32", field=("val", "content")[i % 2]
        ),
        "int64": lambda tag, i: tensor_value(
            tag, cycle(INT64_VALUES, i), dtype="int64", field=("content", "val")[i % 2]
        ),
        "half": lambda tag, i: tensor_value(
            tag, cycle(F16_VALUES, i), dtype="float16", field=("val", "content")[i % 2]
        ),
    }
    written = [
        Written(scalar_file(run / context / name, make), "protos", context)
        for context, make in encodings.items()
    ]
    # TF1 FileWriter with TF2-style tensors: metadata only on each tag's first occurrence.
    stripped = run / "tf1_stripped" / name
    written.append(
        Written(scalar_file(stripped, encodings["tf2"], strip=True), "protos", "tf1_stripped")
    )
    written.append(Written(write_events(run / "mixed" / name, mixed_events()), "protos", "mixed"))
    written.append(Written(write_events(run / "trial" / name, hparams_events()), "protos", "trial"))
    return written


def mixed_events() -> list[Any]:
    """Scalars of both fast-path encodings with every other plugin spliced in between, and
    TF1 ``merge_all`` Events carrying several values."""
    events = []
    for i in range(RECORDS):
        step, wall = step_for(i), wall_for(i)
        if i % 2:
            value = Summary.Value(tag=TAGS[i % 3], simple_value=cycle(F32_VALUES, i))
        else:
            value = tensor_value(f"tf2/{TAGS[i % 3]}", cycle(F32_VALUES, i))
        events.append(summary_event(step, wall, [value]))
        if i % 150 == 75:
            events.append(summary_event(step, wall, other_values(i)))
    return events


def other_values(i: int) -> list[Summary.Value]:
    """One of everything that is not a scalar, for record ``i``."""
    k = 1 + i % 3
    images = [png(4 + j, 3 + i % 5, i * 10 + j) for j in range(k)]
    width, height = 4, 3 + i % 5  # TF2 puts the first image's size in front
    lefts = np.linspace(-1.0, 1.0, 6)
    tf2_buckets = np.stack([lefts[:-1], lefts[1:], np.arange(5.0) * (i % 7)], axis=1)
    ladder = HistogramProto(
        min=-0.48 - i * 1e-4,
        max=2.25,
        num=12,
        sum=3.5,
        sum_squares=9.0,
        bucket_limit=[-0.52, -0.1, 0.0, 1.0e-3, 2.3, DBL_MAX],
        bucket=[0.0, 4.0, 0.0, 3.0, 5.0, 0.0],
    )
    texts = {
        "text/rank0": ([f"step {i} ✓".encode()], []),
        "text/shape1/text_summary": ([b"torch \xc3\xa9"], [1]),
        "text/table": ([f"{i}-{j}".encode() for j in range(6)], [2, 3]),
        "text/empty": ([b""], []),
    }
    clips = [wav(50 + 10 * j, 8000 * (j + 1), i + j) for j in range(2)]
    audio_rows = string_tensor([clips[0], b"first", clips[1], b""], [2, 2])
    values = [
        Summary.Value(
            tag="images/tf2",
            tensor=string_tensor([str(width).encode(), str(height).encode(), *images], [2 + k]),
            metadata=metadata("images"),
        ),
        Summary.Value(
            tag="images/tf1",
            image=Summary.Image(
                height=3 + i % 5, width=4, colorspace=3, encoded_image_string=images[0]
            ),
        ),
        Summary.Value(
            tag="histograms/tf2", tensor=double_tensor(tf2_buckets), metadata=metadata("histograms")
        ),
        Summary.Value(tag="histograms/ladder", histo=ladder),
        *(
            Summary.Value(tag=tag, tensor=string_tensor(data, shape), metadata=metadata("text"))
            for tag, (data, shape) in texts.items()
        ),
        Summary.Value(
            tag="audio/tf1",
            audio=Summary.Audio(
                sample_rate=8000,
                num_channels=1,
                length_frames=50,
                encoded_audio_string=clips[0],
                content_type="audio/wav",
            ),
        ),
        Summary.Value(tag="audio/tf2", tensor=audio_rows, metadata=metadata("audio")),
    ]
    return values


def hparams_events() -> list[Any]:
    """A TF2 trial directory: ``session_start_info`` with the NULL tensor, then metrics."""
    start = hparams_pb2.HParamsPluginData(version=0)
    for key, kind, value in [
        ("lr", "number_value", 0.001),
        ("optimizer", "string_value", "adam"),
        ("nesterov", "bool_value", True),
        ("batch", "number_value", 32.0),
        ("ε", "number_value", 1e-300),
        ("note", "string_value", ""),
    ]:
        setattr(start.session_start_info.hparams[key], kind, value)
    start.session_start_info.group_name = "g1"
    null = TensorProto(dtype=1)
    null.tensor_shape.dim.add(size=0)
    value = Summary.Value(
        tag="_hparams_/session_start_info",
        tensor=null,
        metadata=metadata("hparams", start.SerializeToString()),
    )
    events = [summary_event(0, W0, [value])]
    events += [
        summary_event(step, W0 + step, [tensor_value("accuracy", 0.5 + step / 100)])
        for step in range(100)
    ]
    return events


def write_tensorboardx(root: Path) -> list[Written]:
    """Runs ``tbx`` (every ``add_*`` but audio, whose writer needs the soundfile package, and
    graphs) and ``tbx_multi/grp`` (``add_scalars``: one context per key)."""
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(7)
    run = root / "tbx"
    with SummaryWriter(logdir=str(run), flush_secs=3600, max_queue=1000) as writer:
        writer.add_custom_scalars({"training": {"loss": ["Multiline", ["loss", "lr"]]}})
        for i in range(RECORDS):
            step, wall = step_for(i), W0 + i * 0.25
            writer.add_scalar(TAGS[i % 3], cycle(F32_VALUES, i), step, walltime=wall)
            if i % 200 == 100:
                writer.add_image("image", rng.random((3, 5 + i % 4, 6)), step, walltime=wall)
                writer.add_images("batch", rng.random((4, 3, 6, 5)), step, walltime=wall)
                writer.add_histogram("weights", rng.normal(size=500) * (1 + i), step, walltime=wall)
                writer.add_histogram_raw(
                    "raw",
                    min=-0.9,
                    max=3.5,
                    num=10,
                    sum=7.0,
                    sum_squares=20.0,
                    bucket_limits=[-1.0, -0.5, 1.0, 3.5, DBL_MAX],
                    bucket_counts=[0, 2, 0, 8, 0],
                    global_step=step,
                    walltime=wall,
                )
                writer.add_text("notes", f"step {step}: ok ✓", step, walltime=wall)
                writer.add_pr_curve(
                    "pr",
                    rng.integers(0, 2, 40),
                    rng.random(40),
                    step,
                    num_thresholds=11,
                    walltime=wall,
                )
        writer.add_hparams(
            {"lr": 0.01, "optimizer": "sgd", "bn": True, "layers": 3},
            {"hp/accuracy": 0.75},
            name="hp",
            global_step=5,
        )
    multi = root / "tbx_multi"
    with SummaryWriter(logdir=str(multi), flush_secs=3600, max_queue=1000) as writer:
        for i in range(RECORDS // 2):
            writer.add_scalars(
                "grp",
                {"a": cycle(F32_VALUES, 3 * i), "b": i * 0.5},
                step_for(3 * i),
                walltime=W0 + i,
            )
    written = [Written(path, "tbx", "") for path in run.glob("*tfevents*")]
    written += [Written(path, "tbx", "hp") for path in (run / "hp").glob("*tfevents*")]
    for key in ("a", "b"):
        written += [
            Written(path, "tbx_multi/grp", key) for path in (multi / "grp" / key).glob("*tfevents*")
        ]
    assert len(written) == 4, written
    return written


# --------------------------------------------------------------------------- the oracle


@dataclass
class Expected:
    """Rows per view, as TensorBoard reads them, keyed as the view's columns are."""

    scalars: dict[tuple[str, str, str], list[tuple[int, Any, Any]]]
    images: list[tuple[Any, ...]]
    histograms: dict[tuple[str, str, str], list[tuple[int, Any, np.ndarray]]]
    texts: list[tuple[Any, ...]]
    audio: list[tuple[Any, ...]]
    params: list[tuple[Any, ...]]
    tensors: list[tuple[Any, ...]]


def tensorboard_values(path: Path) -> Iterator[tuple[Any, Any, str]]:
    """(event, value, plugin) for every summary value TensorBoard's loader yields."""
    first_metadata: dict[str, SummaryMetadata] = {}
    with np.errstate(over="ignore"):  # data_compat's float32 cast of ±DBL_MAX edges
        events = list(EventFileLoader(str(path)).Load())
    for event in events:
        for value in event.summary.value:
            plugin = first_metadata.setdefault(value.tag, value.metadata)
            yield event, value, plugin.plugin_data.plugin_name


def read_expected(written: list[Written]) -> Expected:
    expected = Expected(defaultdict(list), [], defaultdict(list), [], [], [], [])
    for path, run_path, context in written:
        for event, value, plugin in tensorboard_values(path):
            where = (run_path, context, value.tag)
            step, wall = event.step, event.wall_time
            array = tensor_util.make_ndarray(value.tensor)
            if plugin == "scalars":
                assert array.size == 1, (where, array)
                expected.scalars[where].append((step, wall, array.reshape(-1)[0].item()))
            elif plugin == "images":
                width, height, *blobs = array.tolist()
                expected.images += [
                    (*where, step, wall, idx, int(width), int(height), data)
                    for idx, data in enumerate(blobs)
                ]
            elif plugin == "histograms":
                expected.histograms[where].append((step, wall, array))
            elif plugin == "text":
                expected.texts += [
                    (*where, step, wall, idx, data.decode("utf-8"))
                    for idx, data in enumerate(array.reshape(-1).tolist())
                ]
            elif plugin == "audio":
                clips = array[:, 0] if array.ndim == 2 else array
                expected.audio += [
                    (*where, step, wall, idx, data) for idx, data in enumerate(clips.tolist())
                ]
            elif plugin == "hparams":
                add_hparams(expected, where, step, wall, value)
            else:
                expected.tensors.append(
                    (*where, plugin, step, wall, raw_bytes(array), list(array.shape))
                )
    return expected


def add_hparams(
    expected: Expected, where: tuple[str, str, str], step: int, wall: float, value: Any
) -> None:
    content = value.metadata.plugin_data.content
    record = hparams_pb2.HParamsPluginData.FromString(content)
    if record.WhichOneof("data") != "session_start_info":
        expected.tensors.append((*where, "hparams", step, wall, content, []))
        return
    run_path, context, _ = where
    for key, given in record.session_start_info.hparams.items():
        kind = given.WhichOneof("kind")
        if kind == "number_value":
            number = given.number_value
            row = (repr(number), None if math.isnan(number) else number, "number")
        elif kind == "string_value":
            row = (given.string_value, None, "string")
        else:
            assert kind == "bool_value", given
            row = (("false", "true")[given.bool_value], float(given.bool_value), "bool")
        expected.params.append((run_path, context, key, *row))


def raw_bytes(array: np.ndarray) -> bytes:
    """A tensor's bytes as a generic store keeps them: little-endian elements in C order, or
    a lone string's own bytes."""
    if array.dtype == object:
        assert array.size == 1, array
        return array.reshape(-1)[0]
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


# --------------------------------------------------------------------------- comparison


def bits(number: Any, sqlite: bool) -> Any:
    """A float as its IEEE bit pattern; NaN (and NULL) as None; SQLite's -0.0 as 0.0."""
    if number is None or (isinstance(number, float) and math.isnan(number)):
        return None
    number = float(number)
    if sqlite and number == 0:
        number = 0.0
    return struct.pack("<d", number).hex()


class Converted(NamedTuple):
    expected: Expected
    store: str
    conn: Any
    sqlite: bool
    summary: Any
    logdir: Path


@pytest.fixture(scope="module", params=["blocks", "records"])
def reading(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    """How the files are decoded: by the block path, or record by record (as files under
    ``ReadTuning.by_record_bytes`` are) through the learnt keys (``fast.template``), which each
    conversion starts afresh; and the tags of the keys learnt."""
    learnt: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "records":
            learn = LearntKeys.learn

            def recorded(keys: LearntKeys, key: bytes, tag: str, simple: bool) -> None:
                learnt.append(tag)
                learn(keys, key, tag, simple)

            patch.setattr(LearntKeys, "learn", recorded)
        yield request.param, learnt


@pytest.fixture(scope="module")
def logdir_read(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Expected]:
    """The logdir, written once, and what TensorBoard's own reader finds in it: the same
    for every backend and way of reading (conversions only read it)."""
    logdir = tmp_path_factory.mktemp("oracle") / "logdir"
    written = write_hand_built(logdir) + write_tensorboardx(logdir)
    return logdir, read_expected(written)


@pytest.fixture(scope="module")
def converted(
    tmp_path_factory: pytest.TempPathFactory,
    make_store: StoreFactory,
    reading: tuple[str, list[str]],
    logdir_read: tuple[Path, Expected],
) -> Iterator[Converted]:
    root = tmp_path_factory.mktemp("oracle")
    logdir, expected = logdir_read
    store = make_store(root)
    # Aim's layout: the files were placed by its rules (one context per family of
    # encodings); what this module checks is what is decoded, the auto layout has its own tests.
    by_record = ReadTuning(by_record_bytes=1 << 40) if reading[0] == "records" else None
    summary = tbconvert.convert(
        logdir,
        store,
        chunk_points=CHUNK_POINTS,
        progress=False,
        layout="aim",
        tuning=ConvertTuning(read=by_record) if by_record else ConvertTuning(),
    )
    how, learnt = reading
    if how == "records":
        assert learnt, "no key was learnt"
    with closing(connect(store)) as conn:
        yield Converted(expected, store, conn, not is_server(store), summary, logdir)


def query(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(sql).fetchall()]


# Every point view's rows without the run and context they were placed in.
PLACELESS = {
    "v_scalars": "tag, step, wall_time, value",
    "v_images": "tag, step, wall_time, idx, data",
    "v_audio": "tag, step, wall_time, idx, data",
    "v_texts": "tag, step, wall_time, idx, value",
    "v_params": "key, value, value_num, value_type",
    "v_histograms": "tag, step, wall_time, buckets",
    "v_tensors": "tag, plugin, step, wall_time, dtype, shape, data",
}


def placeless(conn: Any) -> dict[str, Counter[tuple[Any, ...]]]:
    def plain(value: Any) -> Any:
        return (
            repr(value)
            if isinstance(value, float)
            else bytes(value)
            if isinstance(value, memoryview)
            else value
        )

    return {
        view: Counter(
            tuple(plain(v) for v in row) for row in query(conn, f"SELECT {columns} FROM {view}")
        )
        for view, columns in PLACELESS.items()
    }


@pytest.mark.parametrize("mode", [{"layout": "auto"}, {"flat": True}])
def test_every_layout_keeps_every_record_once(
    converted: Converted, make_store: StoreFactory, tmp_path: Path, mode: dict[str, Any]
) -> None:
    """The layouts place files in other runs and contexts; each keeps every record, once."""
    store = make_store(tmp_path, "placed")
    summary = tbconvert.convert(converted.logdir, store, progress=False, **mode)
    assert summary.total_points == converted.summary.total_points
    with closing(connect(store)) as conn:
        assert placeless(conn) == placeless(converted.conn)


def test_conversion_is_clean(converted: Converted) -> None:
    summary = converted.summary
    assert summary.exit_code == 0, summary
    assert summary.undecodable == {} and summary.skipped == {}


SCALAR_CONTEXTS = [
    "tf1",
    "tf2",
    "torch_new_style",
    "torch_double",
    "double_content",
    "shape1",
    "int32",
    "int64",
    "half",
    "tf1_stripped",
    "mixed",
    "trial",
]


def scalar_rows(rows: list[tuple[int, Any, Any]], sqlite: bool) -> list[tuple[Any, ...]]:
    """(step, wall bits, value bits), sorted: a multiset per step."""
    return sorted(
        ((step, bits(wall, sqlite), bits(value, sqlite)) for step, wall, value in rows), key=repr
    )


def check_scalars(converted: Converted, run_path: str, context: str) -> None:
    expected = {
        key[2]: rows
        for key, rows in converted.expected.scalars.items()
        if key[:2] == (run_path, context)
    }
    stored: dict[str, list[tuple[int, Any, Any]]] = defaultdict(list)
    for tag, step, wall, value in converted.conn.execute(
        "SELECT tag, step, wall_time, value FROM v_scalars WHERE run_path = ? AND context = ?",
        (run_path, context),
    ).fetchall():
        stored[tag].append((step, wall, value))
    assert expected, (run_path, context)
    assert sorted(stored) == sorted(expected)
    for tag, rows in expected.items():
        want = scalar_rows(rows, converted.sqlite)
        got = scalar_rows(stored[tag], converted.sqlite)
        assert len(got) == len(want), (tag, len(got), len(want))
        wrong = [(w, g) for w, g in zip(want, got, strict=True) if w != g]
        assert not wrong, (tag, len(wrong), wrong[:5])


@pytest.mark.parametrize("context", SCALAR_CONTEXTS)
def test_scalars_hand_built(converted: Converted, context: str) -> None:
    check_scalars(converted, "protos", context)


@pytest.mark.parametrize(
    ("run_path", "context"),
    [("tbx", ""), ("tbx", "hp"), ("tbx_multi/grp", "a"), ("tbx_multi/grp", "b")],
)
def test_scalars_tensorboardx(converted: Converted, run_path: str, context: str) -> None:
    check_scalars(converted, run_path, context)


def test_every_scalar_is_a_row(converted: Converted) -> None:
    total = sum(len(rows) for rows in converted.expected.scalars.values())
    assert converted.conn.execute("SELECT COUNT(*) FROM v_scalars").fetchone()[0] == total
    assert total > 12 * RECORDS


def blob_rows(rows: list[tuple[Any, ...]], sqlite: bool, wall_at: int) -> list[tuple[Any, ...]]:
    return sorted(
        (
            tuple(
                bits(x, sqlite)
                if n == wall_at
                else bytes(x)
                if isinstance(x, (bytes, memoryview))
                else x
                for n, x in enumerate(row)
            )
            for row in rows
        ),
        key=repr,
    )


def test_images(converted: Converted) -> None:
    got = query(
        converted.conn,
        "SELECT run_path, context, tag, step, wall_time, idx, width, height, data FROM v_images",
    )
    want = converted.expected.images
    assert len(want) > 40 and {row[2] for row in want} >= {
        "images/tf1",
        "images/tf2",
        "image",
        "batch",
    }
    assert blob_rows(got, converted.sqlite, 4) == blob_rows(want, converted.sqlite, 4)


def test_audio(converted: Converted) -> None:
    got = query(
        converted.conn, "SELECT run_path, context, tag, step, wall_time, idx, data FROM v_audio"
    )
    want = converted.expected.audio
    assert len(want) > 40 and {row[2] for row in want} == {"audio/tf1", "audio/tf2"}
    assert blob_rows(got, converted.sqlite, 4) == blob_rows(want, converted.sqlite, 4)


def test_texts(converted: Converted) -> None:
    got = query(
        converted.conn, "SELECT run_path, context, tag, step, wall_time, idx, value FROM v_texts"
    )
    want = converted.expected.texts
    assert len(want) > 100 and "notes/text_summary" in {row[2] for row in want}
    assert blob_rows(got, converted.sqlite, 4) == blob_rows(want, converted.sqlite, 4)


def test_params(converted: Converted) -> None:
    got = query(
        converted.conn, "SELECT run_path, context, key, value, value_num, value_type FROM v_params"
    )
    want = converted.expected.params
    assert {row[:2] for row in want} == {("protos", "trial"), ("tbx", "hp")}
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_tensors(converted: Converted) -> None:
    got = [
        (*row[:7], json.loads(row[7]))
        for row in query(
            converted.conn,
            "SELECT run_path, context, tag, plugin, step, wall_time, data, shape FROM v_tensors",
        )
    ]
    want = converted.expected.tensors
    assert {row[3] for row in want} == {"pr_curves", "custom_scalars", "hparams"}
    assert blob_rows(got, converted.sqlite, 5) == blob_rows(want, converted.sqlite, 5)


def shown_bits(buckets: list[list[Any]], shown: np.ndarray) -> tuple[Any, ...]:
    """Stored buckets rounded to TensorBoard's dtype, as bit patterns (NaN as None)."""
    values = np.array(
        [[NAN if x is None else x for x in row] for row in buckets], dtype=np.float64
    ).reshape(-1, 3)
    with np.errstate(over="ignore"):
        values = values.astype(shown.dtype)
    return tuple(None if math.isnan(x) else x.tobytes().hex() for x in values.reshape(-1))


def test_histograms(converted: Converted) -> None:
    stored: dict[tuple[str, str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for run_path, context, tag, step, wall, buckets in query(
        converted.conn, "SELECT run_path, context, tag, step, wall_time, buckets FROM v_histograms"
    ):
        stored[(run_path, context, tag)].append((step, wall, json.loads(buckets)))
    expected = converted.expected.histograms
    assert {key[2] for key in expected} == {"histograms/tf2", "histograms/ladder", "weights", "raw"}
    assert sorted(stored) == sorted(expected)
    for key, rows in expected.items():
        want = sorted(
            (
                (step, bits(wall, converted.sqlite), shown_bits(array.tolist(), array))
                for step, wall, array in rows
            ),
            key=repr,
        )
        dtypes = {array.dtype for *_, array in rows}
        assert len(dtypes) == 1, (key, dtypes)
        (dtype,) = dtypes
        probe = np.zeros((0, 3), dtype=dtype)
        got = sorted(
            (
                (step, bits(wall, converted.sqlite), shown_bits(buckets, probe))
                for step, wall, buckets in stored[key]
            ),
            key=repr,
        )
        assert got == want, key


def test_histograms_are_trimmed_like_tensorboard(converted: Converted) -> None:
    """The ladder's first limit (-0.52) lies below its min: TensorBoard's first bucket starts
    at min, and the empty DBL_MAX bucket at the end is gone."""
    (buckets,) = converted.conn.execute(
        "SELECT buckets FROM v_histograms WHERE tag = 'histograms/ladder' AND step = 25"
    ).fetchone()
    assert json.loads(buckets) == [
        [-0.48 - 75 * 1e-4, -0.1, 4.0],
        [-0.1, 0.0, 0.0],
        [0.0, 1.0e-3, 3.0],
        [1.0e-3, 2.25, 5.0],
    ]
