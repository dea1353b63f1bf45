"""``tbconvert show``: a sparkline per scalar series, from the start of equal step ranges."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from tbconvert.cli import cli
from tbconvert.cli.render import sparkline
from tests.support.snapshots import StoreFactory
from tests.support.sweep import build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("sparkline"), make_store)


def test_levels_gaps_and_flat_series() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([7, None, 0, math.nan, math.inf]) == "█ ▁  "
    assert sparkline([3.0, 3.0]) == "▄▄"
    assert sparkline([None, None]) == "  " and sparkline([]) == ""


def test_show_draws_the_loss_that_went_nan(store_path: str) -> None:
    result = CliRunner().invoke(cli, ["show", "sweep/lr_1.0", "--store", store_path])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.strip().startswith("context") and "trend" in line)
    loss = next(line for line in lines if " loss " in line)
    # Ten steps, one bucket each: 1/(1+step) for steps 0..5 (highest to lowest), NaN after.
    # Levels (v - 1/6) / (1 - 1/6) * 7, rounded: 7, 2.8, 1.4, 0.7, 0.28, 0.
    assert loss[header.index("trend") :] == "█▄▂▂▁▁"  # the NaN steps are trailing spaces


def test_show_json_has_the_trend(store_path: str) -> None:
    result = CliRunner().invoke(cli, ["show", "sweep/lr_1.0", "--store", store_path, "--json"])
    series = {s["tag"]: s for s in json.loads(result.stdout)["series"]}
    trend = series["loss"]["trend"]
    assert len(trend) == 10 and trend[6:] == [None] * 4
    assert trend[:6] == pytest.approx([1 / (1 + step) for step in range(6)], rel=1e-6)
    assert "trend" not in series["notes/text_summary"]


def test_long_series_become_24_buckets(store_path: str) -> None:
    result = CliRunner().invoke(cli, ["show", "run_1", "--store", store_path, "--json"])
    series = {s["tag"]: s for s in json.loads(result.stdout)["series"]}
    trend = series["loss"]["trend"]  # steps 0..299: buckets of 13 steps
    assert len(trend) == 24 and all(value is not None for value in trend)
    assert trend[0] > trend[-1]  # a decaying loss
