"""``tbconvert report``: one offline HTML page, parsed here with the standard library.

The store holds the read API's sweep (known hparams, metrics, images, notes) and a run whose
directory, tags, text and hparams are written like markup.  The page must show the sweep's
values, carry the images as the exact logged bytes in ``data:`` URIs, load nothing from
anywhere, and keep every string from the logs as text (no element or attribute of its own).
"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from tensorboardX import SummaryWriter

import tbconvert
from tbconvert.cli import cli
from tbconvert.output.report import report
from tests.support.browser import measure
from tests.support.eventfiles import event_file_name, simple_value, summary_event, write_events
from tests.support.resumed_run import write_resumed_run
from tests.support.snapshots import StoreFactory, query_rows
from tests.support.sweep import SWEEP, build_store

W0 = 1_795_400_000.0

HOSTILE_RUN = '"><img src=x onerror=alert(1)>'
HOSTILE_TAG = "<script>alert(1)</script>"
HOSTILE_TEXT = "</pre><iframe src=//evil.example></iframe>"
HOSTILE_PARAM = "<b onmouseover=alert(1)>adam</b>"


class Page(HTMLParser):
    """Every element (with its attributes) and every text of a page, in order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def count(self, tag: str, **attrs: str) -> int:
        return sum(
            1
            for name, found in self.elements
            if name == tag and all(found.get(k) == v for k, v in attrs.items())
        )


def write_hostile(logdir: Path) -> None:
    # tensorboardX cleans tags, so the markup tags are hand-built Events (TF1 writes them as is).
    run = logdir / "evil" / HOSTILE_RUN
    pixels = np.zeros((2, 2, 3), np.uint8)
    with SummaryWriter(str(run), flush_secs=3600) as writer:
        writer.add_text("note", HOSTILE_TEXT, 0)
        writer.add_image("picture", pixels, 0, dataformats="HWC")
        writer.add_hparams({"optimizer": HOSTILE_PARAM}, {"hparam/score": 1.0})
    events = [
        summary_event(step, W0 + step, [simple_value(HOSTILE_TAG, step)]) for step in range(3)
    ]
    write_events(run / event_file_name(W0, suffix=".markup"), events)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("report")
    store = build_store(base, StoreFactory("sqlite", None))
    write_hostile(base / "evil_logs")
    assert tbconvert.convert(base / "evil_logs", store, progress=False).exit_code == 0
    return store


@pytest.fixture(scope="module")
def page(store_path: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Page]:
    target = tmp_path_factory.mktemp("page") / "report.html"
    result = CliRunner().invoke(cli, ["report", "--store", store_path, "-o", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text(encoding="utf-8")
    return text, Page(text)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_nothing_is_loaded_from_anywhere(page: tuple[str, Page]) -> None:
    text, parsed = page
    names = {name for name, _ in parsed.elements}
    assert not names & {"script", "link", "iframe", "object", "embed", "base"}
    for name, attrs in parsed.elements:
        assert not any(key.startswith("on") for key in attrs), (name, attrs)
        if "src" in attrs:
            assert (attrs["src"] or "").startswith("data:image/"), (name, attrs)
        if "href" in attrs and name == "a":
            assert (attrs["href"] or "").startswith("#"), attrs
    assert "url(" not in text and "@import" not in text
    assert text.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in text


def test_strings_from_logs_are_text_not_markup(page: tuple[str, Page]) -> None:
    text, parsed = page
    data = "\n".join(parsed.texts)
    for hostile in (HOSTILE_RUN, HOSTILE_TAG, HOSTILE_TEXT, HOSTILE_PARAM):
        assert hostile in data  # shown, as text
        assert hostile not in text  # never written raw
    assert parsed.count("img", src="x") == 0
    assert parsed.count("b") == 0 and parsed.count("iframe") == 0


def test_runs_table_has_hparams_and_final_metrics(page: tuple[str, Page]) -> None:
    text, _ = page
    table = text.split('<section id="runs">', 1)[1].split("</section>", 1)[0]
    groups, names = table.split("<tbody>")[0].split("<tr>")[1:3]
    header = re.findall(r"<th>(.*?)</th>", names)
    assert header[:2] == ["run", "group"]
    # Hyper-parameters, then last values: run_1 logs a scalar "lr" besides the sweep's hparam.
    spans = [int(n) for n in re.findall(r'colspan="(\d+)"', groups)]
    assert "hyper-parameters" in groups and "last value" in groups and sum(spans) == len(header)
    keys, tags = header[2 : 2 + spans[1]], header[2 + spans[1] :]
    assert keys == ["batch_size", "lr", "optimizer"] and {"accuracy", "loss", "lr"} <= set(tags)
    rows = {
        re.sub("<.*?>", "", cells[0]): [re.sub("<.*?>", "", c) for c in cells]
        for cells in (re.findall(r"<td[^>]*>(.*?)</td>", row) for row in table.split("<tr>")[3:])
    }
    header = ["run", "group", *(f"param {k}" for k in keys), *tags]
    for run, (lr, optimizer, final, _) in SWEEP.items():
        cells = dict(zip(header, rows[f"sweep/{run}"], strict=True))
        assert float(cells["param lr"]) == lr and cells["param optimizer"] == optimizer
        assert float(cells["accuracy"]) == pytest.approx(final, rel=1e-5)
    assert rows["sweep/lr_1.0"][header.index("loss")] == "NaN"  # its last loss


def test_one_chart_per_scalar_tag_with_a_line_per_series(
    page: tuple[str, Page], store_path: str
) -> None:
    text, parsed = page
    counted = query_rows(
        store_path,
        "SELECT tag, count(*), max(points) FROM v_series WHERE plugin = 'scalars' GROUP BY tag",
    )
    # A tag of one point per series gets no chart (a chart of dots): the runs table has it.
    series = [(tag, count) for tag, count, most in counted if most > 1]
    single = sorted(tag for tag, _count, most in counted if most <= 1)
    assert single and parsed.count("svg") == len(series)
    charts = text.split('<section id="scalars">', 1)[1].split("</section>", 1)[0]
    cards = charts.split("<figure>")[1:]
    assert len(cards) == len(series)
    assert f"One point per series, in the runs table: {', '.join(single)}." in charts
    by_tag = dict(series)
    for card in cards:
        caption = re.search(r"<figcaption>(.*?)</figcaption>", card)
        assert caption is not None
        tag = Page(caption.group(1)).texts[0]
        assert card.count('<g class="line">') == by_tag[tag], tag


def test_images_are_the_last_steps_bytes(page: tuple[str, Page], store_path: str) -> None:
    _, parsed = page
    sources = [attrs["src"] or "" for name, attrs in parsed.elements if name == "img"]
    shown = sorted(base64.b64decode(src.split(",", 1)[1]) for src in sources)
    expected = sorted(
        bytes(data)
        for (data,) in query_rows(
            store_path,
            "SELECT i.data FROM v_images AS i WHERE i.step = (SELECT max(step) FROM v_images "
            "AS j WHERE j.run_id = i.run_id AND j.context = i.context AND j.tag = i.tag)",
        )
    )
    assert shown == expected and len(shown) == len(SWEEP) + 1


def test_texts_show_the_last_text(page: tuple[str, Page]) -> None:
    _, parsed = page
    assert "Diverged at step 6" in parsed.texts


def test_filters_and_errors(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "sweep.html"
    with tbconvert.open_store(store_path) as store:
        shown = report(store, str(target), run="sweep/*", tag=["loss", "samples"])
    assert shown == {"runs": 3, "charts": 1, "images": 3, "texts": 0, "fullest": 3}
    assert Page(target.read_text()).count("svg") == 1
    assert invoke("report", "--store", store_path, "-o", str(tmp_path / "r.txt")).exit_code == 2
    missing = invoke("report", "--store", store_path, "--run", "nope", "-o", str(target))
    assert missing.exit_code == 2 and "sweep/lr_0.1" in missing.stderr


def test_one_run_is_counted_in_the_singular(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    events = [summary_event(step, 1e9 + step, [simple_value("loss", 1.0)]) for step in range(3)]
    write_events(logdir / "only" / event_file_name(1e9), events)
    store = str(tmp_path / "s.db")
    tbconvert.convert(logdir, store, progress=False)
    output = tmp_path / "report.html"
    with tbconvert.open_store(store) as opened:
        report(opened, str(output))
    assert "1 run, 1 scalar series, from" in output.read_text(encoding="utf-8")


CROWDED_RUNS = 24
PARAMS = {"dropout": 0.1, "optimizer": "adam", "scheduler": "cosine_with_warmup"}


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The page of 24 runs of long names, each with a train and a val context, with
    hyper-parameters: 48 lines in the chart of ``loss``; and what the command said."""
    base = tmp_path_factory.mktemp("crowded")
    for run in range(CROWDED_RUNS):
        name = f"sweep/lr_{run:02d}_a_rather_long_run_name_with_many_parts_seed_{run}"
        for context in ("train", "val"):
            with SummaryWriter(str(base / "logs" / name / context), flush_secs=3600) as writer:
                for step in range(30):
                    writer.add_scalar("loss", 1 / (step + run + 1), step, walltime=W0 + step)
                if context == "train":
                    writer.add_hparams({"lr": 0.001 * (run + 1), **PARAMS}, {"hparam/score": 1.0})
    store = str(base / "s.db")
    assert tbconvert.convert(base / "logs", store, progress=False).exit_code == 0
    target = base / "report.html"
    result = invoke("report", "--store", store, "-o", str(target))
    assert result.exit_code == 0, result.output
    return target, result.stderr


def chart_lines(text: str, tag: str) -> list[tuple[str, str, str]]:
    """(label, colour, dash array) of each line of the chart of ``tag``."""
    card = next(c for c in text.split("<figure>") if c.startswith(f"<figcaption>{tag}<"))
    return [
        (Page(title).texts[0], colour, dashes)
        for title, colour, dashes in re.findall(
            r'<g class="line"><title>(.*?)</title><polyline points="[^"]*" '
            r'stroke="([^"]*)" stroke-width="[^"]*"(?: stroke-dasharray="([^"]*)")?/>',
            card,
        )
    ]


def test_24_runs_are_drawn_in_plots_colours_and_dashes_and_warned_of(
    crowded: tuple[Path, str], page: tuple[str, Page]
) -> None:
    from matplotlib import colormaps, rcParams
    from matplotlib.colors import to_hex

    from tbconvert.output import plot

    target, said = crowded
    text = target.read_text(encoding="utf-8")
    lines = chart_lines(text, "loss")
    assert len(lines) == 2 * CROWDED_RUNS
    assert len({(colour, dashes) for _, colour, dashes in lines}) == len(lines)
    # The look plot gives the same line (the n-th label), as matplotlib draws it: its tab20
    # colours, and its own on-off patterns scaled by the line width.
    patterns = {"-": "", "--": "dashed", ":": "dotted", "-.": "dashdot"}
    assert {to_hex(colour) for colour in colormaps["tab20"](range(20))} == {
        colour for _, colour, dashes in lines if not dashes
    }
    for index, (label, colour, dashes) in enumerate(sorted(lines)):
        expected_colour, style = plot.palette(index)
        assert (label, colour) == (label, expected_colour)
        pattern = rcParams[f"lines.{patterns[style]}_pattern"] if patterns[style] else []
        assert [float(n) for n in dashes.split()] == pytest.approx([1.6 * n for n in pattern])
    # Each legend entry draws its line's colour and dashes.
    legend = re.findall(
        r'<li><span class="swatch"(?: data-dashes="([^"]*)")? style="background:([^"]*)">'
        r"</span>(.*?)</li>",
        text,
    )
    for (label, colour, dashes), (shown_dashes, background, name) in zip(
        lines, legend, strict=True
    ):
        assert Page(name).texts[0] == label and colour in background and shown_dashes == dashes
    warning = "48 lines in one chart are more than a person can tell apart"
    assert f"warning: {warning}" in said and warning in text
    assert "tell apart" not in page[0]  # the sweep's few lines


def test_the_runs_table_is_allowed_to_wrap_and_scrolls_inside_its_box(
    crowded: tuple[Path, str],
) -> None:
    text = crowded[0].read_text(encoding="utf-8")
    style = re.search(r"<style>(.*?)</style>", text, re.DOTALL)
    assert style is not None
    rules = dict(re.findall(r"([^{}]+)\{([^{}]*)\}", style.group(1).replace("\n", "")))
    assert "nowrap" not in style.group(1)
    assert "overflow-wrap:anywhere" in rules["th,td"] and "overflow:auto" in rules[".scroll"]
    assert '<section id="runs">' in text.split('<div class="scroll"><table>')[0]


@pytest.mark.parametrize("width", [1400, 700, 360])
def test_in_a_browser_the_page_fits_the_window_and_the_table_its_box(
    crowded: tuple[Path, str], width: int
) -> None:
    measured = measure(
        crowded[0],
        "(() => { const box = document.querySelector('#runs .scroll'); "
        "const table = box.querySelector('table'); const page = document.documentElement; "
        "const chart = document.querySelector('svg.chart').getBoundingClientRect(); "
        "const card = document.querySelector('#scalars figure').getBoundingClientRect(); "
        "return {window: window.innerWidth, windowHeight: window.innerHeight, "
        "page: page.scrollWidth, boxRight: box.getBoundingClientRect().right, "
        "boxWidth: box.clientWidth, boxHeight: box.getBoundingClientRect().height, "
        "table: table.getBoundingClientRect().width, overflow: getComputedStyle(box).overflowX, "
        "chartRight: chart.right, cardRight: card.right}; })()",
        width,
    )
    # Nothing is wider than the window: no sideways scrolling of the page itself.
    assert measured["page"] <= measured["window"] and measured["boxRight"] <= measured["window"]
    assert measured["chartRight"] <= measured["cardRight"] <= measured["window"]
    if measured["table"] > measured["boxWidth"]:
        # Wider than its box: it scrolls inside it, and the box's scroll bar is in view.
        assert measured["overflow"] == "auto" and measured["boxHeight"] <= measured["windowHeight"]
    if width >= 1400:
        assert measured["table"] <= measured["boxWidth"]  # long names wrap instead


def test_resumed_all_draws_the_points_in_write_order(tmp_path: Path) -> None:
    written = write_resumed_run(tmp_path / "logs" / "resumed")
    store = str(tmp_path / "s.db")
    tbconvert.convert(tmp_path / "logs", store, progress=False)
    drawn = {}
    for resumed in ("all", "current"):
        target = tmp_path / f"{resumed}.html"
        with tbconvert.open_store(store) as opened:
            report(opened, str(target), resumed=resumed)
        polyline = re.findall(r'<polyline points="([^"]*)"', target.read_text(encoding="utf-8"))
        xs = [float(point.split(",")[0]) for point in polyline[0].split()]
        # Steps 0..150 are 3 pixels apart on the x axis: a point's rank among them is its step.
        ranks = {x: rank for rank, x in enumerate(sorted(set(xs)))}
        drawn[resumed] = [ranks[x] for x in xs]
    assert drawn["all"] == written  # back once, at 50, as TensorBoard draws it
    assert drawn["current"] == [*range(0, 50), *range(50, 151)]
