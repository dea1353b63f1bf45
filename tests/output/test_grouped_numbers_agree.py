"""``plot --group-by``, ``export scalars --aggregate-over`` and ``report --aggregate-over`` give
the same numbers at every step, and they are pandas' over the store's views (SPEC §2: steps
exact, NaN points left out and counted; SPEC §12: the viewer's groups are the export's).

The sweep has what makes groups disagree when two rules are at work: runs that skip steps and
end at different steps, a NaN, a step whose only value is NaN, a tag in two contexts, and a
run resumed from a checkpoint after its first attempt went past the step it went back to.
The plot's numbers are read from the function that makes its lines, the report's from the one
that makes its charts; neither is parsed out of an image or a page.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tbconvert.output import plot, report
from tbconvert.query.groups import Grouping
from tests.support.snapshots import StoreFactory, query_rows

pandas = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

RATES = (0.1, 0.01)
SEEDS = range(3)
RESUMED_RUN = "lr0.01_seed0"  # steps 0..11, then again from step 6 to 9
NAN_RUN, NAN_STEP = "lr0.1_seed1", 4
ALONE = "lr0.1_seed2"  # the longest run: its last step is NaN, the group's only value there
OVER_SEED = Grouping(over=("seed",))
# (lr, context, tag) -> step -> (runs, nan, mean, std, min, max, median), None where undefined.
Numbers = dict[tuple[float, str, str], dict[int, tuple[Any, ...]]]


def loss_steps(seed: int) -> list[int]:
    """Seed 1 skips every third step; the runs end at different steps."""
    return [step for step in range(12 + 2 * seed) if seed != 1 or step % 3 != 2]


def write_sweep(logdir: Path) -> None:
    from tensorboardX import SummaryWriter

    for lr, seed in itertools.product(RATES, SEEDS):
        name = f"lr{lr}_seed{seed}"
        rng = random.Random(name)
        with SummaryWriter(str(logdir / name), flush_secs=3600) as writer:
            steps = loss_steps(seed)
            for step in steps:
                value = rng.uniform(0, 2) / (step + 1)
                if (name, step) == (NAN_RUN, NAN_STEP) or (name == ALONE and step == steps[-1]):
                    value = math.nan
                writer.add_scalar("loss", value, step, walltime=1e9 + step)
            for step in range(0, 12, 2 + seed):
                values = {"train": rng.uniform(0, 1), "val": rng.uniform(0, 1)}
                writer.add_scalars("accuracy", values, step, walltime=1e9 + step)
            writer.add_hparams({"lr": lr, "seed": seed}, {})
    # The resumed run starts again from its checkpoint at step 6: a second writer, later.
    with SummaryWriter(str(logdir / RESUMED_RUN), filename_suffix=".b", flush_secs=3600) as w:
        for step in range(6, 10):
            w.add_scalar("loss", 5.0 + step / 10, step, walltime=1e9 + 100 + step)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    root = tmp_path_factory.mktemp("agree")
    write_sweep(root / "logs")
    store = make_store(root)
    convert(root / "logs", store, progress=False)
    return store


def oracle(store: str, view: str) -> Numbers:
    """The groups' numbers by pandas over ``view``: a run's value at a step is the last one
    written there (by wall time, later in the resumed run), then the runs of an ``lr`` are
    aggregated at each step with NaN points left out."""
    frame = pandas.DataFrame(
        query_rows(store, f"SELECT run_path, context, tag, step, wall_time, value FROM {view}"),
        columns=["run_path", "context", "tag", "step", "wall_time", "value"],
    ).astype({"value": float})
    frame = frame.sort_values("wall_time", kind="stable").drop_duplicates(
        ["run_path", "context", "tag", "step"], keep="last"
    )
    frame["lr"] = frame["run_path"].str.extract(r"^lr([0-9.]+)_seed\d+$", expand=False)
    frame = frame.dropna(subset=["lr"]).astype({"lr": float})
    found: Numbers = {}
    for (lr, context, tag, step), values in frame.groupby(["lr", "context", "tag", "step"])[
        "value"
    ]:
        kept = values.dropna()
        stats = (kept.mean(), kept.std(), kept.min(), kept.max(), kept.median())
        numbers = (len(kept), len(values) - len(kept), *(missing(value) for value in stats))
        found.setdefault((lr, context, tag), {})[int(step)] = numbers
    return found


def missing(value: Any) -> Any:
    """None for a number that is not there (an empty cell, None, NaN), else a float."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def exported(store: str, resumed_args: list[str]) -> Numbers:
    result = CliRunner().invoke(
        cli, ["export", "scalars", "--store", store, "--aggregate-over", "seed", *resumed_args]
    )
    assert result.exit_code == 0, result.output
    found: Numbers = {}
    for row in csv.DictReader(io.StringIO(result.stdout)):
        stats = [missing(row[name]) for name in ("mean", "std", "min", "max")]
        numbers = (int(row["runs"]), int(row["nan"]), *stats)
        found.setdefault((float(row["lr"]), row["context"], row["tag"]), {})[int(row["step"])] = (
            numbers
        )
    return found


def plotted(store: str, resumed: str, aggregate: str, band: str) -> Numbers:
    """What ``plot --aggregate-over seed`` draws: per line, (line, low, high) at each step."""
    with open_store(store) as opened:
        curves = plot.select_curves(opened, resumed=resumed)
        lines = plot.grouped_lines(opened, curves, OVER_SEED, None, 0.0, aggregate, band)
    found: Numbers = {}
    for line in lines:
        assert line.band is not None
        (lr,) = line.group
        points = zip(line.xs, line.values, *line.band, strict=True)
        found[(lr, line.context, line.tag)] = {
            step: tuple(missing(value) for value in values) for step, *values in points
        }
    return found


def charted(store: str, resumed: str) -> dict[tuple[str, str], dict[int, tuple[Any, ...]]]:
    """The numbers behind the report's grouped charts: (tag, label) -> step -> (line, low,
    high), read as ``report`` reads its curves."""
    with open_store(store) as opened:
        curves = plot.curves_of(opened, opened.series(plugin="scalars"), resumed)
        charts, single = report.grouped_charts(opened, curves, OVER_SEED)
    assert single == []
    return {
        (tag, line.label): {
            step: tuple(missing(value) for value in values)
            for step, *values in zip(line.xs, line.ys, *(line.band or ()), strict=True)
        }
        for tag, lines in charts.items()
        for line in lines
    }


def assert_close(got: Iterable[Any], want: Iterable[Any], where: Any) -> None:
    for found, wanted in zip(got, want, strict=True):
        assert found == wanted if wanted is None else found == pytest.approx(wanted), where


@pytest.mark.parametrize(
    ("resumed", "view"), [("current", "v_scalars_current"), ("all", "v_scalars")]
)
def test_plot_export_and_report_give_the_same_numbers_at_every_step(
    sweep: str, resumed: str, view: str
) -> None:
    # The default of every command is the current view: asked for only when it is not.
    resumed_args = [] if resumed == "current" else ["--resumed", resumed]
    want = oracle(sweep, view)
    export = exported(sweep, resumed_args)
    assert (
        set(export)
        == set(want)
        == {
            (lr, context, tag)
            for lr in RATES
            for context, tag in (
                ("", "loss"),
                ("train", "accuracy"),
                ("val", "accuracy"),
            )
        }
    )
    for key, steps in want.items():
        assert set(export[key]) == set(steps), key  # exact steps: no more, no fewer
        for step, (runs, nan, mean, std, low, high, _median) in steps.items():
            assert export[key][step][:2] == (runs, nan), (key, step)
            assert_close(export[key][step][2:], (mean, std, low, high), (key, step))

    # plot: with no smoothing, its line and band are the export's numbers, exactly.
    by_std = plotted(sweep, resumed, "mean", "std")
    by_minmax = plotted(sweep, resumed, "median", "minmax")
    assert set(by_std) == set(by_minmax) == set(export)
    for key, steps in export.items():
        assert set(by_std[key]) == set(steps), key
        for step, (_runs, _nan, mean, std, low, high) in steps.items():
            spread = (None, None) if mean is None or std is None else (mean - std, mean + std)
            assert by_std[key][step] == (mean, *spread), (key, step)
            assert by_minmax[key][step][1:] == (low, high), (key, step)
            assert_close(by_minmax[key][step][:1], want[key][step][-1:], (key, step))

    # report: the same lines and bands as plot's mean and std.
    labels = {(line_key[2], label_of(line_key)): line_key for line_key in by_std}
    charts = charted(sweep, resumed)
    assert set(charts) == set(labels)
    for chart, steps in charts.items():
        assert steps == by_std[labels[chart]], chart


def label_of(key: tuple[float, str, str]) -> str:
    lr, context, _tag = key
    return f"lr={lr} [{context}] (3 runs)" if context else f"lr={lr} (3 runs)"


def test_the_resumed_run_s_abandoned_steps_are_in_all_and_not_in_current(sweep: str) -> None:
    """The sweep does what the test above needs: in the current view the resumed run's
    steps 10 and 11 are gone, so its group has one run fewer there than with every record;
    at a step it logged twice, both count the value it wrote last."""
    current = exported(sweep, [])[(0.01, "", "loss")]
    every = exported(sweep, ["--resumed", "all"])[(0.01, "", "loss")]
    assert [current[step][0] for step in (6, 10, 11)] == [3, 2, 1]
    assert [every[step][0] for step in (6, 10, 11)] == [3, 3, 2]
    assert current[6] == every[6]
    whole = exported(sweep, [])[(0.1, "", "loss")]
    assert whole[NAN_STEP][:2] == (2, 1) and whole[max(whole)][:3] == (0, 1, None)


def test_the_viewer_s_groups_are_the_export_s_at_every_step(sweep: str) -> None:
    """``serve``'s mean and band (``output/viewer/data.groups``) against the export's rows."""
    from tbconvert.output.viewer import data

    export = exported(sweep, [])
    with open_store(sweep) as opened:
        run_ids = [row["run_id"] for row in opened.runs()]
        drawn: Numbers = {}
        for tag in ("loss", "accuracy"):
            for band in ("std", "minmax"):
                for group in data.groups(opened, tag, OVER_SEED, run_ids, band)["groups"]:
                    (lr,) = group["values"]
                    at = drawn.setdefault((lr, group["context"], tag), {})
                    for index, step in enumerate(group["steps"]):
                        edges = (group["low"][index], group["high"][index])
                        at[step] = at.get(step, (group["mean"][index],)) + edges
    assert set(drawn) == set(export)
    for key, steps in export.items():
        assert set(drawn[key]) == set(steps), key
        for step, (_runs, _nan, mean, std, low, high) in steps.items():
            spread = (None, None) if mean is None or std is None else (mean - std, mean + std)
            got = drawn[key][step]
            assert_close(got[:3], (mean, *spread), (key, step))
            assert_close(got[3:], (low, high), (key, step))
