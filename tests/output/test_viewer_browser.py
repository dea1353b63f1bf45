"""``tbconvert serve``'s viewer in a real browser, on SQLite and PostgreSQL stores: the runs
table, a chart per tag, the legend, the URL, zoom, smoothing, groups, and hostile names.

One browser for the module; each backend's store is served by a real ``tbconvert serve``.
The screenshots go to ``TBCONVERT_SCREENSHOTS`` (a directory) when set, for a person to look
at.
"""

from __future__ import annotations

import math
import os
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboardX import SummaryWriter

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tbconvert.output.plot import smooth
from tests.support.eventfiles import (
    event_file_name,
    simple_value,
    summary_event,
    wav_clip,
    write_events,
)
from tests.support.snapshots import StoreFactory, query_rows
from tests.support.sweep import IMAGE_STEPS, W0, build_store, sweep_pixels
from tests.support.viewer_browser import browser, screenshot, served, wait_ready, wait_until

HOSTILE_RUN = "evil/<img src=x onerror=\"window.__pwned='run'\">"
HOSTILE_TAG = "<script>window.__pwned='tag'</script>"
QUOTED_TAG = 'it\'s a "quoted" & <b>bold</b> tag'
HOSTILE_PARAM = "\"><img src=x onerror=window.__pwned='param'>"
HOSTILE_TEXT = "<img src=x onerror=\"window.__pwned='text'\"> & <script>x</script>"
LONG_RUN = "long/" + "/".join(("L" * 200, "M" * 200, "N" * 95))


def write_hostile(logdir: Path) -> None:
    """Two runs with hostile names, tags and params (tensorboard's protos for the tags, which
    tensorboardX would clean)."""
    for run in (HOSTILE_RUN, LONG_RUN):
        events = [
            summary_event(
                step,
                W0 + step,
                [
                    simple_value(HOSTILE_TAG, step * 0.5),
                    simple_value(QUOTED_TAG, -step),
                    simple_value("loss", 2.0 / (1 + step)),
                ],
            )
            for step in range(5)
        ]
        clip = Summary.Audio(
            encoded_audio_string=wav_clip(), sample_rate=8000, content_type="audio/wav"
        )
        events.append(summary_event(0, W0, [Summary.Value(tag="tone", audio=clip)]))
        write_events(logdir / run / event_file_name(W0), events)
        with SummaryWriter(str(logdir / run), flush_secs=3600) as writer:
            rng = np.random.default_rng(len(run))
            for step in range(3):
                writer.add_text("notes", HOSTILE_TEXT, step, walltime=W0 + step)
                writer.add_histogram("weights", rng.normal(step, 1, 500), step, walltime=W0 + step)
            writer.add_hparams({"lr": 0.5, "note": HOSTILE_PARAM}, {"hparam/accuracy": 0.1})


@pytest.fixture(scope="module")
def store(make_store: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("viewer")
    path = build_store(base, make_store)
    write_hostile(base / "hostile")
    summary = convert(base / "hostile", path, progress=False)
    assert summary.exit_code == 0, summary.problems
    return path


@pytest.fixture(scope="module")
def base(store: str) -> Any:
    with served(store) as url:
        yield url


@pytest.fixture(scope="module")
def driver() -> Any:
    with browser() as opened:
        yield opened


def shoot(driver: Any, name: str, make_store: StoreFactory) -> None:
    folder = os.environ.get("TBCONVERT_SCREENSHOTS")
    if folder:
        screenshot(driver, Path(folder) / f"{name}-{make_store.backend}.png")


def open_view(driver: Any, url: str) -> None:
    driver.get("about:blank")  # a hash change alone would not reload the page
    driver.get(url)
    wait_ready(driver)


def run_rows(driver: Any) -> list[str]:
    """Each row's ``data-run`` in the runs table, in order."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#runs-table tbody tr')].map((r) => r.dataset.run)"
    )


def panel_tags(driver: Any) -> list[str]:
    """Each chart's ``data-tag``, in order."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#charts .panel')].map((p) => p.dataset.tag)"
    )


def panel_traces(driver: Any, tag: str) -> list[dict[str, Any]]:
    """The traces plotly drew in the panel of ``tag``: name, x, y and visibility."""
    return driver.execute_script(
        """const panel = [...document.querySelectorAll('#charts .panel')]
             .find((p) => p.dataset.tag === arguments[0]);
           return panel.querySelector('.plot').data.map((t) => ({
             name: t.name, x: t.x, y: t.y, yaxis: t.yaxis || 'y', opacity: t.opacity}));""",
        tag,
    )


def test_every_run_and_every_tag(driver: Any, base: str, store: str, make_store) -> None:
    open_view(driver, f"{base}/")
    with open_store(store) as opened:
        runs = {row["run_path"] for row in opened.runs()}
        tags = {series.tag for series in opened.series(plugin="scalars")}
    rows = run_rows(driver)
    panels = panel_tags(driver)
    assert sorted(rows) == sorted(runs)
    assert set(panels) == tags
    loss = panel_traces(driver, "loss")
    assert "sweep/lr_0.1" in {trace["name"] for trace in loss}
    shoot(driver, "overview", make_store)


def test_hostile_names_are_shown_as_text(driver: Any, base: str, make_store) -> None:
    open_view(driver, f"{base}/#filter=evil")
    assert driver.execute_script("return window.__pwned") is None
    assert driver.execute_script("return document.querySelectorAll('[onerror]').length") == 0
    row = driver.execute_script(
        """return [...document.querySelectorAll('#runs-table tbody tr')]
             .filter((r) => !r.hidden).map((r) => r.textContent)""",
    )
    assert len(row) == 1 and HOSTILE_RUN in row[0] and HOSTILE_PARAM in row[0]
    headings = driver.execute_script(
        "return [...document.querySelectorAll('#charts .panel h2')].map((h) => h.textContent)"
    )
    assert HOSTILE_TAG in headings and QUOTED_TAG in headings
    names = {trace["name"] for trace in panel_traces(driver, "loss")}
    assert any("&#60;img" in name for name in names)  # plotly reads entities, not tags
    rows = run_rows(driver)
    long = [run for run in rows if run.startswith("long/")]
    assert long == [LONG_RUN]
    shoot(driver, "hostile", make_store)


def test_the_view_is_in_the_url(driver: Any, base: str, make_store) -> None:
    open_view(driver, f"{base}/")
    driver.execute_script(
        """const set = (id, value, kind) => { const e = document.getElementById(id);
             e.value = value; e.dispatchEvent(new Event(kind)); };
           set('tag-filter', 'loss', 'input');
           set('x-axis', 'relative', 'change');
           set('smoothing', '0.6', 'change');"""
    )
    wait_ready(driver)
    box = driver.find_element(
        "css selector", '#runs-table tr[data-run="sweep/lr_0.01"] input[type=checkbox]'
    )
    box.click()
    wait_ready(driver)
    url = driver.current_url
    assert "tags=loss" in url and "x=relative" in url and "smooth=0.6" in url
    open_view(driver, url)
    assert driver.execute_script("return document.getElementById('x-axis').value") == "relative"
    assert driver.execute_script("return document.getElementById('tag-filter').value") == "loss"
    checked = driver.execute_script(
        """return Object.fromEntries([...document.querySelectorAll('#runs-table tbody tr')]
             .map((r) => [r.dataset.run, r.querySelector('input').checked]))"""
    )
    assert checked["sweep/lr_0.01"] is False and checked["sweep/lr_0.1"] is True
    names = {trace["name"] for trace in panel_traces(driver, "loss")}
    assert "sweep/lr_0.1" in names and "sweep/lr_0.01" not in names
    shoot(driver, "url-state", make_store)


def test_a_legend_click_hides_a_run(driver: Any, base: str) -> None:
    open_view(driver, f"{base}/#tags=loss")
    before = {trace["name"] for trace in panel_traces(driver, "loss")}
    assert "sweep/lr_1.0" in before
    driver.find_element("css selector", '#legend button[data-run="sweep/lr_1.0"]').click()
    wait_ready(driver)
    after = {trace["name"] for trace in panel_traces(driver, "loss")}
    assert "sweep/lr_1.0" not in after and after
    assert "hide=sweep%2Flr_1.0" in driver.current_url


def test_smoothing_is_plots(driver: Any, base: str) -> None:
    open_view(driver, f"{base}/#tags=loss")
    values = [1.0, 0.5, math.nan, 0.25, 3.0, -1.0, 0.125, math.inf, 0.0]
    sent = [value if math.isfinite(value) else None for value in values]
    for weight in (0.0, 0.3, 0.6, 0.99):
        got = driver.execute_script("return TBV.smooth(arguments[0], arguments[1])", sent, weight)
        expected = smooth(values, weight)
        for mine, theirs in zip(got, expected, strict=True):
            if math.isfinite(theirs):
                assert mine == pytest.approx(theirs, rel=1e-12)
            else:
                assert mine is None


def test_zoom_draws_the_range_whole(driver: Any, base: str, store: str, make_store) -> None:
    open_view(driver, f"{base}/#tags=Loss/train&run=group_1/run_3")
    drawn = panel_traces(driver, "Loss/train")
    with open_store(store) as opened:
        every = opened.scalars("group_1/run_3", "Loss/train")
    assert len(drawn[0]["x"]) == len(every)  # 200 points fit the chart's width
    driver.execute_script(
        """const panel = [...document.querySelectorAll('#charts .panel')]
             .find((p) => p.dataset.tag === 'Loss/train');
           Plotly.relayout(panel.querySelector('.plot'), {'xaxis.range': [40, 60]});"""
    )
    wait_until(driver, lambda d: "zoom=Loss%2Ftrain" in d.current_url)
    wait_until(
        driver,
        lambda d: d.execute_script(
            """const p = [...document.querySelectorAll('#charts .panel')]
                 .find((p) => p.dataset.tag === 'Loss/train');
               return p.dataset.state === 'drawn'
                 && p.querySelector('.plot').data[0].x.length < 100;"""
        ),
    )
    zoomed = panel_traces(driver, "Loss/train")[0]
    inside = every[(every["step"] >= 40) & (every["step"] <= 60)]
    assert zoomed["x"] == inside["step"].tolist()
    assert zoomed["y"] == pytest.approx(inside["value"].tolist())
    shoot(driver, "zoom", make_store)


def test_groups_are_mean_and_band(driver: Any, base: str, make_store) -> None:
    open_view(driver, f"{base}/#tags=loss&run=sweep/lr_0.01&run=sweep/lr_0.1&by=optimizer")
    traces = panel_traces(driver, "loss")
    named = {trace["name"] for trace in traces if trace["name"]}
    assert {"optimizer=sgd", "optimizer=adam"} <= named
    shoot(driver, "groups", make_store)


@pytest.fixture(scope="module")
def site(store: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    result = CliRunner().invoke(cli, ["publish", "--store", store, "-o", str(folder)])
    assert result.exit_code == 0, result.stderr
    assert "index.html" in result.stderr
    return folder


def test_a_published_viewer_works_offline(driver: Any, site: Path, store: str, make_store) -> None:
    page = (site / "index.html").read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page  # nothing from a CDN
    driver.set_network_conditions(
        offline=True, latency=0, download_throughput=0, upload_throughput=0
    )
    try:
        open_view(driver, f"{(site / 'index.html').as_uri()}#filter=evil")
        assert driver.execute_script("return window.__pwned") is None
        with open_store(store) as opened:
            runs = {row["run_path"] for row in opened.runs()}
            tags = {series.tag for series in opened.series(plugin="scalars")}
            every = opened.scalars("group_1/run_3", "Loss/train")
        rows = run_rows(driver)
        panels = panel_tags(driver)
        assert set(rows) == runs and set(panels) == tags
        headings = driver.execute_script(
            "return [...document.querySelectorAll('#charts .panel h2')].map((h) => h.textContent)"
        )
        assert HOSTILE_TAG in headings
        shoot(driver, "published", make_store)
        open_view(driver, f"{(site / 'index.html').as_uri()}#tags=Loss/train&run=group_1/run_3")
        (line,) = panel_traces(driver, "Loss/train")
        assert line["x"] == every["step"].tolist()
        assert line["y"] == every["value"].tolist()  # float32 digits read back exactly
        # A resumed run as its last attempt left it: 300 points, more than the coarsest level
        # keeps, so the whole line is drawn from the finer one.
        open_view(driver, f"{(site / 'index.html').as_uri()}#tags=accuracy&run=run_1")
        current = query_rows(
            store,
            "SELECT step FROM v_scalars_current WHERE run_path = 'run_1' AND tag = 'accuracy' "
            "ORDER BY step",
        )
        (line,) = panel_traces(driver, "accuracy")
        assert len(current) == 300 and line["x"] == [step for (step,) in current]
    finally:
        driver.delete_network_conditions()


def test_publish_writes_through_fsspec(store: str) -> None:
    import fsspec

    result = CliRunner().invoke(
        cli, ["publish", "--store", store, "--tag", "loss", "-o", "memory://viewer-site", "-q"]
    )
    assert result.exit_code == 0, result.stderr
    fs = fsspec.filesystem("memory")
    names = {path.rsplit("/", 1)[-1] for path in fs.find("/viewer-site")}
    assert {"index.html", "overview.js", "tag-0000.js", "plotly.min.js", "viewer.js"} <= names
    assert result.stderr == ""


def media_panels(driver: Any) -> list[dict[str, Any]]:
    return driver.execute_script(
        """return [...document.querySelectorAll('#media-panels .media-panel')].map((p) => ({
             ...p.dataset, text: p.querySelector('pre') ? p.querySelector('pre').textContent : null,
             images: [...p.querySelectorAll('img')].map((i) => [i.naturalWidth, i.naturalHeight,
               i.complete]),
             audio: [...p.querySelectorAll('audio')].map((a) => a.src),
             heatmap: !!p.querySelector('.plot .main-svg')}))"""
    )


def test_images_texts_histograms_and_audio(driver: Any, base: str, make_store) -> None:
    open_view(driver, f"{base}/#tags=samples")
    wait_until(
        driver,
        lambda d: all(
            all(image[2] for image in panel["images"]) and panel["images"]
            for panel in media_panels(d)
        ),
    )
    images = {panel["run"]: panel["images"] for panel in media_panels(driver)}
    for run in ("lr_0.01", "lr_0.1", "lr_1.0"):
        height, width, _ = sweep_pixels(run, IMAGE_STEPS[-1]).shape
        assert images[f"sweep/{run}"] == [[width, height, True]]  # the last step's image
    open_view(driver, f"{base}/#run={urllib.parse.quote(HOSTILE_RUN)}")
    assert driver.execute_script("return window.__pwned") is None
    panels = {
        panel["plugin"]: panel for panel in media_panels(driver) if panel["run"].startswith("evil")
    }
    assert panels["text"]["text"] == HOSTILE_TEXT
    assert panels["histograms"]["heatmap"]
    (source,) = panels["audio"]["audio"]
    with urllib.request.urlopen(source, timeout=10) as response:
        assert response.headers["Content-Type"] == "audio/wav"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.read(4) == b"RIFF"
    driver.execute_script("document.getElementById('media').scrollIntoView()")
    shoot(driver, "media", make_store)


def test_the_legend_stays_readable_at_50_runs(
    driver: Any, tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> None:
    root = tmp_path_factory.mktemp("fifty")
    names = [f"sweep/seed_{index:02d}_{'x' * (index % 7)}" for index in range(50)]
    for index, name in enumerate(names):
        events = [
            summary_event(step, W0 + step, [simple_value("loss", index + step)])
            for step in range(3)
        ]
        write_events(root / "logs" / name / event_file_name(W0), events)
    path = make_store(root, "fifty")
    assert convert(root / "logs", path, progress=False).exit_code == 0
    with served(path) as url:
        open_view(driver, f"{url}/")
        boxes = driver.execute_script(
            """return [...document.querySelectorAll('#legend button')].map((b) => {
                 const r = b.getBoundingClientRect();
                 return [b.dataset.run, r.left, r.top, r.width, r.height, b.scrollWidth]; })"""
        )
        assert [box[0] for box in boxes] == names
        for run, _left, _top, width, height, _inner in boxes:
            assert width >= 60 and height >= 10, run  # no entry squeezed out of sight
        placed = [(left, top, width, height) for _run, left, top, width, height, _ in boxes]
        for index, (left, top, width, height) in enumerate(placed):
            for other in placed[index + 1 :]:
                apart = (
                    left + width <= other[0] or other[0] + other[2] <= left
                    or top + height <= other[1] or other[1] + other[3] <= top
                )  # fmt: skip
                assert apart, (left, top, other)
        driver.find_element("css selector", '#legend button[data-run="sweep/seed_07_"]').click()
        wait_ready(driver)
        drawn = {trace["name"] for trace in panel_traces(driver, "loss")}
        assert len(drawn) == 49 and "sweep/seed_07_" not in drawn
        shoot(driver, "fifty-runs", make_store)
