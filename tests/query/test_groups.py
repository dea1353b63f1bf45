"""Scalars aggregated over the runs of each group (``--group-by``, ``--aggregate-over``),
checked against NumPy on the points that were logged."""

from __future__ import annotations

import csv
import io
import itertools
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tests.support.snapshots import StoreFactory

CONFIGS = list(itertools.product([0.1, 0.01], ["sgd", "adam"]))
SEEDS = range(3)
NAN_AT = ("lr0.01_adam_seed1", "loss", 4)


def run_name(lr: float, opt: str, seed: int) -> str:
    return f"lr{lr}_{opt}_seed{seed}"


def logged(lr: float, opt: str, seed: int) -> dict[str, dict[int, float]]:
    """What each run logs: loss at every step up to an uneven end, eval at uneven steps."""
    rng = random.Random(f"{lr}{opt}{seed}")
    name = run_name(lr, opt, seed)
    loss = {step: rng.uniform(0, 2) / (step + 1) for step in range(8 + 2 * seed)}
    if name == NAN_AT[0]:
        loss[NAN_AT[2]] = math.nan
    accuracy = {step: rng.uniform(0, 1) for step in range(0, 12, 2 + seed)}
    return {"loss": loss, "accuracy": accuracy}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("groups")
    logdir = root / "sweep"
    for (lr, opt), seed in itertools.product(CONFIGS, SEEDS):
        with SummaryWriter(str(logdir / run_name(lr, opt, seed)), flush_secs=3600) as writer:
            for tag, points in logged(lr, opt, seed).items():
                for step, value in points.items():
                    writer.add_scalar(tag, value, step, walltime=1e9 + step)
            writer.add_hparams({"lr": lr, "opt": opt, "seed": seed}, {})
    store = make_store(root)
    convert(logdir, store, progress=False)
    return store


def expected(tag: str) -> dict[tuple[float, str, int], tuple[Any, ...]]:
    """(lr, opt, step) -> runs, nan, mean, std, min, max, from NumPy over the logged points
    (float32, as add_scalar writes them)."""
    found = {}
    for lr, opt in CONFIGS:
        by_step: dict[int, list[float]] = {}
        for seed in SEEDS:
            for step, value in logged(lr, opt, seed)[tag].items():
                by_step.setdefault(step, []).append(float(np.float32(value)))
        for step, values in by_step.items():
            array = np.array(values)
            kept = array[~np.isnan(array)]
            std = float(kept.std(ddof=1)) if len(kept) > 1 else None
            stats = (float(kept.mean()), std, float(kept.min()), float(kept.max()))
            found[(lr, opt, step)] = (len(kept), len(array) - len(kept), *stats)
    return found


def cell(text: str) -> float | None:
    return None if text == "" else float(text)


def export_csv(store: str, *args: str) -> list[dict[str, str]]:
    result = CliRunner().invoke(cli, ["export", "scalars", "--store", store, *args])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.stdout)))


@pytest.mark.parametrize("tag", ["loss", "accuracy"])
def test_aggregate_over_seed_gives_numpy_s_statistics_at_every_step(sweep: str, tag: str) -> None:
    rows = export_csv(sweep, "--tag", tag, "--aggregate-over", "seed")
    assert list(rows[0]) == [
        "lr", "opt", "context", "tag", "step", "runs", "nan", "mean", "std", "min", "max",
    ]  # fmt: skip
    got = {
        (float(row["lr"]), row["opt"], int(row["step"])): (
            int(row["runs"]),
            int(row["nan"]),
            *(cell(row[name]) for name in ("mean", "std", "min", "max")),
        )
        for row in rows
    }
    want = expected(tag)
    assert set(got) == set(want)
    for key, (runs, nans, *stats) in want.items():
        assert got[key][:2] == (runs, nans), key
        for found, wanted in zip(got[key][2:], stats, strict=True):
            assert found == wanted if wanted is None else found == pytest.approx(wanted), key
    # Steps are exact: a step only the longest run logged aggregates that run alone.
    if tag == "loss":
        assert got[(0.1, "sgd", 11)][0] == 1 and got[(0.1, "sgd", 11)][3] is None


def test_a_run_regex_groups_as_the_hyper_parameters_do(sweep: str) -> None:
    by_regex = export_csv(sweep, "--tag", "loss", "--group-by", r"run:(.*)_seed\d+")
    by_params = export_csv(sweep, "--tag", "loss", "--aggregate-over", "seed")
    assert len(by_regex) == len(by_params)
    pick = ("step", "runs", "nan", "mean", "std", "min", "max")
    assert sorted(tuple(row[name] for name in pick) for row in by_regex) == sorted(
        tuple(row[name] for name in pick) for row in by_params
    )
    assert {row[r"run:(.*)_seed\d+"] for row in by_regex} == {
        f"lr{lr}_{opt}" for lr, opt in CONFIGS
    }


def test_group_by_one_key_and_the_python_api(sweep: str) -> None:
    with open_store(sweep) as store:
        rows = store.scalars_grouped(group_by=["opt"], tag="loss")
    assert {row["opt"] for row in rows} == {"sgd", "adam"}
    first = next(row for row in rows if row["opt"] == "sgd" and row["step"] == 0)
    values = [
        float(np.float32(logged(lr, "sgd", seed)["loss"][0]))
        for lr, _ in CONFIGS[::2]
        for seed in SEEDS
    ]
    assert first["runs"] == 6 and first["mean"] == pytest.approx(np.mean(values), rel=1e-12)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["params", "--group-by", "lr"], "--group-by and --aggregate-over are for scalars"),
        (["scalars", "--group-by", "run:("], "'run:(' is not a regular expression"),
        (["scalars", "--group-by", "run:no_group"], "'run:no_group' has no capture group"),
        (["scalars", "--group-by", "lr", "--wide"], "--wide and --group-by do not go together"),
    ],
)
def test_grouping_usage_errors_exit_2(sweep: str, args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, ["export", *args, "--store", sweep])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: {said}")


def test_nan_is_nan_in_csv_and_a_step_not_logged_is_empty(sweep: str, tmp_path: Path) -> None:
    """Long format: a logged NaN is ``NaN`` (a JSON null); ``--wide``: a step a series did
    not log is an empty cell, and a key left out of JSON."""
    run = NAN_AT[0]
    long = export_csv(sweep, "--run", run, "--tag", "loss")
    assert len(long) == 10
    assert [row["value"] == "NaN" for row in long] == [
        step == NAN_AT[2] for step in range(len(long))
    ]
    wide = export_csv(sweep, "--run", "lr0.01_adam_seed*", "--tag", "loss", "--wide")
    column = f"{run}//loss"
    assert wide[NAN_AT[2]][column] == "NaN"
    longest = "lr0.01_adam_seed2//loss"
    assert [row[column] == "" for row in wide] == [
        step >= 8 + 2 * 1 for step in range(8 + 2 * 2)
    ] and all(row[longest] != "" for row in wide)
    target = tmp_path / "wide.jsonl"
    result = CliRunner().invoke(
        cli,
        ["export", "scalars", "--store", sweep, "--run", "lr0.01_adam_seed*", "--tag",
         "loss", "--wide", "-o", str(target)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    import json

    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[NAN_AT[2]][column] is None
    assert column not in lines[-1] and longest in lines[-1]
