"""``tbconvert push wandb --offline`` read back with W&B's own reader: every series equals
``v_scalars_current`` with one point per step (step, value, NaN kept, and the wall time as
its row's ``_timestamp``, float64 exact), the config equals ``v_params`` (typed), the group
is the run's, and a second push sends nothing (#48): on a store of tensorboardX runs, the
demo store and a store of ``sample_logdirs/``.

W&B keeps one point per step and steps that only grow, so what W&B holds is the store's
current points, the last written at a repeated step; what could not go is counted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from tensorboardX import SummaryWriter

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.push.wandb import push_wandb
from tests.push.conftest import ODD_TAG, W0, golden_store, write_logdir
from tests.push.wandb_readback import (
    same,
    store_current,
    store_params,
    store_times,
    wandb_runs,
)
from tests.support.snapshots import connect


def resumed_logdir(logdir: Path) -> None:
    """A run restarted from a checkpoint (a second writer from step 6, NaN in it), and a
    step logged twice within one attempt (the second one later)."""
    with SummaryWriter(str(logdir / "resumed"), flush_secs=3600, filename_suffix=".a") as w:
        for step in range(10):
            w.add_scalar("loss", 1.0 / (step + 1), step, walltime=W0 + step)
            w.add_scalars("acc", {"train": step / 10, "val": step / 20}, step, walltime=W0 + step)
        w.add_scalar("twice", 1.0, 4, walltime=W0 + 20)
        w.add_scalar("twice", 2.0, 4, walltime=W0 + 21)
    with SummaryWriter(str(logdir / "resumed"), flush_secs=3600, filename_suffix=".b") as w:
        for step in range(6, 14):
            value = math.nan if step == 8 else 10.0 + step
            w.add_scalar("loss", value, step, walltime=W0 + 100 + step)


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    write_logdir(tmp_path / "logs", runs=2, steps=12)
    resumed_logdir(tmp_path / "logs")
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    return store


def assert_exact(store: Path, out: Path) -> None:
    """What W&B's reader finds under ``out`` is what the store says should be there."""
    runs = wandb_runs(out)
    expected = store_current(store)
    times = store_times(store)
    assert sorted(runs) == sorted(expected)
    params = store_params(store)
    with connect(store) as conn:
        groups = dict(conn.execute("SELECT run_path, group_path FROM v_runs").fetchall())
    for run_path, series in expected.items():
        run = runs[run_path]
        assert set(run.scalars) == set(series), run_path
        for key, points in series.items():
            assert same(run.scalars[key], points), (run_path, key)
            assert run.times[key] == times[run_path][key], (run_path, key)  # float64, exact
        assert run.group == (groups[run_path] or ""), run_path
        config = {k: v for k, v in run.config.items() if k != "_wandb"}
        assert config == params.get(run_path, {}), run_path
        assert run.rows == sorted(set(run.rows)), run_path  # W&B's rows only grow


def test_every_series_equals_the_current_points_and_a_second_push_sends_nothing(
    converted: Path, tmp_path: Path
) -> None:
    out = tmp_path / "wandb-out"
    summary = push_wandb(converted, "tb", offline=out)
    assert_exact(converted, out)
    expected = store_current(converted)
    assert summary.metrics == sum(len(p) for by in expected.values() for p in by.values())
    with connect(converted) as conn:
        (points,) = conn.execute("SELECT count(*) FROM scalars").fetchone()
    assert summary.not_sent == points - summary.metrics > 0
    runs = wandb_runs(out)
    # The resumed run: its last attempt, NaN kept, and the later of a step written twice.
    loss = runs["resumed"].scalars[("", "loss")]
    assert [step for step, _ in loss] == list(range(14))
    assert math.isnan(dict(loss)[8]) and dict(loss)[5] == pytest.approx(1 / 6)
    assert runs["resumed"].scalars[("", "twice")] == [(4, 2.0)]
    assert ("", ODD_TAG) in runs["protos"].scalars
    # Images, texts (tables) and histograms, one per step.
    media = runs["run_0"].media
    assert media[("", "sample")] == [(0, "images/separated")]
    assert media[("", "note/text_summary")] == [(2, "table-file")]
    assert media[("", "w")] == [(5, "histogram")]

    again = push_wandb(converted, "tb", offline=out)
    assert again.metrics == 0 and sum(run.artifacts for run in again.runs) == 0
    assert {run.directories for run in wandb_runs(out).values()} == {1}  # no run opened


def test_new_points_resume_the_run(converted: Path, tmp_path: Path) -> None:
    out = tmp_path / "wandb-out"
    first = push_wandb(converted, "tb", offline=out)
    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "run_0"), flush_secs=3600, filename_suffix=".more") as w:
        for step in range(12, 15):
            w.add_scalar("loss", step * 0.25, step, walltime=W0 + 500 + step)
    with SummaryWriter(str(logdir / "run_9"), flush_secs=3600) as w:
        w.add_scalar("loss", 0.5, 0, walltime=W0)
    assert convert(logdir, converted, progress=False).exit_code == 0
    second = push_wandb(converted, "tb", offline=out)
    assert second.metrics == 3 + 1
    assert [r.run_path for r in second.runs if r.created] == ["run_9"]
    ids = {r.run_path: r.remote_id for r in first.runs}
    assert all(ids[r.run_path] == r.remote_id for r in second.runs if r.run_path in ids)
    assert_exact(converted, out)
    assert wandb_runs(out)["run_0"].directories == 2  # one W&B run, resumed


def test_the_demo_store(tmp_path: Path) -> None:
    store = golden_store("demo", tmp_path)
    summary = push_wandb(store, "demo", offline=tmp_path / "out")
    assert summary.not_sent == 0 and summary.metrics > 0
    assert_exact(store, tmp_path / "out")
    assert store_params(store)  # the demo's runs log hparams: their config is checked
    assert push_wandb(store, "demo", offline=tmp_path / "out").metrics == 0


@pytest.mark.slow
def test_the_sample_logdirs(tmp_path: Path) -> None:
    store = golden_store("samples", tmp_path)
    summary = push_wandb(store, "samples", offline=tmp_path / "out")
    expected = store_current(store)
    assert summary.metrics == sum(len(p) for by in expected.values() for p in by.values())
    assert_exact(store, tmp_path / "out")
    assert push_wandb(store, "samples", offline=tmp_path / "out").metrics == 0


def test_selection_dry_run_and_json(converted: Path, tmp_path: Path) -> None:
    out = tmp_path / "wandb-out"
    args = ["push", "wandb", "--store", str(converted), "--project", "tb", "--offline", str(out)]
    planned = CliRunner().invoke(
        cli, [*args, "--run", "run_*", "--tag", "loss", "--dry-run", "--json"]
    )
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["dry_run"] and not out.exists()
    result = CliRunner().invoke(cli, [*args, "--run", "run_*", "--tag", "loss", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["metrics"] == plan["metrics"] == 2 * 4  # steps 0-3: the restart at 3
    assert document["not_sent"] == plan["not_sent"] == 2 * 9
    assert "could not go" in result.stderr and "last attempt" in result.stderr
    runs = wandb_runs(out)
    assert sorted(runs) == ["run_0", "run_1"]
    assert {key for run in runs.values() for key in run.scalars} == {("", "loss")}


def test_an_empty_project_is_a_usage_error(converted: Path) -> None:
    result = CliRunner().invoke(cli, ["push", "wandb", "--store", str(converted), "--project", ""])
    assert result.exit_code == 2, result.output
