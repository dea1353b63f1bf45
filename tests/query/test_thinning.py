"""Thinning a scalar series in SQL (``query.thinning``) against a pandas computation over the
public views (``v_scalars``, ``v_scalars_current``) on both backends: each bucket keeps its
first and last step, its lowest and highest value where they first occur, and a NaN where it
has one; a range of few points comes back whole."""

from __future__ import annotations

import math
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

import tbconvert
from tbconvert import convert
from tbconvert.errors import UsageError
from tbconvert.query.thinning import Thinned, thin_many, thin_series
from tests.support.big_series import build_series_store
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, connect, rows

VALUES = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0]),
)
# Steps in write order: mostly rising, sometimes repeating or going back (a resumed run).
STEPS = st.lists(st.integers(0, 60), min_size=1, max_size=80)


def view(store: str, resumed: str) -> pd.DataFrame:
    """The series' points as the public view gives them (NaN for NULL)."""
    name = "v_scalars_current" if resumed == "current" else "v_scalars"
    with closing(connect(store)) as conn:
        found = rows(conn, f"SELECT step, wall_time, value FROM {name} WHERE tag = 'loss'")
    frame = pd.DataFrame(found, columns=["step", "wall_time", "value"], dtype=object)
    return frame.astype({"step": "int64", "wall_time": "float64", "value": "float64"})


def thinned(store: str, buckets: int, **options: Any) -> Thinned:
    with tbconvert.open_store(store) as opened, opened.connect() as conn:
        series_id = opened.series(tag="loss", plugin="scalars")[0].id
        return thin_series(conn, series_id, buckets, **options)


def same(first: float, second: float) -> bool:
    return (math.isnan(first) and math.isnan(second)) or first == second


def assert_keeps_the_shape(
    points: pd.DataFrame, result: Thinned, buckets: int, span: tuple[int, int] | None = None
) -> None:
    """Every kept point is a point of the series; per bucket of the oracle's own bucketing,
    its first and last step, lowest and highest value (at the first step holding it) and
    its first NaN's step are kept; at most five points a bucket.  ``span``: the range asked
    for, else the points' own."""
    lo, hi = span or (int(points.step.min()), int(points.step.max()))
    assert (result.lo, result.hi, result.total) == (lo, hi, len(points))
    assert result.nan == int(points.value.isna().sum())
    pool = list(zip(points.step, points.value, strict=True))
    for point in result.points:
        assert any(s == point.step and same(v, point.value) for s, v in pool), point
    if result.exact:
        assert len(result.points) == len(points) <= 4 * buckets
        kept = sorted((p.step, p.value) for p in result.points if not math.isnan(p.value))
        assert kept == sorted((s, v) for s, v in pool if not math.isnan(v))
        return
    assert len(points) > 4 * buckets
    kept = pd.DataFrame(
        [(p.step, p.value, p.roles) for p in result.points], columns=["step", "value", "roles"]
    )
    points = points.assign(bucket=(points.step - lo) * buckets // (hi - lo + 1))
    kept = kept.assign(bucket=(kept.step - lo) * buckets // (hi - lo + 1))
    for bucket, mine in points.groupby("bucket"):
        ours = kept[kept.bucket == bucket]
        assert len(ours) <= 5
        roles = {role: row for row in ours.itertuples() for role in row.roles}
        assert roles["first"].step == mine.step.min()
        assert roles["last"].step == mine.step.max()
        finite = mine.dropna(subset=["value"])
        if len(finite):
            low, high = finite.value.min(), finite.value.max()
            assert roles["min"].value == low
            assert roles["max"].value == high
            assert roles["min"].step == finite.step[finite.value == low].min()
            assert roles["max"].step == finite.step[finite.value == high].min()
        else:
            assert "min" not in roles and "max" not in roles
        if mine.value.isna().any():
            assert roles["nan"].step == mine.step[mine.value.isna()].min()
            assert math.isnan(roles["nan"].value)
        else:
            assert "nan" not in roles


_made = iter(range(10**6))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=STEPS,
    data=st.data(),
    buckets=st.integers(1, 6),
    resumed=st.sampled_from(["all", "current"]),
)
@example(
    steps=[0, 1, 2, 3, 4, 5, 6, 7, 8, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    data=None,
    buckets=2,
    resumed="current",
)
def test_thinning_keeps_each_buckets_first_last_extremes_and_nan(
    tmp_path_factory: pytest.TempPathFactory,
    make_store: StoreFactory,
    steps: list[int],
    data: Any,
    buckets: int,
    resumed: str,
) -> None:
    values = (
        [float(i % 7) for i in range(len(steps))]
        if data is None
        else data.draw(st.lists(VALUES, min_size=len(steps), max_size=len(steps)))
    )
    store = make_store(tmp_path_factory.mktemp("thin"), f"thin{next(_made)}")
    build_series_store(store, steps, [1e9 + i for i in range(len(steps))], values)
    points = view(store, resumed)
    assert_keeps_the_shape(points, thinned(store, buckets, resumed=resumed), buckets)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    series=st.lists(
        STEPS.flatmap(
            lambda steps: st.tuples(
                st.just(steps), st.lists(VALUES, min_size=len(steps), max_size=len(steps))
            )
        ),
        min_size=2,
        max_size=4,
    ),
    buckets=st.integers(1, 6),
    resumed=st.sampled_from(["all", "current"]),
)
def test_many_series_thinned_at_once_each_keep_their_shape(
    tmp_path_factory: pytest.TempPathFactory,
    make_store: StoreFactory,
    series: list[tuple[list[int], list[float]]],
    buckets: int,
    resumed: str,
) -> None:
    """A chart's lines in one statement: each as the oracle thins its own series alone."""
    root = tmp_path_factory.mktemp("many")
    for index, (steps, values) in enumerate(series):
        events = [
            summary_event(step, 1e9 + at, [simple_value("loss", value)])
            for at, (step, value) in enumerate(zip(steps, values, strict=True))
        ]
        write_events(root / "logs" / f"run{index}" / "events.out.tfevents.1.host", events)
    store = make_store(root, f"many{next(_made)}")
    convert(root / "logs", store, progress=False)
    name = "v_scalars_current" if resumed == "current" else "v_scalars"
    with tbconvert.open_store(store) as opened, opened.connect() as conn:
        ids = {s.run_path: s.id for s in opened.series(tag="loss", plugin="scalars")}
        found = thin_many(conn, list(ids.values()), buckets, resumed=resumed)
        assert thin_many(conn, [], buckets) == {}
        empty = thin_many(conn, list(ids.values()), buckets, lo=5, hi=4, resumed=resumed)
        assert all(line.points == [] and line.total == 0 for line in empty.values())
    with closing(connect(store)) as db:
        for run, series_id in ids.items():
            points = pd.DataFrame(
                rows(db, f"SELECT step, value FROM {name} WHERE run_path = '{run}'"),
                columns=["step", "value"],
                dtype=object,
            ).astype({"step": "int64", "value": "float64"})
            assert_keeps_the_shape(points, found[series_id], buckets)


def test_a_range_of_steps_is_thinned_alone_and_a_narrow_one_comes_back_whole(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    steps = list(range(0, 2000, 2))
    values = [math.sin(step / 50) for step in steps]
    values[300] = math.inf
    store = make_store(tmp_path)
    build_series_store(store, steps, [1e9 + s for s in steps], values)
    points = view(store, "all")
    inside = points[(points.step >= 401) & (points.step <= 1200)]
    result = thinned(store, 10, lo=400.5, hi=1200)
    assert (result.lo, result.hi) == (401, 1200)
    assert not result.exact and result.total == len(inside)
    assert_keeps_the_shape(inside, result, 10, (401, 1200))
    assert any(p.value == math.inf for p in result.points)
    narrow = thinned(store, 10, lo=100, hi=150)
    assert narrow.exact
    assert [(p.step, p.value) for p in narrow.points] == [
        (s, v) for s, v in zip(points.step, points.value, strict=True) if 100 <= s <= 150
    ]
    assert thinned(store, 10, lo=5000, hi=6000).points == []


def test_thinning_on_wall_time_keeps_the_first_and_last_of_each_bucket(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    steps = list(range(400))
    walls = [1e9 + (s * 1.5 if s < 200 else 300 + s * 10) for s in steps]
    values = [float((s * 37) % 101) for s in steps]
    store = make_store(tmp_path)
    build_series_store(store, steps, walls, values)
    result = thinned(store, 8, x="wall_time")
    assert not result.exact and (result.lo, result.hi) == (min(walls), max(walls))
    wall = np.array(walls)
    bucket = np.minimum(np.floor((wall - wall[0]) * 8 / (wall[-1] - wall[0])), 7)
    for number in np.unique(bucket):
        inside = np.flatnonzero(bucket == number)
        ours = [p for p in result.points if inside[0] <= p.step <= inside[-1]]
        assert min(p.step for p in ours) == inside[0] and max(p.step for p in ours) == inside[-1]
        assert {p.value for p in ours if "max" in p.roles} == {max(values[i] for i in inside)}


def test_the_last_attempt_after_a_session_start_across_files_is_the_views(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """Converted from real event files: two files of one run, steps going back across them,
    a ``SessionLog.START`` in the second; thinned and whole, against ``v_scalars_current``."""
    run = tmp_path / "logs" / "run"
    first = [summary_event(s, 10.0 + s, [simple_value("loss", s % 5)]) for s in range(60)]
    write_events(run / "events.out.tfevents.1.host", first)
    second = [summary_event(s, 100.0 + s, [simple_value("loss", -s)]) for s in range(40, 80)]
    second.insert(20, Event(step=45, wall_time=99.0, session_log=SessionLog(status=1)))
    second += [summary_event(s, 200.0 + s, [simple_value("loss", 2.0 * s)]) for s in range(45, 90)]
    write_events(run / "events.out.tfevents.2.host", second)
    store = make_store(tmp_path)
    convert(tmp_path / "logs", store, progress=False)
    points = view(store, "current")
    assert len(points) < len(view(store, "all"))
    whole = thinned(store, 100)
    assert whole.exact and whole.attempt is not None and whole.attempt.cuts
    assert sorted((p.step, p.value) for p in whole.points) == sorted(
        zip(points.step, points.value, strict=True)
    )
    assert_keeps_the_shape(points, thinned(store, 3, attempt=whole.attempt), 3)
    assert_keeps_the_shape(view(store, "all"), thinned(store, 3, resumed="all"), 3)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"x": "time"}, "unknown x axis"), ({"resumed": "last"}, "unknown --resumed")],
)
def test_bad_options_are_usage_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    store = str(tmp_path / "store.db")
    build_series_store(store, [0, 1], [1.0, 2.0], [0.0, 1.0])
    with pytest.raises(UsageError, match=message):
        thinned(store, 4, **options)
    with pytest.raises(UsageError, match="buckets must be 1 or more"):
        thinned(store, 0)
