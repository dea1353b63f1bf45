"""Learning curves as image files (``tbconvert plot``), drawn with matplotlib (the ``plot``
extra) on its Agg canvas, so no display or GUI toolkit is ever needed.

One panel per tag, one line per (run, context), like TensorBoard's scalar dashboard, and with
its smoothing: a debiased exponential moving average (:func:`smooth`), the raw curve drawn
faintly behind the smoothed one.  The x axis is the step, the time since the run's first
point (``relative``), or the wall-clock time (``wall``, UTC).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tbconvert.errors import UsageError, import_extra
from tbconvert.filters import Globs, globs
from tbconvert.output.choices import AGGREGATES, BANDS, RESUMED_DEFAULT, X_AXES
from tbconvert.output.linestyles import line_style
from tbconvert.store.engine import expand_path

if TYPE_CHECKING:
    from tbconvert.query.aggregation import RunCurve
    from tbconvert.query.groups import Grouping
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store

IMAGE_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class Curve:
    """The points of one scalar series, in the order they were written (NaN where a NaN was
    logged): a resumed run's steps go back where it was resumed, once."""

    run_path: str
    context: str
    tag: str
    steps: list[int]
    wall_times: list[float]
    values: list[float]
    run_id: int = 0  # which run (two logdirs may hold the same run path)

    @property
    def label(self) -> str:
        """How the legend names the curve: the run, and its context when it has one."""
        return f"{self.run_path} [{self.context}]" if self.context else self.run_path


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's smoothing: an exponential moving average, debiased like Adam's.

    A non-finite value is kept as it is and does not enter the average; a constant series is
    returned unchanged (TensorBoard issue #786: rounding would otherwise wobble it).

    Raises:
        UsageError: ``weight`` outside [0, 1].
    """
    if not 0.0 <= weight <= 1.0:
        raise UsageError(f"smoothing {weight} is outside 0..1", hint="0 is none, 0.99 is heavy")
    if all(value == values[0] for value in values):
        return list(values)
    last, accumulated, smoothed = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + (1 - weight) * value
        accumulated += 1
        debias = 1.0 if weight == 1.0 else 1 - weight**accumulated
        smoothed.append(last / debias)
    return smoothed


def select_curves(
    store: Store,
    run: Globs = None,
    tag: Globs = None,
    context: str | None = None,
    resumed: str = RESUMED_DEFAULT,
) -> list[Curve]:
    """The scalar series matching the filters, as curves.

    Raises:
        UsageError: nothing matches; the message names the runs and tags that exist.
    """
    chosen = store.series(run=run, tag=tag, context=context, plugin="scalars")
    if not chosen:
        everything = store.series(plugin="scalars")
        runs = sorted({s.run_path for s in everything})
        tags = sorted({s.tag for s in everything})
        contexts = sorted({repr(s.context) for s in everything})
        asked = " ".join(
            f"--{name} {' '.join(globs(value))}"
            for name, value in (("run", run), ("tag", tag), ("context", context))
            if globs(value)
        )
        raise UsageError(
            f"no scalar series matches {asked or 'the selection'}",
            path=store.display,
            hint=f"runs: {_some(runs)}; tags: {_some(tags)}; contexts: {_some(contexts)}",
        )
    return curves_of(store, chosen, resumed)


def curves_of(
    store: Store, chosen: Sequence[SeriesRef], resumed: str = RESUMED_DEFAULT
) -> list[Curve]:
    """Read the points of scalar series as curves, in the series' order, from one snapshot
    of the store: by default each as its last attempt left it (``resumed="all"``: every
    record in write order, a resumed run's zigzag)."""
    return [
        Curve(
            series.run_path,
            series.context,
            series.tag,
            [row[4] for row in points],
            [math.nan if row[5] is None else row[5] for row in points],
            [math.nan if row[6] is None else row[6] for row in points],
            series.run_id,
        )
        for series, points in store.points_by_series("scalars", chosen, resumed, written=True)
    ]


def _some(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit]) or "(none)"
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def x_values(curve: Curve, x: str) -> list[Any]:
    """The x coordinates of a curve: steps, seconds since its first point, or UTC datetimes."""
    from datetime import datetime, timezone

    if x == "step":
        return list(curve.steps)
    if x == "relative":
        start = min((t for t in curve.wall_times if math.isfinite(t)), default=0.0)
        return [t - start for t in curve.wall_times]
    return [
        datetime.fromtimestamp(t, timezone.utc) if math.isfinite(t) else None
        for t in curve.wall_times
    ]


def image_format(output: str) -> str:
    """``png``, ``svg`` or ``pdf`` from the file's extension.

    Raises:
        UsageError: another extension.
    """
    extension = os.path.splitext(output)[1].lower().lstrip(".")
    if extension not in IMAGE_FORMATS:
        raise UsageError(
            f"cannot tell the image format of {output!r}",
            hint="name the file " + ", ".join(f"*.{name}" for name in IMAGE_FORMATS),
        )
    return extension


def require_matplotlib() -> Any:
    """Import matplotlib's Figure, or say which extra installs it.

    Raises:
        MissingDependency: matplotlib is not installed.
    """
    return import_extra("matplotlib.figure", "plot", "plotting").Figure


def palette(index: int) -> tuple[str, str]:
    """The colour and matplotlib line style of the ``index``-th line
    (:func:`tbconvert.output.linestyles.line_style`, the report's too)."""
    style = line_style(index)
    return style.colour, style.dash_name


def plot(
    store: Store,
    output: str,
    run: Globs = None,
    tag: Globs = None,
    context: str | None = None,
    x: str = "step",
    smoothing: float = 0.0,
    log_y: bool = False,
    *,
    grouping: Grouping | None = None,
    aggregate: str = "mean",
    band: str = "std",
    resumed: str = RESUMED_DEFAULT,
) -> Drawn:
    """Draw the selected learning curves into ``output`` (.png, .svg or .pdf).

    Args:
        store: An open store.
        output: The image file; its extension picks the format.
        run: Globs on run paths.
        tag: Globs on tags: one panel per tag.
        context: Only this context ('' is the run directory itself).
        x: ``step``, ``relative`` (seconds since each curve's first point) or ``wall``.
        smoothing: TensorBoard's smoothing weight, 0 (none) to 1.
        log_y: A logarithmic y axis.
        grouping: One line per group of runs (and context): their ``aggregate`` (``mean`` or
            ``median``) with a ``band`` (``std``, ``sem``, ``ci95``, ``minmax`` or
            ``none``), each run smoothed first, at the steps the runs logged
            (:mod:`tbconvert.query.aggregation`, the grouped export's rule).
        resumed: ``current`` (each series as its last attempt left it) or ``all``.

    Returns:
        How many lines were drawn, and in the fullest panel.

    Raises:
        UsageError: a bad option, or a selection that matches nothing.
        MissingDependency: matplotlib is not installed.
    """
    fmt = image_format(output)
    if x not in X_AXES:
        raise UsageError(f"unknown x axis {x!r}", hint=f"choose from {', '.join(X_AXES)}")
    if aggregate not in AGGREGATES or band not in BANDS:
        raise UsageError(
            f"unknown aggregate {aggregate!r} or band {band!r}",
            hint=f"--aggregate {'|'.join(AGGREGATES)}, --band {'|'.join(BANDS)}",
        )
    if grouping is not None and x != "step":
        raise UsageError("groups of runs are drawn over steps", hint="leave --x out")
    smooth([0.0, 1.0], smoothing)  # checks the weight before anything is read
    figure_class = require_matplotlib()
    with store.snapshot():  # the runs' groups and their curves as of one moment
        curves = select_curves(store, run, tag, context, resumed)
        if grouping is None:
            lines = [PlotLine(c.tag, c.label, x_values(c, x), c.values, None) for c in curves]
        else:
            lines = grouped_lines(store, curves, grouping, run, smoothing, aggregate, band)
            smoothing = 0.0  # each run was smoothed before aggregating
    figure = _draw(figure_class, lines, x, smoothing, log_y)
    figure.savefig(expand_path(output), format=fmt, dpi=110)
    return Drawn(len(lines), max(Counter(line.tag for line in lines).values()))


class Drawn(NamedTuple):
    """What :func:`plot` drew: lines in all, and lines in the fullest panel."""

    lines: int
    fullest: int


@dataclass(frozen=True)
class PlotLine:
    """One line of a panel: a curve, or a group's aggregate with its band."""

    tag: str
    label: str
    xs: list[Any]
    values: list[float]
    band: tuple[list[float], list[float]] | None  # a group's band (low, high) around the line
    context: str = ""
    group: tuple[Any, ...] = ()  # a group's values of the grouping's keys


def grouped_lines(
    store: Store,
    curves: list[Curve],
    grouping: Grouping,
    run: Globs,
    smoothing: float,
    aggregate: str,
    kind: str,
) -> list[PlotLine]:
    """One line per group of runs and context, per tag: the runs' ``aggregate`` with a
    ``kind`` of band, each run smoothed first, at the steps they logged: with no smoothing,
    the numbers of ``export scalars`` with the same grouping
    (:func:`tbconvert.query.groups.group_statistics`)."""
    from tbconvert.query.groups import group_statistics, run_groups

    keys, groups = run_groups(store, grouping, run)
    members: dict[tuple[Any, ...], list[RunCurve]] = {}
    for curve in curves:
        group = groups.get(curve.run_id)
        if group is None:
            continue
        values = smooth(curve.values, smoothing) if smoothing > 0 else curve.values
        members.setdefault((group, curve.context, curve.tag), []).append((curve.steps, values))
    # Labels name the keys whose values tell the groups apart (all of them if none does).
    varying = [i for i in range(len(keys)) if len({group[i] for group, *_ in members}) > 1]
    shown = varying or list(range(len(keys)))
    lines = []
    for (group, context, tag), statistics in group_statistics(members):
        name = ", ".join(f"{keys[i]}={group[i]}" for i in shown)
        label = f"{name} [{context}]" if context else name
        runs = len(members[(group, context, tag)])
        center = statistics.median if aggregate == "median" else statistics.mean
        band = statistics.band(kind, center)
        lines.append(
            PlotLine(
                tag,
                f"{label} ({_count(runs, 'run')})",
                statistics.steps,
                center,
                band,
                context,
                group,
            )
        )
    return lines


def _draw(figure_class: Any, lines: list[PlotLine], x: str, smoothing: float, log_y: bool) -> Any:
    tags = sorted({line.tag for line in lines})
    columns = 1 if len(tags) == 1 else 2
    rows = math.ceil(len(tags) / columns)
    labels = sorted({line.label for line in lines})
    # Room for the legend beside the panels: a column of entries per 40 labels.
    legend_columns = max(1, math.ceil(len(labels) / 40))
    width = 7 * columns + 2.6 * legend_columns
    figure = figure_class(figsize=(width, max(4.2 * rows, 0.22 * len(labels) / legend_columns)),
                          layout="constrained")  # fmt: skip
    axes = figure.subplots(rows, columns, squeeze=False).flatten()
    styles = {label: palette(index) for index, label in enumerate(labels)}
    handles = {}
    for axis, tag in zip(axes, tags, strict=False):
        for line in (item for item in lines if item.tag == tag):
            colour, style = styles[line.label]
            if line.band is not None:
                axis.fill_between(line.xs, *line.band, color=colour, alpha=0.2, linewidth=0)
            elif smoothing > 0:
                axis.plot(line.xs, line.values, color=colour, linestyle=style, alpha=0.25,
                          linewidth=1)  # fmt: skip
            values = smooth(line.values, smoothing) if smoothing > 0 else line.values
            (handles[line.label],) = axis.plot(
                line.xs, values, color=colour, linestyle=style, linewidth=1.6, label=line.label
            )
        axis.set_title(tag)
        axis.set_xlabel({"step": "step", "relative": "seconds since first point"}.get(x, "UTC"))
        axis.grid(True, alpha=0.3)
        if log_y:
            axis.set_yscale("log")
    for axis in axes[len(tags) :]:
        axis.set_visible(False)
    figure.legend(
        [handles[label] for label in labels],
        labels,
        loc="outside right upper",
        fontsize="small",
        ncols=legend_columns,
    )
    if x == "wall":
        figure.autofmt_xdate()
    return figure


def _count(number: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
