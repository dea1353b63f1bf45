"""Hyper-parameters next to metrics that their writers logged only in contexts.

Three sweeps as their writers lay them out, each logging its metric in contexts only:
tensorboardX for real (``add_scalars('loss', {'train', 'val'})`` + ``add_hparams``), PyTorch's
layout (``<run>/loss_train/``, ``<run>/loss_val/`` sub-writers in torch's own scalar
encoding, ``add_hparams`` in ``<run>/<time.time()>/``) and a Keras / TF2-hparams trial
(``train/``, ``validation/``, the session written with tensorboard's own protos).  Every
expected value is the one the test wrote (as float32, what the writers keep), on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from tensorboard.plugins.hparams import summary_v2 as hp

import tbconvert
from tbconvert.cli import cli
from tbconvert.output.report import report
from tests.support.eventfiles import (
    event_file_name,
    summary_event,
    tf2_scalar,
    torch_new_style_scalar,
    write_events,
)
from tests.support.layouts import _hparams_session
from tests.support.snapshots import StoreFactory

STEPS = 4
WALL = 1_795_500_000.0
# run -> its hyper-parameters; "momentum" only in the last run (for --run).
PARAMS: dict[str, dict[str, Any]] = {
    "lr_0.1": {"lr": 0.1, "bs": 32},
    "lr_0.01": {"lr": 0.01, "bs": 64},
    "lr_0.001": {"lr": 0.001, "bs": 32, "momentum": 0.9},
}
CONTEXTS = {"tensorboardx": ("train", "val"), "pytorch": ("train", "val")}
CONTEXTS["keras"] = ("train", "validation")
TAG = {"tensorboardx": "loss", "pytorch": "loss", "keras": "epoch_loss"}


def logged(run: str, context: str, step: int) -> float:
    """The metric ``run`` logged in ``context`` at ``step``: its own curve per run and context."""
    lr = PARAMS[run]["lr"]
    offset = {"train": 0.0, "val": 0.25, "validation": 0.5}[context]
    return offset + 1.0 / (1.0 + 10 * lr * step + len(run))


def float32(value: float) -> float:
    return float(np.float32(value))


def write_tensorboardx(root: Path) -> None:
    from tensorboardX import SummaryWriter

    for run, params in PARAMS.items():
        with SummaryWriter(logdir=str(root / run), flush_secs=3600) as writer:
            for step in range(STEPS):
                values = {context: logged(run, context, step) for context in ("train", "val")}
                writer.add_scalars("loss", values, step, walltime=WALL + step)
            writer.add_hparams(params, {"hparam/best": 0.5})


def write_pytorch(root: Path) -> None:
    for index, (run, params) in enumerate(PARAMS.items()):
        main = [summary_event(s, WALL + s, [torch_new_style_scalar("lr", 0.1)]) for s in range(2)]
        write_events(root / run / event_file_name(WALL), main)
        for context in ("train", "val"):
            events = [
                summary_event(
                    s, WALL + s, [torch_new_style_scalar("loss", logged(run, context, s))]
                )
                for s in range(STEPS)
            ]
            write_events(root / run / f"loss_{context}" / event_file_name(WALL + 1), events)
        _hparams_session(root / run / f"{1_795_500_100 + index}.{500 + index}", params, {})


def write_keras(root: Path) -> None:
    tuning = root / "hparam_tuning"
    hparams = [hp.HParam(key) for key in ("lr", "bs", "momentum")]
    config = hp.hparams_config_pb(hparams=hparams, metrics=[hp.Metric("epoch_loss")])
    write_events(tuning / event_file_name(WALL), [summary_event(0, WALL, config.value)])
    for run, params in PARAMS.items():
        trial = tuning / run
        session = hp.hparams_pb(params, trial_id=run)
        write_events(trial / event_file_name(WALL), [summary_event(0, WALL, session.value)])
        for context in ("train", "validation"):
            events = [
                summary_event(s, WALL + s, [tf2_scalar("epoch_loss", logged(run, context, s))])
                for s in range(STEPS)
            ]
            write_events(trial / context / event_file_name(WALL + 1), events)


WRITERS = {"tensorboardx": write_tensorboardx, "pytorch": write_pytorch, "keras": write_keras}
PREFIX = {"tensorboardx": "", "pytorch": "", "keras": "hparam_tuning/"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> dict[str, str]:
    made = {}
    for layout, write in WRITERS.items():
        base = tmp_path_factory.mktemp(layout)
        write(base / "logs")
        made[layout] = make_store(base, layout)
        summary = tbconvert.convert(base / "logs", made[layout], progress=False, skip_orphans=True)
        assert summary.exit_code == 0, summary.problems
    return made


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def table(store: str, *args: str) -> list[dict[str, Any]]:
    result = invoke("hparams", "--store", store, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_each_context_is_a_column_next_to_every_runs_params(
    stores: dict[str, str], layout: str
) -> None:
    tag, contexts = TAG[layout], CONTEXTS[layout]
    rows = table(stores[layout], "--metric", tag)
    assert [row["run_path"] for row in rows] == [PREFIX[layout] + run for run in sorted(PARAMS)]
    metric_columns = [name for name in rows[0] if name.startswith(tag)]
    assert metric_columns == [f"{tag} ({context})" for context in contexts]
    for row in rows:
        run = row["run_path"].removeprefix(PREFIX[layout])
        for key in ("lr", "bs", "momentum"):
            assert row[key] == PARAMS[run].get(key), (run, key)
        for context in contexts:
            assert row[f"{tag} ({context})"] == float32(logged(run, context, STEPS - 1))


@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_context_colon_tag_chooses_one_context_and_sorts(
    stores: dict[str, str], layout: str
) -> None:
    tag, (_, other) = TAG[layout], CONTEXTS[layout]
    rows = table(stores[layout], "--metric", f"{other}:{tag}", "--sort", f"-{other}:{tag}")
    column = f"{tag} ({other})"
    assert [name for name in rows[0] if name.startswith(tag)] == [column]
    expected = {run: float32(logged(run, other, STEPS - 1)) for run in PARAMS}
    by_value = sorted(expected, key=expected.__getitem__, reverse=True)
    assert [row["run_path"] for row in rows] == [PREFIX[layout] + run for run in by_value]
    assert [row[column] for row in rows] == [expected[run] for run in by_value]
    # The column's own name sorts the same.
    named = table(stores[layout], "--metric", tag, "--sort", f"-{column}")
    assert [row["run_path"] for row in named] == [row["run_path"] for row in rows]


def test_aggregates_work_per_context(stores: dict[str, str]) -> None:
    for agg, pick in (("min", min), ("max", max), ("best", min)):
        rows = table(stores["tensorboardx"], "--metric", "loss", "--agg", agg)
        for row in rows:
            for context in ("train", "val"):
                values = [float32(logged(row["run_path"], context, s)) for s in range(STEPS)]
                assert row[f"loss ({context})"] == pick(values), (agg, row["run_path"], context)


def test_run_filter_shows_only_the_selected_runs_params(stores: dict[str, str]) -> None:
    for layout in ("tensorboardx", "keras"):
        every = table(stores[layout])
        assert "momentum" in every[0]
        chosen = table(stores[layout], "--run", f"{PREFIX[layout]}lr_0.1", "--metric", TAG[layout])
        (row,) = chosen
        assert [key for key in row if key in ("lr", "bs", "momentum")] == ["bs", "lr"]


def test_the_session_context_is_named_hparams_whatever_its_directory(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    # add_hparams' metrics go to a directory named by time.time(), here beside the same tag
    # in the run's add_scalars contexts: the column reads "hparams" for every run alike.
    from tensorboardX import SummaryWriter

    final = {"lr_0.1": 0.25, "lr_0.01": 0.125}
    for run, value in final.items():
        with SummaryWriter(logdir=str(tmp_path / "logs" / run), flush_secs=3600) as writer:
            writer.add_scalars("loss", {"train": 1.0, "val": 2.0}, 0, walltime=WALL)
            writer.add_hparams({"lr": PARAMS[run]["lr"]}, {"loss": value})
    store = make_store(tmp_path, "final")
    assert tbconvert.convert(tmp_path / "logs", store, progress=False).exit_code == 0
    rows = table(store, "--metric", "loss")
    assert [name for name in rows[0] if name.startswith("loss")] == [
        "loss (hparams)",
        "loss (train)",
        "loss (val)",
    ]
    assert {row["run_path"]: row["loss (hparams)"] for row in rows} == final
    assert all((row["loss (train)"], row["loss (val)"]) == (1.0, 2.0) for row in rows)
    chosen = table(store, "--metric", "hparams:loss", "--sort", "hparams:loss")
    assert [(row["run_path"], row["loss (hparams)"]) for row in chosen] == sorted(
        final.items(), key=lambda item: item[1]
    )


def test_unknown_context_is_a_usage_error(stores: dict[str, str]) -> None:
    result = invoke("hparams", "--store", stores["keras"], "--metric", "val:epoch_loss")
    assert result.exit_code == 2
    assert "'epoch_loss'" in result.stderr and "'val'" in result.stderr


def test_export_hparams_has_the_same_columns(stores: dict[str, str], tmp_path: Path) -> None:
    output = tmp_path / "sweep.csv"
    result = invoke(
        "export", "hparams", "--store", stores["pytorch"], "--metric", "loss", "-o", str(output)
    )
    assert result.exit_code == 0, result.output
    exported = list(csv.DictReader(io.StringIO(output.read_text(encoding="utf-8"))))
    shown = table(stores["pytorch"], "--metric", "loss")
    assert [list(row) for row in exported] == [list(row) for row in shown]
    for row, expected in zip(exported, shown, strict=True):
        assert float(row["loss (val)"]) == expected["loss (val)"]


@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_report_lines_runs_up_by_context(
    stores: dict[str, str], layout: str, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    with tbconvert.open_store(stores[layout]) as store:
        report(store, str(page), tag=TAG[layout])
    section = (
        page.read_text(encoding="utf-8").split('<section id="runs">')[1].split("</section>")[0]
    )
    head, body = section.split("<tbody>")
    header = re.findall(r"<th>(.*?)</th>", head.split("<tr>")[2])
    tag = TAG[layout]
    assert header[-2:] == [f"{tag} ({context})" for context in CONTEXTS[layout]]
    for line in body.split("<tr>")[1:]:
        cells = [re.sub("<.*?>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", line)]
        run = cells[0].removeprefix(PREFIX[layout])
        for cell, context in zip(cells[-2:], CONTEXTS[layout], strict=True):
            assert float(cell) == pytest.approx(float32(logged(run, context, STEPS - 1)), rel=1e-5)
