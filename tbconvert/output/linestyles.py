"""How the lines of one chart are told apart: one definition for ``plot`` and the report.

Twenty colours (matplotlib's tab20, the darker shade of each hue first, so the first ten are
tab10, matplotlib's default cycle), then the same twenty dashed, dotted and dash-dotted: 80
lines of one chart have 80 different looks.  Past :data:`READABLE_LINES` lines in one chart,
people can no longer match a line to its legend entry by eye, whatever the styles, and both
commands say so.
"""

from __future__ import annotations

from dataclasses import dataclass

COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
)
# matplotlib's line style names with its own on-off patterns for them, in line widths (its
# rcParams lines.dashed_pattern, dotted_pattern, dashdot_pattern): SVG draws the same dashes.
DASHES: tuple[tuple[str, tuple[float, ...]], ...] = (
    ("-", ()),
    ("--", (3.7, 1.6)),
    (":", (1.0, 1.65)),
    ("-.", (6.4, 1.6, 1.0, 1.6)),
)
# More lines in one chart than a person can tell apart.
READABLE_LINES = 20
DISTINCT_STYLES = len(COLOURS) * len(DASHES)


@dataclass(frozen=True)
class LineStyle:
    """A line's colour (``#rrggbb``) and dashes (matplotlib's name, on-off in line widths)."""

    colour: str
    dash_name: str
    dashes: tuple[float, ...]


def line_style(index: int) -> LineStyle:
    """The style of the ``index``-th line: every colour solid, then every colour dashed, and
    so on; it repeats after :data:`DISTINCT_STYLES` lines."""
    name, dashes = DASHES[(index // len(COLOURS)) % len(DASHES)]
    return LineStyle(COLOURS[index % len(COLOURS)], name, dashes)


def crowded_warning(lines: int, chart: str) -> str | None:
    """The warning for a ``chart`` (``panel``, ``chart``) of ``lines`` lines, or None while
    they can be told apart."""
    if lines <= READABLE_LINES:
        return None
    return (
        f"warning: {lines} lines in one {chart} are more than a person can tell apart: "
        "--group-by KEY or --aggregate-over KEY draws one line per group of runs"
    )
