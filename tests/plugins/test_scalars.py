"""Scalars, end to end (design §5 scalars, §6): every encoding written by a real writer comes back
exactly, row for row and in file order, through the tables and the public views.

Expected values are computed from what the test wrote (float32 widening of the float handed to
a float32 field, the exact float64 for DT_DOUBLE, ...), never from the converter's output.
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from tbconvert import convert
from tests.support.eventfiles import (
    ScalarPoint,
    append_events,
    double_content_scalar,
    event_file_name,
    half_scalar,
    int_scalar,
    shape1_scalar,
    simple_value,
    strip_repeated_metadata,
    summary_event,
    tf2_scalar,
    torch_double_scalar,
    torch_new_style_scalar,
    write_events,
    write_tbx_scalars,
)
from tests.support.snapshots import StoreFactory, connect, is_server, rows

W0 = 1_795_000_000.0  # a fixed base wall time (2026-11)
NAN, INF = float("nan"), float("inf")
SPEC_SCALAR_COLUMNS = ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"]


# --------------------------------------------------------------------------- expectations


def as_float32(value: float) -> float:
    return float(np.float32(value))


def as_float16(value: float) -> float:
    return float(np.float16(value))


def as_int(value: int) -> float:
    return float(int(value))


class Encoding(NamedTuple):
    build: Callable[[str, Any], Any]  # (tag, value) -> Summary.Value
    dtype: str  # what series.dtype must say
    widen: Callable[[Any], float]  # written value -> float64 the store must hold


ENCODINGS: dict[str, Encoding] = {
    "simple_value": Encoding(simple_value, "float32", as_float32),
    "tf2_tensor_content": Encoding(tf2_scalar, "float32", as_float32),
    "torch_new_style_float_val": Encoding(torch_new_style_scalar, "float32", as_float32),
    "torch_double_val": Encoding(torch_double_scalar, "float64", float),
    "double_tensor_content": Encoding(double_content_scalar, "float64", float),
    "shape1_float_content": Encoding(
        lambda t, v: shape1_scalar(t, v, "float32", "content"), "float32", as_float32
    ),
    "shape1_float_val": Encoding(
        lambda t, v: shape1_scalar(t, v, "float32", "val"), "float32", as_float32
    ),
    "shape1_double_content": Encoding(
        lambda t, v: shape1_scalar(t, v, "float64", "content"), "float64", float
    ),
    "int32_int_val": Encoding(lambda t, v: int_scalar(t, v, "int32", "val"), "int32", as_int),
    "int32_tensor_content": Encoding(
        lambda t, v: int_scalar(t, v, "int32", "content"), "int32", as_int
    ),
    "int64_int64_val": Encoding(lambda t, v: int_scalar(t, v, "int64", "val"), "int64", as_int),
    "int64_tensor_content": Encoding(
        lambda t, v: int_scalar(t, v, "int64", "content"), "int64", as_int
    ),
    "half_half_val": Encoding(lambda t, v: half_scalar(t, v, "val"), "float16", as_float16),
    "half_tensor_content": Encoding(
        lambda t, v: half_scalar(t, v, "content"), "float16", as_float16
    ),
}

# 0.1 and 1/3 tell float32 from float64; 2**40+1 is exact in float64 only; 1e-45 is a float32
# subnormal; 3e38 is near the float32 maximum.
FLOAT_VALUES = [2.5, 0.1, 1 / 3, 2.0**40 + 1, -1e-30, 1e-45, 3.0e38, 0.0, NAN, INF, -INF, 7.0]
HALF_VALUES = [2.5, 0.1, 1 / 3, 65504.0, 6e-8, -2.0, 0.0, NAN, INF, -INF, 7.0]
INT32_VALUES = [0, 7, -3, 2**31 - 1, -(2**31), 12]
INT64_VALUES = [0, 7, -3, 2**40 + 1, 2**53 + 1, 2**63 - 1, -(2**63), 12]


def values_for(encoding: str) -> list[Any]:
    if encoding.startswith("int32"):
        return INT32_VALUES
    if encoding.startswith("int64"):
        return INT64_VALUES
    if encoding.startswith("half"):
        return HALF_VALUES
    return FLOAT_VALUES


class Point(NamedTuple):
    step: int
    wall_time: float
    value: float | None  # None where the written value is NaN (SQLite has no NaN)


def point(step: int, wall_time: float, value: float) -> Point:
    return Point(step, wall_time, None if math.isnan(value) else value)


@dataclass
class Series:
    dtype: str
    points: list[Point] = field(default_factory=list)


@dataclass
class RunLog:
    """What one case wrote into its run directory, file by file, in record order."""

    run_dir: Path
    files: dict[str, list[tuple[str, str, Point]]] = field(default_factory=dict)

    def hand(
        self,
        filename: str,
        records: Iterable[tuple[int, float, list[tuple[str, str, Any]]]],
        *,
        file_version: bool = True,
        metadata_once: bool = False,
    ) -> Path:
        """Write hand-built Events ``(step, wall_time, [(tag, encoding, value), ...])``."""
        records = list(records)
        events = [
            summary_event(step, wall, [ENCODINGS[enc].build(tag, v) for tag, enc, v in values])
            for step, wall, values in records
        ]
        if metadata_once:
            events = strip_repeated_metadata(events)
        path = write_events(self.run_dir / filename, events, file_version=file_version)
        self.files[path.name] = [
            (tag, ENCODINGS[enc].dtype, point(step, wall, ENCODINGS[enc].widen(v)))
            for step, wall, values in records
            for tag, enc, v in values
        ]
        return path

    def tbx(self, points: Iterable[tuple[str, int | None, float, float]], suffix: str = "") -> Path:
        """Log through tensorboardX's SummaryWriter.add_scalar (simple_value, float32)."""
        points = [ScalarPoint(*p) for p in points]
        path = write_tbx_scalars(self.run_dir, points, suffix=suffix)
        self.files[path.name] = [
            # A step left to the writer is 0.
            (p.tag, "float32", point(p.step or 0, p.wall_time, as_float32(p.value)))
            for p in points
        ]
        return path

    def expected(self) -> dict[str, Series]:
        """Per tag, the points in file order: files by name (as the converter orders a run's
        files of one context), then record order, then value order in the record."""
        result: dict[str, Series] = {}
        for name in sorted(self.files):
            for tag, dtype, pt in self.files[name]:
                result.setdefault(tag, Series(dtype)).points.append(pt)
        return result


# --------------------------------------------------------------------------- the cases


def encoding_case(encoding: str) -> Callable[[RunLog], None]:
    def write(log: RunLog) -> None:
        values = values_for(encoding)
        log.hand(
            event_file_name(W0),
            [
                (step, W0 + step * 0.123456789, [("value", encoding, v)])
                for step, v in enumerate(values)
            ],
        )

    return write


def case_tbx_curve(log: RunLog) -> None:
    rng = np.random.default_rng(0)
    points = []
    for step in range(0, 300, 3):
        wall = W0 + step * 0.0371
        loss = 2.3 * math.exp(-step / 80) + 0.05 * float(rng.random())
        acc = 1 - 0.9 * math.exp(-step / 60)
        points += [("train/loss", step, wall, loss), ("train/accuracy", step, wall, acc)]
    log.tbx(points)


def case_tbx_nonfinite(log: RunLog) -> None:
    values = [1.5, NAN, INF, -INF, 0.1, 2.0**40 + 1, -0.5]
    log.tbx([("loss", step, W0 + step, v) for step, v in enumerate(values)])


def case_tbx_steps(log: RunLog) -> None:
    log.tbx(
        [
            ("x", None, W0, 1.0),  # no global_step: the writer leaves 0
            ("x", 2**62, W0 + 1, 2.0),
            ("x", -1, W0 + 2, 3.0),
            ("x", -(2**62), W0 + 3, 4.0),
            ("x", 2**63 - 1, W0 + 4, 5.0),
            ("x", -(2**63), W0 + 5, 6.0),
            ("x", 7, W0 + 6, 7.0),
        ]
    )


def case_tbx_resumed(log: RunLog) -> None:
    # Two writers in the same directory (same second: distinct suffixes); the second one
    # restarts from a checkpoint at step 6, so steps 6..10 appear twice.
    log.tbx([("loss", s, W0 + s, 1.0 / (s + 1)) for s in range(11)], suffix=".1")
    log.tbx([("loss", s, W0 + 100 + s, 10.0 + s) for s in range(6, 13)], suffix=".2")


def case_tbx_duplicates_walltime_back(log: RunLog) -> None:
    log.tbx(
        [
            ("eval", 0, W0 + 50, 0.5),
            ("eval", 10, W0 + 40, 0.6),
            ("eval", 10, W0 + 30, 0.7),  # the same step again, earlier wall time
            ("eval", 20, 1_234_567_890.5, 0.8),
            ("eval", 20, W0 - 1_000_000, 0.9),  # highest step twice: this later record wins
            ("eval", 5, W0 + 60, 1.0),  # and a step that goes back
        ]
    )


def case_steps_extreme(log: RunLog) -> None:
    steps = [0, 2**62, -1, -(2**62), 2**63 - 1, -(2**63), 3]
    log.hand(
        event_file_name(W0),
        [
            (
                s,
                W0 + i,
                [("simple", "simple_value", i + 0.5), ("tf2", "tf2_tensor_content", i + 0.25)],
            )
            for i, s in enumerate(steps)
        ],
    )


def case_duplicates_resume(log: RunLog) -> None:
    steps = [0, 1, 1, 2, 2, 2, 1, 0]
    log.hand(
        event_file_name(W0, suffix=".a"),
        [
            (
                s,
                W0 + i,
                [
                    ("dup", "tf2_tensor_content", float(i)),
                    ("dup64", "double_tensor_content", i + 0.1),
                ],
            )
            for i, s in enumerate(steps)
        ],
    )
    # A resumed job: a later file whose steps go back below the first file's maximum.
    log.hand(
        event_file_name(W0 + 10, suffix=".b"),
        [
            (
                s,
                W0 + 10 + s,
                [
                    ("dup", "tf2_tensor_content", 100.0 + s),
                    ("dup64", "double_tensor_content", 100.1 + s),
                ],
            )
            for s in (1, 2)
        ],
    )


def case_merge_all(log: RunLog) -> None:
    # TF1 merge_all: every summary of a session.run in one Event, sharing step and wall time.
    log.hand(
        event_file_name(W0),
        [
            (
                step,
                W0 + step * 0.5,
                [
                    ("loss", "simple_value", 1.0 / (step + 1)),
                    ("accuracy", "simple_value", step / 10),
                    ("lr", "tf2_tensor_content", 0.1 * 0.9**step),
                    ("lr64", "double_tensor_content", 0.1 * 0.9**step),
                ],
            )
            for step in range(10)
        ]
        + [
            # the same tag twice in one Event: two rows (value_index 0 and 1)
            (10, W0 + 5, [("loss", "simple_value", 0.25), ("loss", "simple_value", 0.125)]),
        ],
    )


def case_tf1_filewriter(log: RunLog) -> None:
    # TF1 FileWriter.add_summary: metadata only on each tag's first occurrence.
    log.hand(
        event_file_name(W0),
        [
            (
                step,
                W0 + step,
                [
                    ("simple", "simple_value", step * 0.5),
                    ("tensor", "tf2_tensor_content", step * 0.25),
                    ("double", "torch_double_val", step * 0.1),
                ],
            )
            for step in range(8)
        ],
        metadata_once=True,
    )


def case_walltime_backwards(log: RunLog) -> None:
    walls = [W0 + 100, W0 + 50, 1_234_567_890.5, W0 + 0.000001, 0.0, W0 + 100]
    log.hand(
        event_file_name(W0),
        [
            (
                step,
                wall,
                [("t", "tf2_tensor_content", step + 0.5), ("s", "simple_value", step + 0.5)],
            )
            for step, wall in enumerate(walls)
        ],
    )


def case_no_file_version(log: RunLog) -> None:
    log.hand(
        event_file_name(W0),
        [
            (
                step,
                W0 + step,
                [("s", "simple_value", step * 1.5), ("t", "tf2_tensor_content", -step)],
            )
            for step in range(5)
        ],
        file_version=False,
    )


def case_one_tag_many_encodings(log: RunLog) -> None:
    # The same tag written as simple_value by one job and as tensors by the next (TF1 code run
    # eagerly under TF2 switches encodings, pitfall 30): one series, every point, in file order.
    log.hand(
        event_file_name(W0, suffix=".1"),
        [(s, W0 + s, [("loss", "simple_value", 1.0 / (s + 1))]) for s in range(4)],
    )
    log.hand(
        event_file_name(W0 + 10, suffix=".2"),
        [
            (
                s,
                W0 + 10 + s,
                [
                    (
                        "loss",
                        "tf2_tensor_content" if s < 7 else "double_tensor_content",
                        1.0 / (s + 1),
                    )
                ],
            )
            for s in range(3, 9)
        ],
    )


def case_nan_last(log: RunLog) -> None:
    # The last point of a series is NaN (the loss blew up): v_last_scalars shows it as NULL.
    log.hand(
        event_file_name(W0),
        [
            (s, W0 + s, [("loss", "simple_value", v), ("loss64", "torch_double_val", v)])
            for s, v in enumerate([3.0, 2.0, NAN])
        ],
    )


CASES: dict[str, Callable[[RunLog], None]] = {
    **{f"enc_{name}": encoding_case(name) for name in ENCODINGS},
    "tbx_curve": case_tbx_curve,
    "tbx_nonfinite": case_tbx_nonfinite,
    "tbx_steps": case_tbx_steps,
    "tbx_resumed": case_tbx_resumed,
    "tbx_duplicates_walltime_back": case_tbx_duplicates_walltime_back,
    "steps_extreme": case_steps_extreme,
    "duplicates_resume": case_duplicates_resume,
    "merge_all": case_merge_all,
    "tf1_filewriter": case_tf1_filewriter,
    "walltime_backwards": case_walltime_backwards,
    "no_file_version": case_no_file_version,
    "one_tag_many_encodings": case_one_tag_many_encodings,
    "nan_last": case_nan_last,
}


def build_logdir(logdir: Path) -> dict[str, dict[str, Series]]:
    """Write every case into its own run directory (depth 1, so each is a run)."""
    expected = {}
    for name, write in CASES.items():
        log = RunLog(logdir / name)
        write(log)
        expected[name] = log.expected()
    return expected


# --------------------------------------------------------------------------- store access


FILE_ORDER_SQL = (
    "SELECT p.step, p.wall_time, p.value FROM scalars p "
    "JOIN series s ON s.id = p.series_id JOIN runs r ON r.id = s.run_id "
    "WHERE r.run_path = ? AND s.name = ? "
    "ORDER BY p.file_id, p.record_offset, p.value_index"
)


def file_order(conn: Any, run_path: str, tag: str) -> list[Point]:
    return [Point(*row) for row in conn.execute(FILE_ORDER_SQL, (run_path, tag))]


def snapshot(store: str) -> list[tuple[Any, ...]]:
    with closing(connect(store)) as conn:
        return [
            tuple(row)
            for row in conn.execute(
                "SELECT series_id, step, file_id, record_offset, value_index, wall_time, value "
                "FROM scalars ORDER BY series_id, file_id, record_offset, value_index"
            ).fetchall()
        ]


@dataclass
class Converted:
    logdir: Path
    store: str
    expected: dict[str, dict[str, Series]]
    summary: Any


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> Converted:
    root = tmp_path_factory.mktemp("scalars")
    logdir = root / "logdir"
    expected = build_logdir(logdir)
    store = make_store(root)
    summary = convert(logdir, store, progress=False)
    return Converted(logdir, store, expected, summary)


@pytest.fixture(scope="module")
def conn(converted: Converted) -> Iterable[Any]:
    connection = connect(converted.store)
    yield connection
    connection.close()


# --------------------------------------------------------------------------- tests


def test_summary_counts_every_value_once(converted: Converted) -> None:
    summary = converted.summary
    total = sum(len(s.points) for case in converted.expected.values() for s in case.values())
    assert summary.exit_code == 0, summary.to_dict()
    assert summary.points == Counter({"scalars": total})
    assert summary.skipped == {} and summary.undecodable == {}
    assert summary.damaged_records == 0 and summary.problems == []
    assert summary.runs == len(CASES) and summary.orphans == []


@pytest.mark.parametrize("case", list(CASES))
def test_points_exact_in_file_order(converted: Converted, conn: Any, case: str) -> None:
    for tag, series in converted.expected[case].items():
        assert file_order(conn, case, tag) == series.points, tag


@pytest.mark.parametrize("case", list(CASES))
def test_series_dtype_and_no_extra_series(converted: Converted, conn: Any, case: str) -> None:
    got = rows(
        conn,
        "SELECT s.name, s.plugin, s.dtype, c.name FROM series s JOIN runs r "
        "ON r.id = s.run_id JOIN contexts c ON c.id = s.context_id WHERE r.run_path = ? "
        "ORDER BY s.name",
        (case,),
    )
    expected = sorted((tag, "scalars", s.dtype, "") for tag, s in converted.expected[case].items())
    assert got == expected


def test_v_scalars_columns_and_multiset(converted: Converted, conn: Any) -> None:
    cursor = conn.execute("SELECT * FROM v_scalars")
    assert [d[0] for d in cursor.description] == SPEC_SCALAR_COLUMNS
    got = Counter(
        (run_path, context, tag, step, wall, value)
        for _run_id, run_path, context, tag, step, wall, value in cursor
    )
    want = Counter(
        (case, "", tag, *pt)
        for case, series in converted.expected.items()
        for tag, s in series.items()
        for pt in s.points
    )
    assert got == want
    # run_id agrees with v_runs
    bad = conn.execute(
        "SELECT COUNT(*) FROM v_scalars v JOIN v_runs r ON r.run_id = v.run_id "
        "WHERE r.run_path <> v.run_path"
    ).fetchone()[0]
    assert bad == 0


def test_v_last_scalars_highest_step_then_last_written(converted: Converted, conn: Any) -> None:
    cursor = conn.execute("SELECT * FROM v_last_scalars")
    assert [d[0] for d in cursor.description] == SPEC_SCALAR_COLUMNS
    got = {
        (run_path, context, tag): (step, wall, value)
        for _run_id, run_path, context, tag, step, wall, value in cursor
    }
    want = {}
    for case, series in converted.expected.items():
        for tag, s in series.items():
            top = max(p.step for p in s.points)
            want[(case, "", tag)] = tuple([p for p in s.points if p.step == top][-1])
    assert got == want


def test_nan_is_null_and_infinities_stay_infinite(converted: Converted, conn: Any) -> None:
    sqlite = not is_server(converted.store)
    for case in (
        "tbx_nonfinite",
        "enc_simple_value",
        "enc_tf2_tensor_content",
        "enc_torch_double_val",
        "enc_half_half_val",
        "enc_half_tensor_content",
    ):
        values = [
            row[0]
            for row in conn.execute("SELECT value FROM v_scalars WHERE run_path = ?", (case,))
        ]
        assert values.count(None) == 1, case
        assert values.count(INF) == 1 and values.count(-INF) == 1, case
        if sqlite:  # dynamic typing: every other value must be stored as REAL
            types = Counter(
                row[0]
                for row in conn.execute(
                    "SELECT typeof(value) FROM v_scalars WHERE run_path = ?", (case,)
                )
            )
            assert types["null"] == 1 and types["real"] == len(values) - 1, case
        else:  # PostgreSQL could hold NaN: it must not (value IS NULL means NaN)
            nans = conn.execute(
                "SELECT count(*) FROM scalars WHERE value = 'NaN' OR wall_time = 'NaN'"
            ).fetchone()[0]
            assert nans == 0, case


def test_float64_is_not_squeezed_through_float32(conn: Any) -> None:
    for case in ("enc_torch_double_val", "enc_double_tensor_content", "enc_shape1_double_content"):
        values = {
            row[0]
            for row in conn.execute("SELECT value FROM v_scalars WHERE run_path = ?", (case,))
        }
        assert {0.1, 1 / 3, 2.0**40 + 1} <= values, case
    assert 2.0**40 + 1 in {
        row[0]
        for row in conn.execute(
            "SELECT value FROM v_scalars WHERE run_path = 'enc_int64_int64_val'"
        )
    }


def test_steps_are_int64(conn: Any) -> None:
    for case, tag in (("tbx_steps", "x"), ("steps_extreme", "simple"), ("steps_extreme", "tf2")):
        steps = [p.step for p in file_order(conn, case, tag)]
        assert 2**62 in steps and -(2**62) in steps and 2**63 - 1 in steps and -(2**63) in steps
        assert all(type(s) is int for s in steps)


def test_second_conversion_adds_nothing(
    converted: Converted, tmp_path: Path, make_store: StoreFactory
) -> None:
    store = make_store(tmp_path, "again")
    first = convert(converted.logdir, store, progress=False)
    before = snapshot(store)
    assert len(before) == first.points["scalars"] > 0

    second = convert(converted.logdir, store, progress=False)
    assert not second.points, second.to_dict()
    assert second.files_read == 0 and second.files_unchanged == second.files_total > 0
    assert second.runs_created == 0 and second.series_created == 0
    assert snapshot(store) == before

    full = convert(converted.logdir, store, full=True, progress=False)
    assert full.exit_code == 0
    assert snapshot(store) == before


def test_chunk_boundaries_change_nothing(
    converted: Converted, tmp_path: Path, make_store: StoreFactory
) -> None:
    store = make_store(tmp_path, "chunked")
    summary = convert(converted.logdir, store, chunk_points=7, progress=False)
    assert summary.points == converted.summary.points
    query = (
        "SELECT r.run_path, s.name, p.step, p.wall_time, p.value FROM scalars p "
        "JOIN series s ON s.id = p.series_id JOIN runs r ON r.id = s.run_id "
        "ORDER BY r.run_path, s.name, p.file_id, p.record_offset, p.value_index"
    )
    with closing(connect(store)) as chunked, closing(connect(converted.store)) as whole:
        assert rows(chunked, query) == rows(whole, query)


def test_appended_points_are_read_once(tmp_path: Path, store: str) -> None:
    logdir = tmp_path / "logs"
    log = RunLog(logdir / "run")
    records = [
        (s, W0 + s, [("a", "simple_value", s * 0.5), ("b", "tf2_tensor_content", -s)])
        for s in range(10)
    ]
    path = log.hand(event_file_name(W0), records[:4])
    assert convert(logdir, store, progress=False).points["scalars"] == 8
    events = [
        summary_event(s, w, [ENCODINGS[e].build(t, v) for t, e, v in vals])
        for s, w, vals in records[4:]
    ]
    append_events(path, events)
    log.files[path.name] += [
        (t, ENCODINGS[e].dtype, point(s, w, ENCODINGS[e].widen(v)))
        for s, w, vals in records[4:]
        for t, e, v in vals
    ]
    second = convert(logdir, store, progress=False)
    assert second.points == Counter({"scalars": 12})
    with closing(connect(store)) as conn:
        for tag, series in log.expected().items():
            assert file_order(conn, "run", tag) == series.points


def test_tf1_metadata_from_first_occurrence_survives_an_incremental_read(
    tmp_path: Path, store: str
) -> None:
    """design §4: plugin metadata is remembered per (file, tag) from its first occurrence; a file
    written by a TF1 FileWriter and read in two passes (it grew in between) must not lose the
    second pass's tensor scalars, which carry no metadata."""
    logdir = tmp_path / "logs"
    records = [(s, W0 + s, [("tensor", "tf2_tensor_content", s * 0.25)]) for s in range(8)]
    events = strip_repeated_metadata(
        summary_event(s, w, [ENCODINGS[e].build(t, v) for t, e, v in vals])
        for s, w, vals in records
    )
    path = write_events(logdir / "run" / event_file_name(W0), events[:3])
    convert(logdir, store, progress=False)
    append_events(path, events[3:])
    second = convert(logdir, store, progress=False)
    assert second.points == Counter({"scalars": 5}), second.to_dict()
    with closing(connect(store)) as conn:
        series = rows(conn, "SELECT name, plugin, dtype FROM series")
        assert series == [("tensor", "scalars", "float32")]
        assert file_order(conn, "run", "tensor") == [
            point(s, w, as_float32(v)) for s, w, vals in records for _t, _e, v in vals
        ]


def test_nonfinite_wall_times_are_kept(tmp_path: Path, store: str) -> None:
    """Pitfall 10: NaN or infinite wall times are stored, not fatal; ordering never uses them."""
    logdir = tmp_path / "logs"
    log = RunLog(logdir / "run")
    log.hand(
        event_file_name(W0),
        [
            (0, W0, [("s", "simple_value", 1.0)]),
            (1, NAN, [("s", "simple_value", 2.0)]),
            (2, INF, [("s", "simple_value", 3.0)]),
            (3, -INF, [("s", "simple_value", 4.0)]),
        ],
    )
    summary = convert(logdir, store, progress=False)
    assert summary.points == Counter({"scalars": 4})
    with closing(connect(store)) as conn:
        got = rows(conn, "SELECT step, wall_time, value FROM v_scalars ORDER BY step")
    assert got == [(0, W0, 1.0), (1, None, 2.0), (2, INF, 3.0), (3, -INF, 4.0)]


def test_legacy_node_name_tag_does_not_depend_on_what_came_before(
    tmp_path: Path, store: str
) -> None:
    """A value with an empty tag falls back to its node_name (old TF writers); whether an
    empty-tag simple_value came earlier in the file must not change which series it joins."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    logdir = tmp_path / "logs"
    write_events(
        logdir / "run" / event_file_name(W0),
        [
            summary_event(0, W0, [Summary.Value(tag="", simple_value=5.0)]),
            summary_event(1, W0 + 1, [Summary.Value(tag="", node_name="legacy", simple_value=7.0)]),
        ],
    )
    convert(logdir, store, progress=False)
    with closing(connect(store)) as conn:
        got = rows(conn, "SELECT tag, step, value FROM v_scalars ORDER BY step")
    assert got == [("", 0, 5.0), ("legacy", 1, 7.0)]


def test_tensorboardx_add_scalars_subruns_are_contexts(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """tensorboardX add_scalars writes <logdir>/<main>/<key>/: the writer's own directory is
    the run (its file holds only the version record here), each key a context of it, with the
    main tag; no file is an orphan.  Aim's layout made <main> the run and the writer's file an
    orphan."""
    from tensorboardX import SummaryWriter

    logdir = tmp_path / "logs"
    with SummaryWriter(logdir=str(logdir), flush_secs=3600) as writer:
        for step in range(5):
            writer.add_scalars(
                "loss",
                {"train": 1.0 / (step + 1), "val": 2.0 / (step + 1)},
                step,
                walltime=W0 + step,
            )
    query = (
        "SELECT run_path, context, tag, step, wall_time, value FROM v_scalars "
        "ORDER BY context, step"
    )
    store, aim_store = make_store(tmp_path, "auto"), make_store(tmp_path, "aim")
    summary = convert(logdir, store, progress=False)
    assert summary.points == Counter({"scalars": 10})
    assert summary.orphans == [] and summary.runs == 1
    with closing(connect(store)) as conn:
        got = rows(conn, query)
    assert got == [
        (".", ctx, "loss", s, W0 + s, as_float32(k / (s + 1)))
        for ctx, k in (("train", 1.0), ("val", 2.0))
        for s in range(5)
    ]
    # Aim's layout: <main> is the run, the writer's file an orphan.
    summary = convert(logdir, aim_store, progress=False, layout="aim")
    assert len(summary.orphans) == 1
    with closing(connect(aim_store)) as conn:
        places = [row[:2] for row in rows(conn, query)]
    assert places == [("loss", "train")] * 5 + [("loss", "val")] * 5


def test_same_bytes_under_another_logdir_give_the_same_points(
    converted: Converted, tmp_path: Path, store: str
) -> None:
    """The same bytes under another logdir path give the same points (run identity is relative)."""
    copy = tmp_path / "copy"
    shutil.copytree(converted.logdir, copy)
    convert(copy, store, progress=False)
    with closing(connect(store)) as conn, closing(connect(converted.store)) as original:
        query = (
            "SELECT run_path, context, tag, step, wall_time, value FROM v_scalars "
            "ORDER BY run_path, tag, step, wall_time, value"
        )
        assert rows(conn, query) == rows(original, query)


@pytest.mark.parametrize("dtype, content", [(1, b"\x00\x00"), (2, b"\x00" * 12), (1, b"\x00" * 6)])
def test_scalar_tensor_of_a_partial_element_is_kept_raw(dtype: int, content: bytes) -> None:
    """Content bytes that are no whole number of elements: the value is kept as a raw tensor
    and counted as undecodable, and the file's other records are read (found by
    tests/reading/test_scalar_keys.py)."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto

    from tbconvert.filters import Selection
    from tbconvert.reading.decoder import EventDecoder

    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    odd = Summary.Value(
        tag="odd", metadata=metadata, tensor=TensorProto(dtype=dtype, tensor_content=content)
    )
    records = [
        (0, summary_event(1, 1e9, [odd]).SerializeToString()),
        (100, summary_event(2, 1e9, [simple_value("loss", 0.5)]).SerializeToString()),
    ]
    decoder = EventDecoder(Selection(), {})
    decoder.feed_records(records)
    rows, _ = decoder.take()
    assert decoder.stats.undecodable == Counter({("scalars", "odd"): 1})
    assert len(rows["tensors"]) == 1 and [row[6] for row in rows["scalars"]] == [0.5]
