"""What a crashed push had sent, told from MLflow's history (``already_there``), and the
timestamps and values a point is sent with."""

from __future__ import annotations

import math
import sys

from tbconvert.push.metrics import already_there, identity, timestamp_ms
from tbconvert.push.state import Point


def point(offset: int, step: int, value: float | None, wall: float | None = 10.0) -> Point:
    return Point(1, 1, "f", None, offset, 0, step, wall, value)


def test_equal_points_are_counted_not_matched_once() -> None:
    # Three equal points: the marks cover one, MLflow holds two; so one more was sent.
    points = [point(0, 1, 0.5), point(1, 1, 0.5), point(2, 1, 0.5), point(3, 2, 0.5)]
    history = [(1, 10_000, 0.5), (1, 10_000, 0.5)]
    assert already_there([True, False, False, False], points, history) == [
        True,
        True,
        False,
        False,
    ]


def test_nan_and_infinities_match_as_mlflow_keeps_them() -> None:
    points = [point(0, 0, None), point(1, 1, math.inf), point(2, 2, -math.inf), point(3, 3, 1.0)]
    history = [(0, 10_000, math.nan), (1, 10_000, sys.float_info.max), (2, 10_000, -math.inf)]
    found = already_there([False] * 4, points, [identity(*h) for h in history])
    assert found == [True, True, True, False]


def test_a_point_of_another_step_or_time_is_not_there() -> None:
    points = [point(0, 1, 0.5), point(1, 1, 0.5, wall=10.001)]
    assert already_there([False, False], points, [(2, 10_000, 0.5), (1, 10_000, 0.5)]) == [
        True,
        False,
    ]


def test_timestamps_are_milliseconds_to_the_nearest() -> None:
    assert timestamp_ms(1_795_300_000.123) == 1_795_300_000_123
    assert timestamp_ms(0.0004) == 0 and timestamp_ms(0.0006) == 1
    assert timestamp_ms(None) == 0
