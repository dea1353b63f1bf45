"""Histograms, end to end (design §5 histograms, §6 v_histograms): every encoding written by a
real writer comes back as TensorBoard shows it, bucket for bucket, one row per value written,
with a HistogramProto's own buckets kept raw.

Expected buckets come from outside the converter: worked out by hand for the protos this
module builds (``add_histogram_raw``, hand-built TF1 ladders), the tensor as written for TF2
``[k,3]`` values (TensorBoard's form already), and for every value, tensorboardX's own binning
included, TensorBoard's own conversion: the ``[k,3]`` tensor its ``EventFileLoader`` (its
``data_compat`` and ``dataclass_compat`` layers) makes of the file.  That conversion rounds a
HistogramProto's buckets to float32, so it is compared after the same rounding; the hand-made
cases pin the float64 values.  Bucket JSON: ±inf is ``±1e999`` and NaN ``null`` (see
``tbconvert/plugins/histograms.py``).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tensorboard.backend.event_processing.event_file_loader import (
    EventFileLoader,
    RawEventFileLoader,
)
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.util import tensor_util

from tbconvert import convert
from tbconvert.plugins import histograms
from tbconvert.plugins.base import DecodeFailure
from tests.support.eventfiles import (
    event_file_name,
    strip_repeated_metadata,
    summary_event,
    write_events,
)
from tests.support.snapshots import StoreFactory, connect, is_server, rows

W0 = 1_795_000_000.0
DBL_MAX = sys.float_info.max
NAN, INF = float("nan"), float("inf")
SPEC_COLUMNS = [
    "run_id",
    "run_path",
    "context",
    "tag",
    "step",
    "wall_time",
    "count",
    "min",
    "max",
    "buckets",
]
# tensorboardX's own binning: its buckets are checked against TensorBoard's conversion only.
BY_TENSORBOARD_ONLY = None


class Row(NamedTuple):
    step: int
    wall_time: float
    count: float | None
    min: float | None
    max: float | None
    sum: float | None
    sum_squares: float | None
    buckets: list[list[float | None]] | None  # BY_TENSORBOARD_ONLY: see test_tensorboard_...
    raw: list[list[float | None]] | None  # a proto's [[bucket_limit, bucket], ...]; else None


def exact(x: Any) -> Any:
    """Comparable form: NaN -> None (SQLite NULL, JSON null), -0.0 told from 0.0."""
    if isinstance(x, (list, tuple)):
        return [exact(item) for item in x]
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return (float(x), math.copysign(1.0, x)) if isinstance(x, float) else x


def as_stored(row: Row, store: str) -> Row:
    """SQLite keeps integral REAL values as integers, so -0.0 comes back as 0.0 from the REAL
    columns (count, min, max, sum, sum_squares); the JSON buckets keep the sign.  PostgreSQL's
    float8 keeps the sign everywhere."""
    if is_server(store):
        return row

    def real(x: float | None) -> float | None:
        return 0.0 if x == 0 else x

    return row._replace(
        **{name: real(getattr(row, name)) for name in ("count", "min", "max", "sum", "sum_squares")}
    )


def proto_row(step: int, wall: float, h: HistogramProto, buckets: list[list[float]] | None) -> Row:
    """The row of a proto whose TensorBoard buckets the caller worked out (or left to
    TensorBoard's conversion): the proto's own fields, and its buckets as written, raw."""
    raw = [[limit, count] for limit, count in zip(h.bucket_limit, h.bucket, strict=True)]
    return Row(step, wall, h.num, h.min, h.max, h.sum, h.sum_squares, buckets, raw)


def tensor_row(step: int, wall: float, rows: np.ndarray) -> Row:
    """A TF2 [k,3] tensor is TensorBoard's form already: buckets as written."""
    rows = rows.astype(np.float64).tolist()
    low, high = (rows[0][0], rows[-1][1]) if rows else (None, None)
    return Row(step, wall, math.fsum(r[2] for r in rows), low, high, None, None, rows, None)


def hist_metadata() -> SummaryMetadata:
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="histograms"))


def tensor_value(
    tag: str,
    rows: np.ndarray,
    *,
    dtype: str = "<f8",
    field: str = "content",
    shape: Sequence[int] | None = None,
) -> Summary.Value:
    """TF2 ``tf.summary.histogram``: [k,3] (left, right, count), md ``histograms``."""
    rows = np.asarray(rows, dtype=dtype)
    tensor = TensorProto(dtype=1 if rows.dtype.itemsize == 4 else 2)
    for size in shape or (len(rows), 3):
        tensor.tensor_shape.dim.add(size=size)
    if field == "content":
        tensor.tensor_content = rows.tobytes()
    else:
        tensor.double_val.extend(rows.reshape(-1).tolist())
    return Summary.Value(tag=tag, tensor=tensor, metadata=hist_metadata())


def tf2_rows(rng: np.random.Generator, k: int = 30) -> np.ndarray:
    data = rng.normal(size=500)
    counts, edges = np.histogram(data, bins=np.linspace(data.min(), data.max(), k + 1))
    return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)


Expected = dict[str, dict[str, list[Row]]]  # run -> tag -> rows in file order


class Converted(NamedTuple):
    expected: Expected
    summary: Any
    store: str
    conn: Any  # read-only connection to ``store``
    store_root: Path  # the logdir is store_root / "logdir"


def write_tbx(run: Path, expected: dict[str, list[Row]]) -> None:
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(1)
    given = {}
    with SummaryWriter(logdir=str(run), flush_secs=3600) as writer:
        for step in range(4):
            given[step] = rng.normal(loc=step, scale=1 + step, size=1000)
            writer.add_histogram("weights", given[step], step, walltime=W0 + step)
            # empty buckets at both ends, as torch and Keras write them; min lies above the
            # first limit (a backwards first bucket if it were kept)
            counts = [0, 1, 2 * step, 3, 0, 4 + step, 0, 0]
            limits = [-3.0, -1.0, 0.0, 0.1 * step, 2.0, 3.5 + step, 9.0, DBL_MAX]
            raw = dict(
                min=-1.25,
                max=3.25 + step,
                num=float(sum(counts)),
                sum=4.75 + step,
                sum_squares=20.5 + step,
            )
            writer.add_histogram_raw(
                "raw",
                **raw,
                bucket_limits=limits,
                bucket_counts=counts,
                global_step=step,
                walltime=W0 + step + 0.5,
            )
            shown = [
                [-1.25, -1.0, 1.0],
                [-1.0, 0.0, 2.0 * step],
                [0.0, 0.1 * step, 3.0],
                [0.1 * step, 2.0, 0.0],
                [2.0, 3.25 + step, 4.0 + step],
            ]
            pairs = [[limit, float(count)] for limit, count in zip(limits, counts, strict=True)]
            expected.setdefault("raw", []).append(
                Row(
                    step,
                    W0 + step + 0.5,
                    raw["num"],
                    raw["min"],
                    raw["max"],
                    raw["sum"],
                    raw["sum_squares"],
                    shown,
                    pairs,
                )
            )
    (path,) = run.glob("*tfevents*")
    for payload in RawEventFileLoader(str(path)).Load():
        event = Event.FromString(payload)
        for value in event.summary.value:
            if value.tag == "weights":  # tensorboardX's own binning: raw is what it wrote
                h, values = value.histo, given[event.step]
                assert (h.num, h.min, h.max) == (len(values), values.min(), values.max())
                assert sum(h.bucket) == len(values) and len(h.bucket) > 30
                # an empty first bucket whose limit lies below min: a backwards bucket if kept
                assert h.bucket[0] == 0 and h.bucket_limit[0] < h.min
                expected.setdefault("weights", []).append(
                    proto_row(event.step, event.wall_time, h, BY_TENSORBOARD_ONLY)
                )


def write_tf1(run: Path, expected: dict[str, list[Row]]) -> None:
    """TF1 FileWriter: ``histo`` on TF's ladder (±DBL_MAX outer edges, empty runs collapsed),
    two values per Event, metadata only on each tag's first occurrence."""
    cases = [
        # a -inf sample lands in the -DBL_MAX bucket; the empty tail collapses onto DBL_MAX
        (
            HistogramProto(
                min=-INF,
                max=2.0,
                num=4,
                sum=-INF,
                sum_squares=INF,
                bucket_limit=[-DBL_MAX, 0.9, 1.0, 2.2, DBL_MAX],
                bucket=[1, 0, 1, 2, 0],
            ),
            [[-INF, -DBL_MAX, 1.0], [-DBL_MAX, 0.9, 0.0], [0.9, 1.0, 1.0], [1.0, 2.0, 2.0]],
        ),
        # an empty TF1 histogram: min/max left at their initial ±DBL_MAX, no bucket shown
        (HistogramProto(min=DBL_MAX, max=-DBL_MAX, num=0, bucket_limit=[DBL_MAX], bucket=[0]), []),
        (
            HistogramProto(
                min=-0.5,
                max=0.7,
                num=3,
                sum=0.25,
                sum_squares=0.99,
                bucket_limit=[-0.55, -0.45, 0.65, 0.75, DBL_MAX],
                bucket=[0, 1, 0, 2, 0],
            ),
            [[-0.5, -0.45, 1.0], [-0.45, 0.65, 0.0], [0.65, 0.7, 2.0]],
        ),
        # one bucket left: both its edges are min and max
        (
            HistogramProto(
                min=-0.0,
                max=5e-324,
                num=2,
                sum=5e-324,
                sum_squares=0.0,
                bucket_limit=[-1e-12, 1e-12, DBL_MAX],
                bucket=[0, 2, 0],
            ),
            [[-0.0, 5e-324, 2.0]],
        ),
        # NaN and negative counts are not "> 0": empty, as far as trimming goes
        (
            HistogramProto(
                min=1.0,
                max=4.0,
                num=3,
                sum=7.5,
                sum_squares=21.25,
                bucket_limit=[0.5, 1.5, 2.5, 3.5, 4.5, 5.5],
                bucket=[NAN, 1, NAN, -1, 3, -2],
            ),
            [[1.0, 1.5, 1.0], [1.5, 2.5, NAN], [2.5, 3.5, -1.0], [3.5, 4.0, 3.0]],
        ),
    ]
    rng = np.random.default_rng(2)
    events = []
    for step, (proto, shown) in enumerate(cases):
        rows = tf2_rows(rng, 5)
        values = [
            Summary.Value(tag="ladder", histo=proto, metadata=hist_metadata()),
            tensor_value("tensor", rows),
        ]
        events.append(summary_event(step, W0 + step, values))
        expected.setdefault("ladder", []).append(proto_row(step, W0 + step, proto, shown))
        expected.setdefault("tensor", []).append(tensor_row(step, W0 + step, rows))
    events = strip_repeated_metadata(events)
    assert not events[1].summary.value[1].HasField("metadata")
    write_events(run / event_file_name(W0), events)


def write_tf2(run: Path, expected: dict[str, list[Row]]) -> None:
    """TF2 [k,3] tensors after a ``brain.Event:2`` record, framed by tensorboard's RecordWriter."""
    rng = np.random.default_rng(3)
    empty = np.zeros((0, 3))
    nonfinite = np.array([[-INF, -1.0, 1.0], [-1.0, 1.0, NAN], [1.0, INF, 2.0]])
    events = []
    for step in range(0, 50, 10):
        wall = W0 + step * 0.1
        cases = {
            "k30": (tf2_rows(rng), "<f8", "content"),
            "k0": (empty, "<f8", "content"),
            "double_val": (tf2_rows(rng, 7), "<f8", "val"),
            "float32": (tf2_rows(rng, 4) + 0.1, "<f4", "content"),
            "nonfinite": (nonfinite, "<f8", "content"),
        }
        values = []
        for tag, (case_rows, dtype, field) in cases.items():
            values.append(tensor_value(tag, case_rows, dtype=dtype, field=field))
            written = np.asarray(case_rows, dtype=dtype)  # float32 widens exactly on the way back
            expected.setdefault(tag, []).append(tensor_row(step, wall, written))
        events.append(summary_event(step, wall, values))
    write_events(run / event_file_name(W0), events)


WRITERS = {"tbx": write_tbx, "tf1": write_tf1, "tf2": write_tf2}
CASES = [
    (run, tag)
    for run, tags in {
        "tbx": ["weights", "raw"],
        "tf1": ["ladder", "tensor"],
        "tf2": ["k30", "k0", "double_val", "float32", "nonfinite"],
    }.items()
    for tag in tags
]


@pytest.fixture(scope="module")
def converted(
    tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> Iterator[Converted]:
    root = tmp_path_factory.mktemp("histograms")
    expected: Expected = {}
    for run, write in WRITERS.items():
        write(root / "logdir" / run, expected.setdefault(run, {}))
    store = make_store(root)
    summary = convert(root / "logdir", store, progress=False)
    with closing(connect(store)) as conn:
        yield Converted(expected, summary, store, conn, root)


def written(expected: Expected) -> int:
    return sum(len(rows) for tags in expected.values() for rows in tags.values())


def test_every_value_is_one_row(converted: Converted) -> None:
    expected, summary, _, conn, _ = converted
    assert summary.exit_code == 0 and summary.undecodable == {} and summary.skipped == {}
    assert summary.points == Counter({"histograms": written(expected)})
    assert conn.execute("SELECT COUNT(*) FROM histograms").fetchone()[0] == written(expected)
    assert conn.execute("SELECT COUNT(*) FROM v_histograms").fetchone()[0] == written(expected)
    assert conn.execute("SELECT COUNT(*) FROM tensors").fetchone()[0] == 0
    columns = [d[0] for d in conn.execute("SELECT * FROM v_histograms LIMIT 0").description]
    assert columns == SPEC_COLUMNS


def stored_rows(conn: Any, run: str, tag: str) -> list[Row]:
    """The stored rows of one series, in file order, JSON parsed."""
    stored = rows(
        conn,
        "SELECT p.step, p.wall_time, p.count, p.min, p.max, p.sum, p.sum_squares, p.buckets, "
        "p.raw_buckets "
        "FROM histograms p JOIN series s ON s.id = p.series_id JOIN runs r ON r.id = s.run_id "
        "WHERE r.run_path = ? AND s.name = ? AND s.plugin = 'histograms' "
        "ORDER BY p.file_id, p.record_offset, p.value_index",
        (run, tag),
    )
    return [
        Row(*row[:-2], json.loads(row[-2]), None if row[-1] is None else json.loads(row[-1]))
        for row in stored
    ]


@pytest.mark.parametrize(("run", "tag"), CASES)
def test_rows_exact(converted: Converted, run: str, tag: str) -> None:
    expected, _, store, conn, _ = converted
    got = stored_rows(conn, run, tag)
    want = [as_stored(row, store) for row in expected[run][tag]]
    if tag == "weights":  # tensorboardX's binning: buckets by test_tensorboard_buckets only
        assert all(row.buckets is BY_TENSORBOARD_ONLY for row in want)
        got = [row._replace(buckets=BY_TENSORBOARD_ONLY) for row in got]
    assert exact(got) == exact(want)
    view = rows(
        conn,
        "SELECT step, wall_time, count, min, max, buckets FROM v_histograms "
        "WHERE run_path = ? AND context = '' AND tag = ? ORDER BY step",
        (run, tag),
    )
    assert exact([(*row[:-1], json.loads(row[-1])) for row in view]) == exact(
        [
            (r.step, r.wall_time, r.count, r.min, r.max, r.buckets)
            for r in stored_rows(conn, run, tag)
        ]
    )


def tensorboard_histograms(path: Path) -> dict[str, list[tuple[int, float, np.ndarray]]]:
    """What TensorBoard makes of a file's histograms: per tag, (step, wall time, [k,3] array)
    from its own loader (``data_compat`` + ``dataclass_compat``), in file order."""
    found: dict[str, list[tuple[int, float, np.ndarray]]] = {}
    with np.errstate(over="ignore"):  # its float32 cast of ±DBL_MAX edges
        events = list(EventFileLoader(str(path)).Load())
    for event in events:
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name in ("histograms", ""):
                array = tensor_util.make_ndarray(value.tensor)
                found.setdefault(value.tag, []).append((event.step, event.wall_time, array))
    return found


def same_bits(stored: list[list[float | None]], shown: np.ndarray) -> bool:
    """``stored`` (float64 JSON, NaN as None) rounds to exactly TensorBoard's array (float32
    for a converted HistogramProto, the written dtype for a tensor), NaN equal to NaN."""
    values = np.array(
        [[NAN if x is None else x for x in row] for row in stored], dtype=np.float64
    ).reshape(-1, 3)
    with np.errstate(over="ignore"):  # ±DBL_MAX rounds to ±inf in float32, as TensorBoard's
        values = values.astype(shown.dtype)
    unsigned = {4: np.uint32, 8: np.uint64}[shown.dtype.itemsize]
    nan = np.isnan(values) & np.isnan(shown)
    return values.shape == shown.shape and bool(
        np.all(nan | (values.view(unsigned) == shown.view(unsigned)))
    )


@pytest.mark.parametrize("run", list(WRITERS))
def test_tensorboard_buckets(converted: Converted, run: str) -> None:
    """Every row's buckets are what TensorBoard shows for that value."""
    (path,) = (converted.store_root / "logdir" / run).glob("*tfevents*")
    shown = tensorboard_histograms(path)
    assert set(shown) == set(converted.expected[run])
    for tag, values in shown.items():
        got = stored_rows(converted.conn, run, tag)
        assert [(row.step, row.wall_time) for row in got] == [(s, w) for s, w, _ in values]
        for row, (step, _, array) in zip(got, values, strict=True):
            assert same_bits(row.buckets, array), (tag, step, row.buckets, array.tolist())
            assert array.dtype == (np.float32 if row.raw is not None else array.dtype)


def test_buckets_are_strict_json(converted: Converted) -> None:
    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    expected, _, store, conn, _ = converted
    for (text,) in conn.execute("SELECT buckets FROM histograms"):
        json.loads(text, parse_constant=refuse)
    # The database's own JSON parser reads every row as an array (PostgreSQL's cast raises on
    # invalid JSON; PostgreSQL 15 has no IS JSON predicate).
    arrays = (
        "SELECT COUNT(*) FROM histograms WHERE json_typeof(buckets::json) = 'array'"
        if is_server(store)
        else "SELECT COUNT(*) FROM histograms WHERE json_valid(buckets) "
        "AND json_type(buckets) = 'array'"
    )
    assert conn.execute(arrays).fetchone()[0] == written(expected)


def test_nonfinite_and_dbl_max_edges(converted: Converted) -> None:
    _, _, store, conn, _ = converted
    (text,) = conn.execute(
        "SELECT buckets FROM v_histograms WHERE tag = 'nonfinite' LIMIT 1"
    ).fetchone()
    assert text == "[[-1e999,-1.0,1.0],[-1.0,1.0,null],[1.0,1e999,2.0]]"
    if is_server(store):
        # PostgreSQL's JSON numbers are numeric, and 1e999 overflows a float8 cast: the edges
        # come out as the JSON number text, which must read back as the same floats.
        edges = "buckets::json -> 0 ->> 0, buckets::json -> 3 ->> 1, buckets::json -> 1 ->> 0"
    else:  # SQLite's JSON functions overflow 1e999 to infinity themselves
        edges = (
            "json_extract(buckets, '$[0][0]'), json_extract(buckets, '$[3][1]'), "
            "json_extract(buckets, '$[1][0]')"
        )
    sql = f"SELECT {edges}, min, max FROM v_histograms WHERE tag = 'ladder' ORDER BY step LIMIT 1"
    *found, low, high = conn.execute(sql).fetchone()
    # TensorBoard's buckets: [[-inf, -DBL_MAX, 1], [-DBL_MAX, 0.9, 0], [0.9, 1, 1], [1, 2, 2]]
    assert [float(edge) for edge in found] + [low, high] == [-INF, 2.0, -DBL_MAX, -INF, 2.0]


def test_series_plugin(converted: Converted) -> None:
    got = set(
        rows(
            converted.conn,
            "SELECT r.run_path, s.name, s.plugin FROM series s JOIN runs r ON r.id = s.run_id",
        )
    )
    assert got == {(run, tag, "histograms") for run, tag in CASES}


def bad_tensor(shape: Iterable[int], values: list[float], dtype: int = 2) -> Summary.Value:
    tensor = TensorProto(dtype=dtype, double_val=values)
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    return Summary.Value(tag="bad", tensor=tensor, metadata=hist_metadata())


BAD = {
    "rank1": bad_tensor([6], [1.0] * 6),
    "k_by_2": bad_tensor([3, 2], [1.0] * 6),
    "broadcast": bad_tensor([1 << 40, 3], [1.0]),  # must not allocate 2**42 doubles
    "short": bad_tensor([2, 3], [1.0] * 5),
    "string": Summary.Value(tag="bad", tensor=TensorProto(dtype=7, string_val=[b"x"])),
    "lengths": Summary.Value(tag="bad", histo=HistogramProto(bucket_limit=[1.0], bucket=[1, 2])),
    "scalar": Summary.Value(tag="bad", simple_value=1.0),
}


@pytest.mark.parametrize("case", list(BAD))
def test_unreadable_values_raise_decode_failure(case: str) -> None:
    with pytest.raises(DecodeFailure):
        histograms.decode(BAD[case], hist_metadata())


def test_unreadable_values_are_kept_raw(tmp_path: Path, store: str) -> None:
    values = [BAD["rank1"], BAD["lengths"]]
    write_events(tmp_path / "logdir" / event_file_name(W0), [summary_event(1, W0, values)])
    summary = convert(tmp_path / "logdir", store, progress=False)
    assert summary.undecodable == {"histograms": {"bad": 2}}
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT dtype, shape FROM v_tensors ORDER BY dtype") == [
            ("float64", "[6]"),
            ("histo_proto", "[]"),
        ]
        assert conn.execute("SELECT COUNT(*) FROM histograms").fetchone()[0] == 0


@given(st.lists(st.lists(st.floats(width=64), min_size=1, max_size=3), max_size=6))
def test_bucket_json_of_python_floats_is_that_of_their_array(rows: list[list[float]]) -> None:
    """A HistogramProto's buckets are written from Python floats, a tensor's from a float64
    array: the same numbers must give the same text, whichever way they came (a store must
    not depend on the path a value took)."""
    square = [row + [0.0] * (3 - len(row)) for row in rows]
    assert histograms._floats_json(square) == histograms.buckets_json(
        np.array(square, dtype=np.float64).reshape(-1, 3)
    )
    assert json.loads(histograms._floats_json(square)) == [
        [None if x != x else x for x in row] for row in square
    ]


@given(
    st.sampled_from([(1, np.float32, "float_val"), (2, np.float64, "double_val")]),
    st.lists(st.floats(width=32), min_size=3, max_size=30).map(lambda v: v[: len(v) // 3 * 3]),
)
def test_a_packed_histogram_tensor_gives_the_row_of_its_values_given_one_by_one(
    kind: tuple[int, Any, str], values: list[float]
) -> None:
    """Packed [k, 3] tensors (what writers send) are read as Python floats from their bytes;
    the same values given one by one go through NumPy and TensorBoard's make_ndarray."""
    dtype, numpy_type, field = kind
    shape = {"dim": [{"size": len(values) // 3}, {"size": 3}]}
    content = np.array(values, dtype=numpy_type).tobytes()
    packed = TensorProto(dtype=dtype, tensor_shape=shape, tensor_content=content)
    one_by_one = TensorProto(dtype=dtype, tensor_shape=shape, **{field: values})
    assert repr(histograms.tensor_row(packed)) == repr(histograms.tensor_row(one_by_one))


@pytest.mark.parametrize(
    ("counts", "count"),
    [
        ([0.1] * 10, 1.0),  # exactly rounded: a running sum gives 0.9999999999999999
        ([1e308, 1e308, -1e308], 1e308),  # the exact sum, which partial sums overflow
        ([1e308, 1e308], math.inf),
        ([-1e308, -1e308], -math.inf),
        ([math.inf, 1e308, 1e308], math.inf),
        ([1e308, 1e308, -math.inf], -math.inf),
        ([math.inf, -math.inf], math.nan),
        ([math.nan, math.inf, -math.inf], math.nan),
        ([math.nan, 1e308, 1e308], math.nan),
    ],
)
def test_a_tensors_count_is_the_sum_of_its_counts_where_fsum_raises_too(
    counts: list[float], count: float
) -> None:
    """IEEE's sum where ``math.fsum`` raises (both infinities, partial sums past the float
    range), in the packed encoding and value by value."""
    rows = np.array([[0.0, 1.0, c] for c in counts])
    for field in ("content", "val"):
        (row,) = histograms.decode(tensor_value("h", rows, field=field), None).rows
        assert repr(row[0]) == repr(count)


def test_a_histogram_of_both_infinities_is_stored_with_the_rest(tmp_path: Path, store: str) -> None:
    """Counts of +inf and -inf once stopped the whole conversion (fsum's ValueError); their
    NaN sum is stored as NULL, as every NaN outside the JSON is (SQLite holds no NaN)."""
    values = [
        tensor_value("odd", np.array([[0.0, 1.0, math.inf], [1.0, 2.0, -math.inf]])),
        tensor_value("plain", np.array([[0.0, 1.0, 3.0]])),
    ]
    write_events(tmp_path / "logdir" / event_file_name(W0), [summary_event(1, W0, values)])
    summary = convert(tmp_path / "logdir", store, progress=False)
    assert summary.exit_code == 0
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT tag, count FROM v_histograms ORDER BY tag") == [
            ("odd", None),
            ("plain", 3.0),
        ]
