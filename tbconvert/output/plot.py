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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tbconvert.errors import MissingDependency, UsageError
from tbconvert.filters import Globs, globs
from tbconvert.store.engine import expand_path

if TYPE_CHECKING:
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store

X_AXES = ("step", "relative", "wall")
IMAGE_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class Curve:
    """The points of one scalar series, in step order (NaN where a NaN was logged)."""

    run_path: str
    context: str
    tag: str
    steps: list[int]
    wall_times: list[float]
    values: list[float]

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
    store: Store, run: Globs = None, tag: Globs = None, context: str | None = None
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
    return curves_of(store, chosen)


def curves_of(store: Store, chosen: Sequence[SeriesRef]) -> list[Curve]:
    """Read the points of scalar series as curves, in the series' order."""
    curves = []
    for series in chosen:
        points = list(store.points("scalars", [series]))
        curves.append(
            Curve(
                series.run_path,
                series.context,
                series.tag,
                [row[4] for row in points],
                [math.nan if row[5] is None else row[5] for row in points],
                [math.nan if row[6] is None else row[6] for row in points],
            )
        )
    return curves


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
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise MissingDependency(
            "plotting needs matplotlib, which is not installed",
            hint="pip install '.[plot]' (in a tbconvert checkout)",
        ) from error
    return Figure


def plot(
    store: Store,
    output: str,
    run: Globs = None,
    tag: Globs = None,
    context: str | None = None,
    x: str = "step",
    smoothing: float = 0.0,
    log_y: bool = False,
) -> int:
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

    Returns:
        The number of curves drawn.

    Raises:
        UsageError: a bad option, or a selection that matches nothing.
        MissingDependency: matplotlib is not installed.
    """
    fmt = image_format(output)
    if x not in X_AXES:
        raise UsageError(f"unknown x axis {x!r}", hint=f"choose from {', '.join(X_AXES)}")
    smooth([0.0, 1.0], smoothing)  # checks the weight before anything is read
    figure_class = require_matplotlib()
    curves = select_curves(store, run, tag, context)
    figure = _draw(figure_class, curves, x, smoothing, log_y)
    figure.savefig(expand_path(output), format=fmt, dpi=110)
    return len(curves)


def _draw(figure_class: Any, curves: list[Curve], x: str, smoothing: float, log_y: bool) -> Any:
    tags = sorted({curve.tag for curve in curves})
    columns = 1 if len(tags) == 1 else 2
    rows = math.ceil(len(tags) / columns)
    figure = figure_class(figsize=(7 * columns, 4.2 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).flatten()
    labels = sorted({curve.label for curve in curves})
    colours = {label: f"C{index % 10}" for index, label in enumerate(labels)}
    for axis, tag in zip(axes, tags, strict=False):
        for curve in (c for c in curves if c.tag == tag):
            xs, colour = x_values(curve, x), colours[curve.label]
            if smoothing > 0:
                axis.plot(xs, curve.values, color=colour, alpha=0.25, linewidth=1)
            values = smooth(curve.values, smoothing) if smoothing > 0 else curve.values
            axis.plot(xs, values, color=colour, linewidth=1.6, label=curve.label)
        axis.set_title(tag)
        axis.set_xlabel({"step": "step", "relative": "seconds since first point"}.get(x, "UTC"))
        axis.grid(True, alpha=0.3)
        if log_y:
            axis.set_yscale("log")
        axis.legend(fontsize="small")
    for axis in axes[len(tags) :]:
        axis.set_visible(False)
    if x == "wall":
        figure.autofmt_xdate()
    return figure
