"""Curves of several runs as one line with a band: what ``tbconvert plot --group-by`` draws.

Runs rarely log the same steps (evaluations every few hundred steps, runs stopped early), so
the runs of a group are put on a common grid: the union of their steps.  Each run counts at a
grid step inside its own first..last step, with its value there or, between two of its points,
linearly interpolated; outside its range it does not count, so the line and band at a step are
over the runs that reached it.  NaN and infinite points are left out; a step logged twice (a
resumed run) counts with its last value.  Smoothing, where asked, is applied to
each run before this.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Student's t at 0.975 for 1..30 degrees of freedom (the band's half width is t * sem).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


@dataclass(frozen=True)
class Band:
    """A group's line (``center``) and band (``low``..``high``) on ``steps``, and how many
    runs count at each step."""

    steps: list[int]
    center: list[float]
    low: list[float]
    high: list[float]
    runs: list[int]


def t975(degrees: int) -> float:
    """Student's t quantile at 0.975 (a two-sided 95% interval)."""
    if degrees < 1:
        return math.nan
    if degrees <= len(_T975):
        return _T975[degrees - 1]
    return 1.959964 + 2.37 / degrees  # within 0.002 of the quantile past 30


def on_grid(curves: Sequence[tuple[Sequence[int], Sequence[float]]]) -> tuple[Any, Any]:
    """The union of the curves' steps, and each curve's values there (NaN outside its range
    or where it logged NaN), as NumPy arrays: steps (n,), values (curves, n)."""
    import numpy as np

    grid = np.unique(np.concatenate([np.asarray(steps, dtype=np.float64) for steps, _ in curves]))
    values = np.full((len(curves), len(grid)), np.nan)
    for row, (steps, points) in enumerate(curves):
        # A step logged twice (a resumed run) counts with its last value.
        last = {
            step: value for step, value in zip(steps, points, strict=True) if math.isfinite(value)
        }
        if not last:
            continue
        xs = np.array(sorted(last), dtype=np.float64)
        ys = np.array([last[step] for step in sorted(last)], dtype=np.float64)
        inside = (grid >= xs[0]) & (grid <= xs[-1])
        values[row, inside] = np.interp(grid[inside], xs, ys)
    return grid, values


def band(
    curves: Sequence[tuple[Sequence[int], Sequence[float]]], aggregate: str, kind: str
) -> Band:
    """A group's ``aggregate`` (``mean`` or ``median``) line and its ``kind`` of band."""
    import numpy as np

    grid, values = on_grid(curves)
    runs = np.sum(~np.isnan(values), axis=0)
    # A step no run reached is an all-NaN column: NumPy warns, and answers NaN.
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        center = np.nanmedian(values, axis=0) if aggregate == "median" else np.nanmean(values, 0)
        std = np.nanstd(values, axis=0, ddof=1)
        if kind == "minmax":
            low, high = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        elif kind == "none":
            low = high = center
        else:
            half = std
            if kind in ("sem", "ci95"):
                half = std / np.sqrt(runs)
            if kind == "ci95":
                half = half * np.array([t975(int(n) - 1) for n in runs])
            low, high = center - half, center + half
    return Band(
        [int(step) for step in grid], center.tolist(), low.tolist(), high.tolist(), runs.tolist()
    )
