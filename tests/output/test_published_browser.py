"""``tbconvert publish``'s bundle in a real browser, opened from ``file://`` with the network
off, on SQLite and PostgreSQL stores: groups (against ``export scalars --group-by``), images,
texts, histograms and audio (against what was logged), x by relative and wall time (against
the store), and what ``--max-size`` leaves out, said in the summary and on the page.

The screenshots go to ``TBCONVERT_SCREENSHOTS`` (a directory) when set.
"""

from __future__ import annotations

import csv
import io
import math
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from tbconvert import convert
from tbconvert.cli import cli
from tests.output.test_viewer_browser import (
    HOSTILE_RUN,
    HOSTILE_TEXT,
    media_panels,
    open_view,
    panel_traces,
    shoot,
    write_hostile,
)
from tests.support.eventfiles import wav_clip
from tests.support.snapshots import StoreFactory, query_rows
from tests.support.sweep import IMAGE_STEPS, build_store, sweep_pixels
from tests.support.viewer_browser import browser, wait_until

SWEEP_RUNS = ["sweep/lr_0.01", "sweep/lr_0.1", "sweep/lr_1.0"]


@pytest.fixture(scope="module")
def store(make_store: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("published")
    path = build_store(base, make_store)
    write_hostile(base / "hostile")
    assert convert(base / "hostile", path, progress=False).exit_code == 0
    return path


def publish(store: str, folder: Path, *options: str) -> Any:
    result = CliRunner().invoke(cli, ["publish", "--store", store, "-o", str(folder), *options])
    assert result.exit_code == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def site(store: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    publish(store, folder, "--group-by", "optimizer")
    return folder


@pytest.fixture(scope="module")
def driver() -> Any:
    with browser() as opened:
        opened.set_network_conditions(
            offline=True, latency=0, download_throughput=0, upload_throughput=0
        )
        yield opened


def page(site: Path, view: str) -> str:
    return f"{(site / 'index.html').as_uri()}#{view}"


def exported_groups(store: str) -> dict[tuple[str, int], dict[str, float | None]]:
    """``export scalars --group-by optimizer`` of the sweep's loss: (group, step) -> cells."""
    result = CliRunner().invoke(
        cli,
        [
            *("export", "scalars", "--store", store, "--run", "sweep/*"),
            *("--tag", "loss", "--group-by", "optimizer"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    found = {}
    for row in csv.DictReader(io.StringIO(result.stdout)):
        cells = {
            key: float(row[key]) if row[key] else None for key in ("mean", "std", "min", "max")
        }
        found[(f"optimizer={row['optimizer']}", int(row["step"]))] = {**cells, "runs": row["runs"]}
    return found


def group_traces(driver: Any) -> dict[str, tuple[list[int], list[Any], list[Any], list[Any]]]:
    """Each group of the loss chart: its steps, mean, band's low and high edges (drawn as
    three traces: low, high, then the named mean)."""
    traces = panel_traces(driver, "loss")
    found = {}
    for index in range(0, len(traces), 3):
        low, high, mean = traces[index : index + 3]
        found[mean["name"]] = (mean["x"], mean["y"], low["y"], high["y"])
    return found


def close(mine: Any, theirs: float | None) -> bool:
    if theirs is None or not math.isfinite(theirs):
        return mine is None
    return mine is not None and mine == pytest.approx(theirs, rel=1e-12, abs=1e-15)


def test_groups_equal_the_export_at_every_step(
    driver: Any, site: Path, store: str, make_store
) -> None:
    expected = exported_groups(store)
    runs = "&".join(f"run={urllib.parse.quote(run)}" for run in SWEEP_RUNS)
    for band in ("std", "minmax", "sem"):
        open_view(driver, page(site, f"tags=loss&{runs}&by=optimizer&band={band}"))
        groups = group_traces(driver)
        assert set(groups) == {"optimizer=adam", "optimizer=sgd"}
        for name, (steps, mean, low, high) in groups.items():
            exported = {step: cells for (group, step), cells in expected.items() if group == name}
            assert steps == sorted(exported)
            for step, mine, lower, upper in zip(steps, mean, low, high, strict=True):
                cells = exported[step]
                assert close(mine, cells["mean"])
                if band == "minmax":
                    edges = (cells["min"], cells["max"])
                else:
                    half = cells["std"]
                    if band == "sem" and half is not None:
                        half = half / math.sqrt(float(cells["runs"]))
                    both = cells["mean"] is not None and half is not None
                    edges = (cells["mean"] - half, cells["mean"] + half) if both else (None, None)
                assert close(lower, edges[0]) and close(upper, edges[1]), (name, step, band)
        if band == "std":
            shoot(driver, "published-groups", make_store)


def test_groups_follow_the_shown_runs_and_refuse_another_grouping(driver: Any, site: Path) -> None:
    open_view(driver, page(site, "tags=loss&run=sweep%2Flr_0.01&by=optimizer"))
    assert set(group_traces(driver)) == {"optimizer=sgd"}
    driver.get("about:blank")
    driver.get(page(site, "tags=loss&by=lr"))
    wait_until(driver, lambda d: d.execute_script("return document.body.dataset.ready") == "error")
    message = driver.execute_script("return document.getElementById('message').textContent")
    assert "groups by optimizer only" in message


def test_images_texts_histograms_and_audio_offline(
    driver: Any, site: Path, store: str, make_store
) -> None:
    open_view(driver, page(site, "tags=samples"))
    wait_until(
        driver,
        lambda d: all(
            panel["images"] and all(i[2] for i in panel["images"]) for panel in media_panels(d)
        ),
    )
    images = {panel["run"]: panel["images"] for panel in media_panels(driver)}
    for run in SWEEP_RUNS:
        height, width, _ = sweep_pixels(run.split("/")[1], IMAGE_STEPS[-1]).shape
        assert images[run] == [[width, height, True]]  # the last step's image
    # The files beside the page are the logged images, byte for byte and pixel for pixel.
    stored = query_rows(
        store,
        "SELECT i.blob_id, r.run_path, i.step, b.data FROM images AS i "
        "JOIN series AS s ON s.id = i.series_id JOIN runs AS r ON r.id = s.run_id "
        "JOIN blobs AS b ON b.id = i.blob_id WHERE r.run_path LIKE 'sweep/%'",
    )
    assert len(stored) == len(SWEEP_RUNS) * len(IMAGE_STEPS)
    for blob_id, run, step, data in stored:
        written = (site / "media" / f"{blob_id}.png").read_bytes()
        assert written == bytes(data)
        pixels = np.asarray(Image.open(io.BytesIO(written)).convert("RGB"))
        assert np.array_equal(pixels, sweep_pixels(run.split("/")[1], step))
    driver.execute_script("document.getElementById('media').scrollIntoView()")
    shoot(driver, "published-images", make_store)
    open_view(driver, page(site, f"run={urllib.parse.quote(HOSTILE_RUN)}"))
    assert driver.execute_script("return window.__pwned") is None
    assert driver.execute_script("return document.querySelectorAll('[onerror]').length") == 0
    panels = {panel["plugin"]: panel for panel in media_panels(driver)}
    assert set(panels) == {"text", "histograms", "audio"}
    assert panels["text"]["text"] == HOSTILE_TEXT
    assert panels["histograms"]["heatmap"]
    (source,) = panels["audio"]["audio"]
    assert source.startswith("file://") and source.endswith(".wav")
    assert Path(urllib.parse.unquote(urllib.parse.urlparse(source).path)).read_bytes() == wav_clip()
    counts = driver.execute_script(
        """const panel = [...document.querySelectorAll('#media-panels .media-panel')]
             .find((p) => p.dataset.plugin === 'histograms');
           const z = panel.querySelector('.plot').data[0].z;
           return z.reduce((a, b) => a + b, 0);"""
    )
    assert counts == 3 * 500  # three steps of 500 values each
    driver.execute_script("document.getElementById('media').scrollIntoView()")
    shoot(driver, "published-media", make_store)


def time_lines(driver: Any, tag: str) -> list[list[float]]:
    """The x of each line of ``tag``'s chart, dates as seconds."""
    return driver.execute_script(
        """const panel = [...document.querySelectorAll('#charts .panel')]
             .find((p) => p.dataset.tag === arguments[0]);
           return panel.querySelector('.plot').data.filter((t) => t.yaxis !== 'y2').map((t) =>
             t.x.map((x) => x instanceof Date ? x.getTime() / 1000 : x));""",
        tag,
    )


def test_x_by_relative_and_wall_time(driver: Any, site: Path, store: str, make_store) -> None:
    rows = query_rows(
        store,
        "SELECT wall_time FROM v_scalars_current WHERE run_path = 'group_1/run_3' "
        "AND tag = 'Loss/train' ORDER BY step",
    )
    walls = [wall for (wall,) in rows]
    view = "tags=Loss/train&run=group_1%2Frun_3"
    open_view(driver, page(site, f"{view}&x=wall"))
    (drawn,) = time_lines(driver, "Loss/train")
    assert drawn == pytest.approx(walls, abs=1e-3)  # Dates hold milliseconds
    open_view(driver, page(site, f"{view}&x=relative"))
    (drawn,) = time_lines(driver, "Loss/train")
    assert drawn == pytest.approx([wall - walls[0] for wall in walls], abs=1e-3)
    shoot(driver, "published-relative", make_store)
    # A zoom on relative time keeps the points inside and one past each end.
    open_view(driver, page(site, f"{view}&x=relative&zoom=Loss%2Ftrain~10,20"))
    (drawn,) = time_lines(driver, "Loss/train")
    relative = [wall - walls[0] for wall in walls]
    inside = [i for i, at in enumerate(relative) if 10 <= at <= 20]
    expected = relative[inside[0] - 1 : inside[-1] + 2]
    assert drawn == pytest.approx(expected, abs=1e-3)


def test_max_size_leaves_out_and_says_so(
    driver: Any, store: str, tmp_path: Path, make_store
) -> None:
    result = publish(store, tmp_path, "--group-by", "optimizer", "--max-size", "0")
    assert "left out to stay within --max-size" in result.stderr
    media_count = len(
        query_rows(
            store, "SELECT id FROM series WHERE plugin IN ('images', 'audio', 'text', 'histograms')"
        )
    )
    assert f"{media_count} media series" in result.stderr
    assert not (tmp_path / "media").exists()
    open_view(driver, page(tmp_path, "tags=loss"))
    note = driver.execute_script("return document.getElementById('bundle-note').textContent")
    assert f"{media_count} media series" in note and "tags' groups" in note
    assert driver.execute_script("return document.getElementById('media').hidden")
    traces = panel_traces(driver, "loss")
    assert traces  # the lines' coarsest level is always in
    shoot(driver, "published-left-out", make_store)
