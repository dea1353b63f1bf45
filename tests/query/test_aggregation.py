"""A group's statistics step by step (``query.aggregation.aggregate``), the one rule of
``export``, ``plot`` and ``report``, checked against NumPy step by step on any curves: runs
that skip steps, log a step twice, log NaN or infinities, or log nothing."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tbconvert.query.aggregation import aggregate

values = st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf), st.just(-math.inf))
curve = st.lists(st.tuples(st.integers(0, 12), values), max_size=20).map(
    lambda points: ([step for step, _ in points], [value for _, value in points])
)


def by_numpy(curves: list[tuple[list[int], list[float]]]) -> dict[int, tuple[float, ...]]:
    """step -> runs, nan, mean, std, min, max, median: each run's last value at the step."""
    at: dict[int, list[float]] = {}
    for steps, points in curves:
        last = dict(zip(steps, points, strict=True))
        for step, value in last.items():
            at.setdefault(step, []).append(value)
    found = {}
    for step, logged in at.items():
        array = np.array(logged)
        kept = array[~np.isnan(array)]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            stats = (
                (kept.mean(), kept.std(ddof=1) if len(kept) > 1 else math.nan, kept.min(),
                 kept.max(), np.median(kept))
                if len(kept)
                else (math.nan,) * 5
            )  # fmt: skip
        found[step] = (len(kept), len(array) - len(kept), *map(float, stats))
    return found


@given(st.lists(curve, max_size=6))
@example([([0, 1, 1], [1.0, 2.0, 3.0]), ([1, 2], [5.0, math.nan])])
@example([([0], [math.inf]), ([0], [-math.inf]), ([0], [math.nan])])
def test_each_step_is_numpy_s_statistics_over_the_runs_that_logged_it(
    curves: list[tuple[list[int], list[float]]],
) -> None:
    statistics = aggregate(curves)
    want = by_numpy(curves)
    assert statistics.steps == sorted(want)
    for index, step in enumerate(statistics.steps):
        runs, nan, *stats = want[step]
        assert (statistics.runs[index], statistics.nan[index]) == (runs, nan), step
        got = (
            statistics.mean[index],
            statistics.std[index],
            statistics.min[index],
            statistics.max[index],
            statistics.median[index],
        )
        assert got == pytest.approx(stats, rel=1e-9, abs=1e-9, nan_ok=True), step


def test_rows_leave_a_statistic_without_enough_values_empty() -> None:
    rows = list(aggregate([([0, 1, 2], [1.0, 2.0, math.nan]), ([0], [3.0])]).rows())
    assert rows == [
        (0, 2, 0, 2.0, pytest.approx(math.sqrt(2)), 1.0, 3.0),
        (1, 1, 0, 2.0, None, 2.0, 2.0),
        (2, 0, 1, None, None, None, None),
    ]
    assert list(aggregate([]).rows()) == []
