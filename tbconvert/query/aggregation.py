"""A group's statistics step by step over its runs: the one rule ``export scalars``, ``plot``
and ``report`` use for ``--group-by`` and ``--aggregate-over`` (SPEC §2).

Steps are exact: a group's value at a step is over the runs that logged that step, so a step
only some runs logged aggregates those runs, and nothing is interpolated.  A run that logged a
step twice (a resumed run read with ``--resumed all``) counts with the value it wrote last.
NaN points are left out of the statistics and counted; infinities stay in (IEEE's answer).
``std`` is the sample standard deviation (ddof=1); ``sem`` is ``std / sqrt(runs)`` and
``ci95`` Student's t at 0.975 times ``sem``.  A statistic a step has too few values for is NaN
(here) or None (in :meth:`Statistics.rows`, the export's cells).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy
    import numpy.typing

# One run's curve: its steps and values, in the order they were written.
RunCurve = tuple[Sequence[int], Sequence[float]]
# Student's t at 0.975 for 1..30 degrees of freedom (the band's half width is t * sem).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(degrees: int) -> float:
    """Student's t quantile at 0.975 (a two-sided 95% interval)."""
    if degrees < 1:
        return math.nan
    if degrees <= len(_T975):
        return _T975[degrees - 1]
    return 1.959964 + 2.37 / degrees  # within 0.002 of the quantile past 30


@dataclass(frozen=True)
class Statistics:
    """A group's statistics at each step any of its runs logged (``steps``, ascending):
    ``runs`` values aggregated, ``nan`` NaN points left out, and the statistics of the
    values (NaN where there are none, ``std`` NaN below two)."""

    steps: list[int]
    runs: list[int]
    nan: list[int]
    mean: list[float]
    median: list[float]
    std: list[float]
    min: list[float]
    max: list[float]

    def sem(self) -> list[float]:
        """The standard error of the mean at each step."""
        return [
            std / math.sqrt(runs) if runs else math.nan
            for std, runs in zip(self.std, self.runs, strict=True)
        ]

    def band(self, kind: str, center: Sequence[float]) -> tuple[list[float], list[float]]:
        """The low and high edges of a ``kind`` of band (``std``, ``sem``, ``ci95``, ``minmax``
        or ``none``) around ``center`` (the mean or the median)."""
        if kind == "minmax":
            return list(self.min), list(self.max)
        if kind == "none":
            return list(center), list(center)
        half = self.std if kind == "std" else self.sem()
        if kind == "ci95":
            half = [value * t975(runs - 1) for value, runs in zip(half, self.runs, strict=True)]
        low = [middle - width for middle, width in zip(center, half, strict=True)]
        return low, [middle + width for middle, width in zip(center, half, strict=True)]

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """``step, runs, nan, mean, std, min, max`` per step, a statistic with too few values
        None (the grouped export's cells)."""
        for index, step in enumerate(self.steps):
            runs = self.runs[index]
            stats: tuple[Any, ...] = (None, None, None, None)
            if runs:
                std = self.std[index] if runs > 1 else None
                stats = (self.mean[index], std, self.min[index], self.max[index])
            yield (step, runs, self.nan[index], *stats)


def aggregate(curves: Sequence[RunCurve]) -> Statistics:
    """The statistics of a group whose runs logged ``curves``, one curve per run, at every
    step any of them logged (see the module's docstring for the rule)."""
    import numpy as np

    steps, values = _last_written(curves)
    grid, at = np.unique(steps, return_inverse=True)
    nan = np.isnan(values)
    runs = np.bincount(at[~nan], minlength=len(grid))
    order = np.argsort(at[~nan], kind="stable")
    kept, kept_at = values[~nan][order], at[~nan][order]
    mean, median, std, low, high = (np.full(len(grid), np.nan) for _ in range(5))
    has = runs > 0
    if has.any():
        counts = runs[has]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        _sort_slices(kept, starts, counts)
        with np.errstate(invalid="ignore", over="ignore"):  # infinities: IEEE's answer
            mean[has] = np.add.reduceat(kept, starts) / counts
            squares = np.add.reduceat((kept - mean[kept_at]) ** 2, starts)
            std[has] = np.where(counts > 1, np.sqrt(squares / np.maximum(counts - 1, 1)), np.nan)
            lower, upper = kept[starts + (counts - 1) // 2], kept[starts + counts // 2]
            median[has] = np.where(counts % 2 == 1, lower, (lower + upper) / 2)
        low[has], high[has] = kept[starts], kept[starts + counts - 1]
    return Statistics(
        grid.tolist(),
        runs.tolist(),
        np.bincount(at[nan], minlength=len(grid)).tolist(),
        mean.tolist(),
        median.tolist(),
        std.tolist(),
        low.tolist(),
        high.tolist(),
    )


def _sort_slices(
    values: numpy.typing.NDArray[numpy.float64],
    starts: numpy.typing.NDArray[numpy.int64],
    counts: numpy.typing.NDArray[numpy.int64],
) -> None:
    # Each step's values (a slice) sorted in place: its min, max and median are then read off
    # the ends and the middle, and its sums do not depend on the order the runs came in.
    # The slices of one length are sorted together, as the rows of one matrix.
    import numpy as np

    for length in np.unique(counts[counts > 1]):
        cells = starts[counts == length][:, None] + np.arange(length)
        values[cells] = np.sort(values[cells], axis=1)


def _last_written(
    curves: Sequence[RunCurve],
) -> tuple[numpy.typing.NDArray[numpy.int64], numpy.typing.NDArray[numpy.float64]]:
    # Every run's steps and values together, a step a run logged twice once, with its last
    # value (np.unique's first index in the reversed curve).
    import numpy as np

    all_steps, all_values = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.float64)]
    for steps, values in curves:
        backwards = np.asarray(steps, dtype=np.int64)[::-1]
        unique, first = np.unique(backwards, return_index=True)
        all_steps.append(unique)
        all_values.append(np.asarray(values, dtype=np.float64)[::-1][first])
    return np.concatenate(all_steps), np.concatenate(all_values)
