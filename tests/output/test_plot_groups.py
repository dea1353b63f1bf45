"""``tbconvert plot`` with many runs: one line per group with a band, and legends, colours
and warnings that keep a plot of many lines readable."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tbconvert.output import plot as library
from tbconvert.query.aggregation import aggregate, t975
from tbconvert.query.groups import Grouping

pytest.importorskip("matplotlib")


def test_a_group_s_steps_are_exact_and_a_step_logged_twice_counts_its_last_value() -> None:
    statistics = aggregate([([0, 10, 20], [0.0, 1.0, 2.0]), ([5, 15, 15], [9.0, 3.0, 4.0])])
    assert statistics.steps == [0, 5, 10, 15, 20]
    # Nothing is interpolated: at each step, only the run that logged it counts.
    assert statistics.runs == [1, 1, 1, 1, 1] and statistics.nan == [0] * 5
    assert statistics.mean == [0.0, 9.0, 1.0, 4.0, 2.0]
    assert all(math.isnan(std) for std in statistics.std)  # one value: no sample deviation


@pytest.mark.parametrize("kind", ["std", "sem", "ci95", "minmax", "none"])
def test_the_band_is_numpy_s_over_the_runs_at_each_step(kind: str) -> None:
    runs = [([0, 1, 2], [1.0, 2.0, 3.0]), ([0, 1, 2], [2.0, 2.5, math.nan]), ([0, 1], [4.0, 0.5])]
    statistics = aggregate(runs)
    low, high = statistics.band(kind, statistics.mean)
    at0 = np.array([1.0, 2.0, 4.0])
    mean, std = at0.mean(), at0.std(ddof=1)
    half = {
        "std": std,
        "sem": std / math.sqrt(3),
        "ci95": 4.303 * std / math.sqrt(3),  # Student's t, 2 degrees of freedom
        "none": 0.0,
    }
    assert statistics.steps == [0, 1, 2] and statistics.runs == [3, 3, 1]
    assert statistics.mean[0] == pytest.approx(mean)
    if kind == "minmax":
        assert (low[0], high[0]) == (1.0, 4.0)
    else:
        assert low[0] == pytest.approx(mean - half[kind])
        assert high[0] == pytest.approx(mean + half[kind])
    # One run at step 2 (the other's NaN left out): the line is its value.
    assert statistics.mean[2] == 3.0 and statistics.nan == [0, 0, 1]
    assert statistics.median[0] == 2.0


def test_t_quantiles() -> None:
    assert t975(1) == 12.706 and t975(10) == 2.228 and t975(30) == 2.042
    assert t975(100) == pytest.approx(1.984, abs=0.002) and math.isnan(t975(0))


def test_twenty_lines_have_twenty_colours_then_other_line_styles() -> None:
    styles = [library.palette(index) for index in range(24)]
    colours = [colour for colour, _ in styles]
    assert len(set(colours[:20])) == 20 and {style for _, style in styles[:20]} == {"-"}
    assert colours[20] == colours[0] and styles[20][1] == "--"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("plot_groups")
    for (lr, opt), seed in itertools.product(
        itertools.product([0.1, 0.01, 0.003], ["sgd", "adam"]), range(4)
    ):
        with SummaryWriter(str(root / "logs" / f"lr{lr}_{opt}_seed{seed}"), flush_secs=3600) as w:
            for step in range(0, 100 + 20 * seed, 10):
                w.add_scalar("loss", lr + seed / 100 + 1 / (step + 1), step, walltime=1e9 + step)
            w.add_hparams({"lr": lr, "opt": opt, "seed": seed}, {})
    store = str(root / "s.db")
    convert(root / "logs", store, progress=False)
    return store


def test_aggregate_over_seed_draws_one_line_with_a_band_per_configuration(
    sweep: str, tmp_path: Path
) -> None:
    output = tmp_path / "over_seeds.png"
    result = CliRunner().invoke(
        cli,
        ["plot", "--store", sweep, "--tag", "loss", "--aggregate-over", "seed", "--band", "ci95",
         "-o", str(output)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "6 curves drawn" in result.stderr and "warning" not in result.stderr
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plot_of_24_runs_keeps_every_legend_entry_in_the_figure_and_says_to_group(
    sweep: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        cli, ["plot", "--store", sweep, "--tag", "loss", "-o", str(tmp_path / "all.png")]
    )
    assert result.exit_code == 0, result.output
    assert "warning: 24 lines in one panel are more than a person can tell apart" in result.stderr
    from matplotlib.figure import Figure

    with open_store(sweep) as store:
        curves = library.select_curves(store, tag="loss")
    lines = [library.PlotLine(c.tag, c.label, c.steps, c.values, None) for c in curves]
    figure = library._draw(Figure, lines, "step", 0.0, False)
    figure.canvas.draw()
    (legend,) = figure.legends
    assert len(legend.get_texts()) == 24
    box, frame = legend.get_window_extent(), figure.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def test_the_report_draws_the_same_groups_with_their_bands(sweep: str, tmp_path: Path) -> None:
    page = tmp_path / "over_seeds.html"
    result = CliRunner().invoke(
        cli, ["report", "--store", sweep, "--aggregate-over", "seed", "-o", str(page)]
    )
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    charts = text.split('<section id="scalars">', 1)[1].split("</section>", 1)[0]
    assert "Scalars, by group" in charts and charts.count("<polygon") == 6
    # Labels name what tells the groups apart (seed is aggregated over, nothing else is fixed).
    for lr, opt in itertools.product([0.1, 0.01, 0.003], ["sgd", "adam"]):
        assert f"lr={lr}, opt={opt} (4 runs)" in charts


def test_a_group_of_one_run_is_labelled_in_the_singular(sweep: str) -> None:
    with open_store(sweep) as store:
        curves = library.select_curves(store, tag="loss")
        one_group_a_run = Grouping(by=("run:(.*)",))
        lines = library.grouped_lines(store, curves, one_group_a_run, None, 0.0, "mean", "std")
    assert lines and all(line.label.endswith(" (1 run)") for line in lines)
