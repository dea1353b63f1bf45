"""Histograms, end to end (SPEC §5 histograms, §6 v_histograms): every encoding written by a
real writer comes back exactly, bucket for bucket, one row per value written.

Expected rows are worked out by the test from what it wrote: the buckets handed to the writer
(``add_histogram_raw``, hand-built protos and tensors), or, for tensorboardX's own binning,
the HistogramProto read back from the file with tensorboard's raw record reader.  Bucket
JSON: ±inf is ``±1e999`` and NaN ``null`` (see ``converter/plugins/histograms.py``).
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
from eventfiles import event_file_name, strip_repeated_metadata, summary_event, write_events
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from converter.conversion import convert
from converter.plugins import histograms
from converter.plugins.base import DecodeFailure
from tests.snapshots import StoreFactory, connect, is_server, rows

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


class Row(NamedTuple):
    step: int
    wall_time: float
    count: float | None
    min: float | None
    max: float | None
    sum: float | None
    sum_squares: float | None
    buckets: list[list[float | None]]


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


def proto_row(step: int, wall: float, h: HistogramProto) -> Row:
    lefts = [h.min, *h.bucket_limit[:-1]]
    buckets = [list(b) for b in zip(lefts, h.bucket_limit, h.bucket, strict=True)]
    return Row(step, wall, h.num, h.min, h.max, h.sum, h.sum_squares, buckets)


def tensor_row(step: int, wall: float, rows: np.ndarray) -> Row:
    rows = rows.astype(np.float64).tolist()
    low, high = (rows[0][0], rows[-1][1]) if rows else (None, None)
    return Row(step, wall, math.fsum(r[2] for r in rows), low, high, None, None, rows)


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


def write_tbx(run: Path, expected: dict[str, list[Row]]) -> None:
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(1)
    given = {}
    with SummaryWriter(logdir=str(run), flush_secs=3600) as writer:
        for step in range(4):
            given[step] = rng.normal(loc=step, scale=1 + step, size=1000)
            writer.add_histogram("weights", given[step], step, walltime=W0 + step)
            counts = [1, 2 * step, 3, 0, 4 + step]
            limits = [-1.0, 0.0, 0.1 * step, 2.0, 3.5 + step]
            raw = dict(
                min=-1.25,
                max=3.5 + step,
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
            lefts = [raw["min"], *limits[:-1]]
            buckets = [[a, b, float(c)] for a, b, c in zip(lefts, limits, counts, strict=True)]
            expected.setdefault("raw", []).append(
                Row(
                    step,
                    W0 + step + 0.5,
                    raw["num"],
                    raw["min"],
                    raw["max"],
                    raw["sum"],
                    raw["sum_squares"],
                    buckets,
                )
            )
    (path,) = run.glob("*tfevents*")
    for payload in RawEventFileLoader(str(path)).Load():
        event = Event.FromString(payload)
        for value in event.summary.value:
            if value.tag == "weights":  # tensorboardX's own binning: take what it wrote
                h, values = value.histo, given[event.step]
                assert (h.num, h.min, h.max) == (len(values), values.min(), values.max())
                assert sum(h.bucket) == len(values) and len(h.bucket) > 30
                expected.setdefault("weights", []).append(proto_row(event.step, event.wall_time, h))


def write_tf1(run: Path, expected: dict[str, list[Row]]) -> None:
    """TF1 FileWriter: ``histo`` on TF's ladder (±DBL_MAX outer edges, empty runs collapsed),
    two values per Event, metadata only on each tag's first occurrence."""
    protos = [
        # a -inf sample lands in the -DBL_MAX bucket; the empty tail collapses onto DBL_MAX
        HistogramProto(
            min=-INF,
            max=2.0,
            num=4,
            sum=-INF,
            sum_squares=INF,
            bucket_limit=[-DBL_MAX, 0.9, 1.0, 2.2, DBL_MAX],
            bucket=[1, 0, 1, 2, 0],
        ),
        # an empty TF1 histogram: min/max left at their initial ±DBL_MAX
        HistogramProto(min=DBL_MAX, max=-DBL_MAX, num=0, bucket_limit=[DBL_MAX], bucket=[0]),
        HistogramProto(
            min=-0.5,
            max=0.7,
            num=3,
            sum=0.25,
            sum_squares=0.99,
            bucket_limit=[-0.55, -0.45, 0.65, 0.75, DBL_MAX],
            bucket=[0, 1, 0, 2, 0],
        ),
        HistogramProto(
            min=-0.0,
            max=5e-324,
            num=2,
            sum=5e-324,
            sum_squares=0.0,
            bucket_limit=[-1e-12, 1e-12, DBL_MAX],
            bucket=[0, 2, 0],
        ),
    ]
    rng = np.random.default_rng(2)
    events = []
    for step, proto in enumerate(protos):
        rows = tf2_rows(rng, 5)
        values = [
            Summary.Value(tag="ladder", histo=proto, metadata=hist_metadata()),
            tensor_value("tensor", rows),
        ]
        events.append(summary_event(step, W0 + step, values))
        expected.setdefault("ladder", []).append(proto_row(step, W0 + step, proto))
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
        yield Converted(expected, summary, store, conn)


def written(expected: Expected) -> int:
    return sum(len(rows) for tags in expected.values() for rows in tags.values())


def test_every_value_is_one_row(converted: Converted) -> None:
    expected, summary, _, conn = converted
    assert summary.exit_code == 0 and summary.undecodable == {} and summary.skipped == {}
    assert summary.points == Counter({"histograms": written(expected)})
    assert conn.execute("SELECT COUNT(*) FROM histograms").fetchone()[0] == written(expected)
    assert conn.execute("SELECT COUNT(*) FROM v_histograms").fetchone()[0] == written(expected)
    assert conn.execute("SELECT COUNT(*) FROM tensors").fetchone()[0] == 0
    columns = [d[0] for d in conn.execute("SELECT * FROM v_histograms LIMIT 0").description]
    assert columns == SPEC_COLUMNS


@pytest.mark.parametrize(("run", "tag"), CASES)
def test_rows_exact(converted: Converted, run: str, tag: str) -> None:
    expected, _, store, conn = converted
    stored = rows(
        conn,
        "SELECT p.step, p.wall_time, p.count, p.min, p.max, p.sum, p.sum_squares, p.buckets "
        "FROM histograms p JOIN series s ON s.id = p.series_id JOIN runs r ON r.id = s.run_id "
        "WHERE r.run_path = ? AND s.name = ? AND s.plugin = 'histograms' "
        "ORDER BY p.file_id, p.record_offset, p.value_index",
        (run, tag),
    )
    got = [Row(*row[:-1], json.loads(row[-1])) for row in stored]
    assert exact(got) == exact([as_stored(row, store) for row in expected[run][tag]])
    view = rows(
        conn,
        "SELECT step, wall_time, count, min, max, buckets FROM v_histograms "
        "WHERE run_path = ? AND context = '' AND tag = ? ORDER BY step",
        (run, tag),
    )
    assert exact(view) == exact(
        [
            (r.step, r.wall_time, r.count, r.min, r.max, b)
            for r, (*_, b) in zip(got, stored, strict=True)
        ]
    )


def test_buckets_are_strict_json(converted: Converted) -> None:
    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    expected, _, store, conn = converted
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
    _, _, store, conn = converted
    (text,) = conn.execute(
        "SELECT buckets FROM v_histograms WHERE tag = 'nonfinite' LIMIT 1"
    ).fetchone()
    assert text == "[[-1e999,-1.0,1.0],[-1.0,1.0,null],[1.0,1e999,2.0]]"
    if is_server(store):
        # PostgreSQL's JSON numbers are numeric, and 1e999 overflows a float8 cast: the edges
        # come out as the JSON number text, which must read back as the same floats.
        edges = "buckets::json -> 0 ->> 0, buckets::json -> 4 ->> 1, buckets::json -> 1 ->> 0"
    else:  # SQLite's JSON functions overflow 1e999 to infinity themselves
        edges = (
            "json_extract(buckets, '$[0][0]'), json_extract(buckets, '$[4][1]'), "
            "json_extract(buckets, '$[1][0]')"
        )
    sql = f"SELECT {edges}, min, max FROM v_histograms WHERE tag = 'ladder' ORDER BY step LIMIT 1"
    *found, low, high = conn.execute(sql).fetchone()
    assert [float(edge) for edge in found] + [low, high] == [-INF, DBL_MAX, -DBL_MAX, -INF, 2.0]


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
