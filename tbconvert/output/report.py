"""One self-contained HTML page of a store (``tbconvert report``): open it offline, mail it.

The page needs nothing but itself: CSS inline, charts as inline SVG (``svgchart``), images as
``data:`` URIs, no script and no network resource at all.  It shows the runs with their
hyper-parameters and the final value of every selected scalar tag, one chart per scalar tag
comparing the runs, the images of each image series' last step, and the last text of each
text series.

Everything that comes from a log (run paths, contexts, tags, texts, hyper-parameters) is
HTML-escaped where it is written, in one helper (:func:`_text`), so a tag spelt like markup
stays text.
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from html import escape
from typing import TYPE_CHECKING, Any

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.output.choices import RESUMED_DEFAULT
from tbconvert.output.export import open_output
from tbconvert.output.linestyles import DISTINCT_STYLES, LineStyle, crowded_warning, line_style
from tbconvert.output.plot import Curve, PlotLine, curves_of, grouped_lines
from tbconvert.output.svgchart import Line, dash_array, line_chart
from tbconvert.query.metrics import Owner, metric_columns

if TYPE_CHECKING:
    from tbconvert.query.groups import Grouping
    from tbconvert.query.results import StoredImage
    from tbconvert.query.store import Store

MAX_IMAGES = 120
_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;
background:#f6f7f9}header,section{max-width:1240px;margin:0 auto;padding:0 20px}
header{padding-top:18px}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;
border-bottom:1px solid #d8dde3;padding-bottom:4px}.meta{color:#5b6670;margin:0}
nav a{margin-right:14px;color:#1f5fa8}.scroll{overflow:auto;max-height:85vh;background:#fff;
border:1px solid #d8dde3;border-radius:6px}table{border-collapse:collapse;width:100%}
th,td{padding:5px 9px;border-bottom:1px solid #eceff2;text-align:left;vertical-align:top;
overflow-wrap:anywhere}th{background:#eef1f4;font-weight:600;overflow-wrap:normal}
thead tr:last-child th{position:sticky;top:0}th.group{text-align:center;color:#5b6670;
font-weight:500;border-left:1px solid #d8dde3}
td.num{text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:normal}
td.name{min-width:14em}
.grid-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(580px,100%),1fr));
gap:14px}
figure{margin:0;background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:10px}
figcaption{font-weight:600;margin-bottom:6px;word-break:break-all}
svg.chart{width:100%;height:auto}svg .frame{fill:none;stroke:#c4cbd2}
svg .grid{stroke:#eceff2}svg text{font-size:11px;fill:#5b6670}
svg .ytick{text-anchor:end}svg .xtick,svg .xlabel,svg .empty{text-anchor:middle}
svg polyline{fill:none;stroke-linejoin:round}
ul.legend{list-style:none;margin:6px 0 0;padding:0;font-size:12px;display:flex;flex-wrap:wrap;
gap:4px 14px;overflow-wrap:anywhere}.swatch{display:inline-block;width:28px;height:3px;
margin-right:5px;vertical-align:middle}.images{display:grid;grid-template-columns:repeat(auto-fill,
minmax(220px,1fr));gap:12px}.images img{width:100%;height:auto;background:#eee}
.images img.tiny{image-rendering:pixelated}.images figcaption{font-weight:400;font-size:12px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;max-width:760px}.note{color:#5b6670}
"""


def report(
    store: Store,
    output: str,
    run: Globs = None,
    tag: Globs = None,
    grouping: Grouping | None = None,
    resumed: str = RESUMED_DEFAULT,
) -> dict[str, int]:
    """Write the report page of the selected runs and tags to ``output`` (``-``: stdout).

    Args:
        store: An open store.
        output: The page to write, ``*.html`` (or ``-``).
        run: Globs on run paths.
        tag: Globs on tags (scalars, images and texts alike).
        grouping: Charts of one line per group of runs, their mean with a band of one
            standard deviation (:func:`grouped_charts`).
        resumed: ``current`` (each series as its last attempt left it) or ``all`` (every
            point in write order: a resumed run's line goes back, as in TensorBoard).

    Returns:
        What the page shows: ``runs``, ``charts``, ``images``, ``texts``, and ``fullest``:
        the lines of its fullest chart.

    Raises:
        UsageError: the file is not ``.html``, or no run matches.
    """
    if output != "-" and os.path.splitext(output)[1].lower() not in (".html", ".htm"):
        raise UsageError(f"a report is an HTML page: {output!r}", hint="name it *.html")
    with store.snapshot():  # runs, curves, images and texts as of one moment
        runs = store.runs(run)
        if not runs:
            everything = ", ".join(r["run_path"] for r in store.runs()[:12]) or "(none)"
            raise UsageError("no run matches --run", path=store.display, hint=f"runs: {everything}")
        curves = curves_of(store, store.series(run=run, tag=tag, plugin="scalars"), resumed)
        images = _last_step_images(store.images(run=run, tag=tag))
        texts = _last_texts(store, run, tag)
        if grouping is None:
            charts, single = _curve_charts(curves, _styles(curves))
            title, note = "Scalars", crowded_warning(_fullest(charts), "chart") or ""
        else:
            charts, single = grouped_charts(store, curves, grouping, run)
            title = "Scalars, by group"
            note = "Each line is the mean of a group's runs, the band one standard deviation."
        body = [
            _header(store, runs, curves),
            _runs_section(runs, curves),
            _charts_section(charts, single, title, note.removeprefix("warning: ")),
            _images_section(images),
            _texts_section(texts),
        ]
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_text('Runs of ' + os.path.basename(store.display))}</title>"
            f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
        )
    with open_output(output) as out:
        out.write(page)
    return {
        "runs": len(runs),
        "charts": len(charts),
        "images": len(images),
        "texts": len(texts),
        "fullest": _fullest(charts),
    }


def _text(value: Any) -> str:
    # The one place log strings enter the page.
    return escape(str(value), quote=True)


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"
    return _text(value)


def _styles(curves: Sequence[Curve]) -> dict[str, LineStyle]:
    # One style per run and context across charts while there are enough; else per chart (in
    # _curve_charts), so that the lines of one chart never share a style.
    labels = sorted({curve.label for curve in curves if len(curve.steps) > 1})  # charted
    if len(labels) > DISTINCT_STYLES:
        return {}
    return {label: line_style(index) for index, label in enumerate(labels)}


def _fullest(charts: dict[str, list[Line]]) -> int:
    return max(map(len, charts.values()), default=0)


def _header(store: Store, runs: Sequence[dict[str, Any]], curves: Sequence[Curve]) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<header><h1>Runs of {_text(os.path.basename(store.display))}</h1>"
        f'<p class="meta">{_count(len(runs), "run")}, {_count(len(curves), "scalar series")}, from '
        f"{_text(store.display)}; generated by tbconvert {now}</p>"
        '<nav><a href="#runs">Runs</a><a href="#scalars">Scalars</a>'
        '<a href="#images">Images</a><a href="#texts">Texts</a></nav></header>'
    )


def _count(number: int, noun: str) -> str:
    """``1 run``, ``2 runs`` (a noun ending in s stays as it is)."""
    return f"{number} {noun}" if number == 1 or noun.endswith("s") else f"{number} {noun}s"


def _runs_section(runs: Sequence[dict[str, Any]], curves: Sequence[Curve]) -> str:
    keys = sorted({key for row in runs for values in row["params"].values() for key in values})
    # A tag logged in several contexts of a run gets a column per context, named as the
    # hparams table names them, so that the runs of a sweep line up.
    final = {(c.run_id, c.context, c.tag): c.values[-1] for c in curves if c.values}
    owners = [Owner(row["run_id"], _session_of(row)) for row in runs]
    tags, cells = metric_columns(sorted({curve.tag for curve in curves}), owners, final)
    # Two header rows: a hyper-parameter and a scalar tag may share a name (``lr``).
    groups = '<th colspan="2"></th>' + "".join(
        f'<th colspan="{len(names)}" class="group">{title}</th>'
        for title, names in (("hyper-parameters", keys), ("last value", tags))
        if names
    )
    names = "".join(f"<th>{_text(name)}</th>" for name in ["run", "group", *keys, *tags])
    head = f"<tr>{groups}</tr><tr>{names}</tr>"
    lines = []
    for row, metrics in zip(runs, cells, strict=True):
        cells_html = [
            f'<td class="name">{_text(row["run_path"])}</td>',
            f"<td>{_text(row['group_path'])}</td>",
        ]
        for key in keys:
            found = _distinct(v[key] for v in row["params"].values() if key in v)
            cells_html.append(f'<td class="num">{" | ".join(_number(v) for v in found)}</td>')
        cells_html.extend(
            f'<td class="num">{"" if value is None else _number(value)}</td>' for value in metrics
        )
        lines.append("<tr>" + "".join(cells_html) + "</tr>")
    return (
        '<section id="runs"><h2>Runs</h2><p class="note">Hyper-parameters of each run '
        "(every session's value) and the last value of each scalar tag (a column per context "
        "where a run logged it in several).</p>"
        f'<div class="scroll"><table><thead>{head}</thead>'
        f"<tbody>{''.join(lines)}</tbody></table></div></section>"
    )


def _session_of(run: dict[str, Any]) -> str | None:
    # A run's one hparams session context reads "hparams" in column names, whatever the
    # writer called its directory; with several, each keeps its name.
    sessions = list(run["params"])
    return sessions[0] if len(sessions) == 1 else None


def _distinct(values: Iterable[Any]) -> list[Any]:
    found: list[Any] = []
    for value in values:
        if value not in found:
            found.append(value)
    return found


def _curve_charts(
    curves: Sequence[Curve], styles: dict[str, LineStyle]
) -> tuple[dict[str, list[Line]], list[str]]:
    """Per tag, its curves as chart lines; and the tags of one point per series (a chart of
    dots: the runs table shows them)."""
    charts: dict[str, list[Line]] = {}
    single = []
    for tag in sorted({curve.tag for curve in curves}):
        chosen = [curve for curve in curves if curve.tag == tag]
        if all(len(curve.steps) <= 1 for curve in chosen):
            single.append(tag)
            continue
        charts[tag] = []
        for index, curve in enumerate(chosen):
            style = styles.get(curve.label) or line_style(index)
            charts[tag].append(
                Line(curve.label, style.colour, curve.steps, curve.values, dashes=style.dashes)
            )
    return charts, single


def grouped_charts(
    store: Store, curves: Sequence[Curve], grouping: Grouping, run: Globs = None
) -> tuple[dict[str, list[Line]], list[str]]:
    """Per tag, a chart of one line per group of runs and context: the mean of the runs at
    each step they logged, with a band of one standard deviation (the numbers of ``plot``
    and ``export scalars`` with the same grouping); and the tags of one point per group.

    Args:
        store: An open store.
        curves: The selected runs' scalar curves (:func:`~tbconvert.output.plot.curves_of`).
        grouping: How the runs form groups.
        run: The globs the runs were chosen by.
    """
    return _group_charts(grouped_lines(store, list(curves), grouping, run, 0.0, "mean", "std"))


def _group_charts(lines: Sequence[PlotLine]) -> tuple[dict[str, list[Line]], list[str]]:
    """As :func:`_curve_charts`, for groups of runs (``plot.grouped_lines``) with bands."""
    labels = sorted({line.label for line in lines})
    styles = {label: line_style(index) for index, label in enumerate(labels)}
    charts: dict[str, list[Line]] = {}
    single = []
    for tag in sorted({line.tag for line in lines}):
        chosen = [line for line in lines if line.tag == tag]
        if all(len(line.xs) <= 1 for line in chosen):
            single.append(tag)
            continue
        charts[tag] = [
            Line(
                line.label,
                styles[line.label].colour,
                line.xs,
                line.values,
                line.band,
                styles[line.label].dashes,
            )
            for line in chosen
        ]
    return charts, single


def _swatch(line: Line) -> str:
    # The legend draws the line's dashes too, at twice its width, as a CSS gradient.
    if not line.dashes:
        return f'<span class="swatch" style="background:{line.colour}"></span>'
    stops, at = [], 0.0
    for index, length in enumerate(line.dashes):
        colour = line.colour if index % 2 == 0 else "transparent"
        stops.append(f"{colour} {at:g}px {at + length * 2:g}px")
        at += length * 2
    gradient = f"repeating-linear-gradient(90deg,{','.join(stops)})"
    return (
        f'<span class="swatch" data-dashes="{dash_array(line.dashes)}" '
        f'style="background:{gradient}"></span>'
    )


def _charts_section(
    charts: dict[str, list[Line]], single: Sequence[str], title: str, note: str = ""
) -> str:
    cards = []
    for tag, lines in charts.items():
        legend = "".join(f"<li>{_swatch(line)}{_text(line.label)}</li>" for line in lines)
        cards.append(
            f"<figure><figcaption>{_text(tag)}</figcaption>{line_chart(lines, tag)}"
            f'<ul class="legend">{legend}</ul></figure>'
        )
    content = "".join(cards) or '<p class="note">No scalar series selected.</p>'
    if single:
        named = ", ".join(_text(tag) for tag in single)
        content += f'<p class="note">One point per series, in the runs table: {named}.</p>'
    lead = f'<p class="note">{note}</p>' if note else ""
    return (
        f'<section id="scalars"><h2>{title}</h2>{lead}'
        f'<div class="grid-cards">{content}</div></section>'
    )


def _last_step_images(images: Iterable[StoredImage]) -> list[StoredImage]:
    # Per (run, context, tag): the images of its highest step.
    last: dict[tuple[str, str, str], list[StoredImage]] = {}
    for image in images:
        key = (image.run_path, image.context, image.tag)
        kept = last.get(key)
        if kept is None or image.step > kept[0].step:
            last[key] = [image]
        elif image.step == kept[0].step:
            kept.append(image)
    return [image for key in sorted(last) for image in last[key]]


def _images_section(images: Sequence[StoredImage]) -> str:
    figures = []
    for image in images[:MAX_IMAGES]:
        mime = _MIME.get((image.format or "").upper())
        where = " · ".join(p for p in (image.run_path, image.context, image.tag) if p)
        caption = f"{_text(where)} · step {image.step}" + (f" #{image.idx}" if image.idx else "")
        if mime is None:
            figures.append(
                f"<figure><figcaption>{caption}</figcaption>{_text(image.format)} "
                "image (not shown by browsers)</figure>"
            )
            continue
        data = base64.b64encode(image.data).decode("ascii")
        # Tiny images (thumbnails, MNIST digits) are enlarged with their pixels kept sharp.
        tiny = ' class="tiny"' if (image.width or 0) < 128 else ""
        figures.append(
            f'<figure><img{tiny} src="data:{mime};base64,{data}" alt="{_text(where)}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    more = len(images) - MAX_IMAGES
    note = f'<p class="note">{more} more images not shown.</p>' if more > 0 else ""
    content = "".join(figures) or '<p class="note">No images selected.</p>'
    return (
        '<section id="images"><h2>Images of the last step</h2>'
        f'<div class="images">{content}</div>{note}</section>'
    )


def _last_texts(store: Store, run: Globs, tag: Globs) -> list[tuple[Any, ...]]:
    chosen = store.series(run=run, tag=tag, plugin="text")
    # In step order: the last row is the last text.
    return [rows[-1] for _series, rows in store.points_by_series("texts", chosen) if rows]


def _texts_section(texts: Sequence[tuple[Any, ...]]) -> str:
    rows = "".join(
        f"<tr><td>{_text(run_path)}</td><td>{_text(context)}</td><td>{_text(tag)}</td>"
        f'<td class="num">{step}</td><td><pre>{_text(value)}</pre></td></tr>'
        for _, run_path, context, tag, step, _, _, value in texts
    )
    if not rows:
        return '<section id="texts"><h2>Texts</h2><p class="note">No texts selected.</p></section>'
    return (
        '<section id="texts"><h2>Last text of each series</h2><div class="scroll"><table>'
        "<thead><tr><th>run</th><th>context</th><th>tag</th><th>step</th><th>text</th></tr>"
        f"</thead><tbody>{rows}</tbody></table></div></section>"
    )
