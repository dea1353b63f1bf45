"""``tbconvert plot``: TensorBoard's smoothing worked by hand, real PNG/SVG/PDF files whose
pixels show the curves, and the errors (nothing selected, a bad extension, no matplotlib)."""

from __future__ import annotations

import math
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from PIL import Image

import tbconvert
from tbconvert.cli import cli
from tbconvert.errors import UsageError
from tbconvert.output import plot as library
from tests.support.resumed_run import TAG, write_resumed_run
from tests.support.snapshots import StoreFactory
from tests.support.sweep import build_store

# matplotlib's default colour cycle: C0, C1, C2 (what the three sweep runs are drawn in).
COLOURS = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C)]


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_store(tmp_path_factory.mktemp("plot"), StoreFactory("sqlite", None))


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_smoothing_is_tensorboards_debiased_moving_average() -> None:
    # weight 0.5: last = 0.5, 1.25, 2.125; debiased by 1 - 0.5**n = 0.5, 0.75, 0.875.
    assert library.smooth([1.0, 2.0, 3.0], 0.5) == pytest.approx([1.0, 1.25 / 0.75, 2.125 / 0.875])
    assert library.smooth([1.0, 2.0, 3.0], 0.0) == [1.0, 2.0, 3.0]
    # A NaN stays and is left out of the average: the third point sees only the first.
    smoothed = library.smooth([1.0, math.nan, 3.0], 0.5)
    assert smoothed[0] == 1.0 and math.isnan(smoothed[1])
    assert smoothed[2] == pytest.approx((0.25 + 1.5) / 0.75)
    assert library.smooth([2.0, 2.0, 2.0], 0.9) == [2.0, 2.0, 2.0]  # constant: unchanged
    with pytest.raises(UsageError):
        library.smooth([1.0], 1.5)


def colour_pixels(path: Path, colour: tuple[int, int, int]) -> int:
    pixels = np.asarray(Image.open(path).convert("RGB"), dtype=np.int16)
    return int((np.abs(pixels - np.array(colour)).max(axis=2) <= 12).sum())


def test_png_has_one_coloured_line_per_run(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "loss.png"
    result = invoke(
        "plot", "--store", store_path, "--run", "sweep/*", "--tag", "loss", "-o", str(target)
    )
    assert result.exit_code == 0, result.output
    assert "3 curves" in result.stderr and result.stdout == ""
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert Image.open(target).size[0] > 400
    assert all(colour_pixels(target, colour) > 200 for colour in COLOURS)
    one = tmp_path / "one.png"
    invoke("plot", "--store", store_path, "--run", "sweep/lr_0.1", "--tag", "loss", "-o", str(one))
    assert colour_pixels(one, COLOURS[0]) > 200 and colour_pixels(one, COLOURS[1]) < 20


@pytest.mark.parametrize(
    "options",
    [["--smooth", "0.6"], ["--log-y"], ["--x", "wall"], ["--x", "relative", "--context", ""]],
)
def test_options_draw(store_path: str, tmp_path: Path, options: list[str]) -> None:
    target = tmp_path / "p.png"
    result = invoke(
        "plot", "--store", store_path, "--run", "sweep/*", "--tag", "loss", "--tag", "accuracy",
        *options, "-o", str(target),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "6 curves" in result.stderr and target.stat().st_size > 1000


def test_svg_and_pdf(store_path: str, tmp_path: Path) -> None:
    for name in ("loss.svg", "loss.pdf"):
        result = invoke("plot", "--store", store_path, "--tag", "loss", "-o", str(tmp_path / name))
        assert result.exit_code == 0, result.output
    root = ElementTree.parse(tmp_path / "loss.svg").getroot()
    assert root.tag.endswith("svg")
    assert (tmp_path / "loss.pdf").read_bytes()[:5] == b"%PDF-"


def test_a_selection_that_matches_nothing_names_what_exists(store_path: str, tmp_path) -> None:
    result = invoke("plot", "--store", store_path, "--tag", "los", "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert "--tag los" in result.stderr and "sweep/lr_0.1" in result.stderr
    assert "loss" in result.stderr and not (tmp_path / "x.png").exists()


def test_tag_is_required_and_extension_checked(store_path: str, tmp_path: Path) -> None:
    assert invoke("plot", "--store", store_path, "-o", str(tmp_path / "x.png")).exit_code == 2
    bad = invoke("plot", "--store", store_path, "--tag", "loss", "-o", str(tmp_path / "x.gif"))
    assert bad.exit_code == 2 and "*.png" in bad.stderr


def test_without_matplotlib_one_line_names_the_extra(store_path, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = invoke("plot", "--store", store_path, "--tag", "loss", "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pip install '.[plot]'" in result.stderr


def test_resumed_all_draws_the_points_in_write_order(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    written = write_resumed_run(tmp_path / "logs" / "resumed")
    assert written == [*range(0, 101), *range(50, 151)]
    store = str(tmp_path / "s.db")
    tbconvert.convert(tmp_path / "logs", store, progress=False)
    drawn = {}
    with tbconvert.open_store(store) as opened:
        for resumed in ("all", "current"):
            curves = library.select_curves(opened, tag=TAG, resumed=resumed)
            lines = [library.PlotLine(c.tag, c.label, c.steps, c.values, None) for c in curves]
            figure = library._draw(Figure, lines, "step", 0.0, False)
            drawn[resumed] = [int(x) for x in figure.axes[0].get_lines()[0].get_xdata()]
    # The line goes back once, where the run was resumed (TensorBoard's zigzag), instead of
    # the two attempts' overlap sorted by step into a filled block.
    assert drawn["all"] == written
    assert drawn["current"] == [*range(0, 50), *range(50, 151)]
