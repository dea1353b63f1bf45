"""Line charts as inline SVG text, with no dependency: the charts of ``tbconvert report``.

A report must open offline, anywhere, years later, so its charts are plain SVG elements in
the page rather than a plotting library's output or a script.  Each line is a polyline in
data order, broken where a value is not finite (NaN, or an infinity that has no place on the
axis); a very long curve is thinned to at most ``MAX_POINTS`` points, keeping each stretch's
lowest and highest value so that spikes stay visible.  Every text is HTML-escaped: labels
come from logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

MAX_POINTS = 2000
# The lines' width, in the chart's units; dashes are given in line widths
# (``linestyles.DASHES``).
STROKE_WIDTH = 1.6
WIDTH, HEIGHT = 560, 260
LEFT, RIGHT, TOP, BOTTOM = 62, 12, 10, 34


@dataclass(frozen=True)
class Line:
    """One curve of a chart: its legend label, colour and points (drawn in their order)."""

    label: str
    colour: str
    xs: Sequence[float]
    ys: Sequence[float]
    # A band around the line, (low, high) at each x: a group of runs' spread.
    band: tuple[Sequence[float], Sequence[float]] | None = None
    # On-off lengths in line widths (``linestyles.DASHES``); none: a solid line.
    dashes: tuple[float, ...] = ()


def dash_array(dashes: Sequence[float], width: float = STROKE_WIDTH) -> str:
    """SVG's and CSS's ``stroke-dasharray`` of on-off lengths given in line widths."""
    return " ".join(f"{length * width:g}" for length in dashes)


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values within [low, high], about ``count`` of them: steps of 1, 2, 2.5 or
    5 times a power of ten."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    return ticks


def thin(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """At most about ``MAX_POINTS`` points: per stretch, its first, lowest and highest."""
    if len(xs) <= MAX_POINTS:
        return list(xs), list(ys)
    size = math.ceil(len(xs) / (MAX_POINTS // 3))
    kept: list[int] = []
    for start in range(0, len(xs), size):
        indices = range(start, min(start + size, len(xs)))
        finite = [i for i in indices if math.isfinite(ys[i])]
        chosen = {start}
        if finite:
            chosen |= {min(finite, key=lambda i: ys[i]), max(finite, key=lambda i: ys[i])}
        kept.extend(sorted(chosen))
    return [xs[i] for i in kept], [ys[i] for i in kept]


def _label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-4):
        return f"{value:.3g}"
    return f"{value:.6g}"


def line_chart(lines: Sequence[Line], title: str, x_label: str = "step") -> str:
    """An ``<svg>`` element drawing ``lines`` on shared axes (the legend is the page's)."""
    thinned = [
        line
        if line.band is not None
        else Line(line.label, line.colour, *thin(line.xs, line.ys), dashes=line.dashes)
        for line in lines
    ]
    xs = [x for line in thinned for x in line.xs if math.isfinite(x)]
    ys = [y for line in thinned for y in line.ys if math.isfinite(y)]
    ys += [y for line in thinned if line.band for y in (*line.band[0], *line.band[1])]
    ys = [y for y in ys if math.isfinite(y)]
    opening = (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
    )
    if not xs or not ys:
        empty = f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="empty">no finite values</text>'
        return opening + empty + "</svg>"
    frame = _Frame(_widen(min(xs), max(xs)), _widen(min(ys), max(ys)))
    return opening + frame.axes(x_label) + "".join(map(frame.line, thinned)) + "</svg>"


def _widen(low: float, high: float) -> tuple[float, float]:
    # A flat range gets some height, so a constant curve sits mid-chart.
    return (low - 0.5, high + 0.5) if high == low else (low, high)


class _Frame:
    """Data ranges to pixel coordinates, and the elements drawn in them."""

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
        self.x_low, self.x_high = x_range
        self.y_low, self.y_high = y_range
        self.width, self.height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(self, x: float) -> float:
        return LEFT + (x - self.x_low) / (self.x_high - self.x_low) * self.width

    def py(self, y: float) -> float:
        return TOP + (self.y_high - y) / (self.y_high - self.y_low) * self.height

    def axes(self, x_label: str) -> str:
        parts = [
            f'<rect x="{LEFT}" y="{TOP}" width="{self.width}" height="{self.height}" '
            'class="frame"/>'
        ]
        for tick in nice_ticks(self.y_low, self.y_high):
            y = self.py(tick)
            parts.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                f'class="grid"/><text x="{LEFT - 6}" y="{y + 4:.1f}" class="ytick">'
                f"{_label(tick)}</text>"
            )
        for tick in nice_ticks(self.x_low, self.x_high, 7):
            x = self.px(tick)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                f'class="grid"/><text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                f'class="xtick">{_label(tick)}</text>'
            )
        parts.append(
            f'<text x="{LEFT + self.width / 2}" y="{HEIGHT - 4}" class="xlabel">'
            f"{escape(x_label)}</text>"
        )
        return "".join(parts)

    def line(self, line: Line) -> str:
        parts = [f'<g class="line"><title>{escape(line.label)}</title>']
        if line.band is not None:
            low, high = line.band
            edge = [
                (x, lo, hi)
                for x, lo, hi in zip(line.xs, low, high, strict=True)
                if math.isfinite(x) and math.isfinite(lo) and math.isfinite(hi)
            ]
            if edge:
                outline = [(x, hi) for x, _lo, hi in edge] + [(x, lo) for x, lo, _hi in edge[::-1]]
                points = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in outline)
                parts.append(
                    f'<polygon points="{points}" fill="{line.colour}" fill-opacity="0.2" '
                    'stroke="none"/>'
                )
        for segment in _segments(line.xs, line.ys):
            if len(segment) == 1:
                (x, y), colour = segment[0], line.colour
                parts.append(
                    f'<circle cx="{self.px(x):.1f}" cy="{self.py(y):.1f}" r="2" fill="{colour}"/>'
                )
            else:
                points = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in segment)
                dashed = f' stroke-dasharray="{dash_array(line.dashes)}"' if line.dashes else ""
                parts.append(
                    f'<polyline points="{points}" stroke="{line.colour}" '
                    f'stroke-width="{STROKE_WIDTH:g}"{dashed}/>'
                )
        return "".join(parts) + "</g>"


def _segments(xs: Sequence[float], ys: Sequence[float]) -> list[list[tuple[float, float]]]:
    # Runs of finite points: a NaN or infinity breaks the line, as in TensorBoard.
    segments: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys, strict=True):
        if math.isfinite(x) and math.isfinite(y):
            segments[-1].append((x, y))
        elif segments[-1]:
            segments.append([])
    return [segment for segment in segments if segment]
