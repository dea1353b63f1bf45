"""``tbconvert hparams``: one row per hparams session, params and metrics as columns.

The store is the read API's (sample_logdirs plus a tensorboardX sweep whose lr, optimizer,
accuracy and loss are known in advance: ``sweep.SWEEP``); every expected value is
worked out from what the sweep logged, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from click.testing import CliRunner, Result

import tbconvert
from tbconvert.cli import cli
from tbconvert.cli.hparams import AGGREGATES
from tbconvert.errors import UsageError
from tbconvert.output.hparams import hparams_rows, sort_rows
from tbconvert.query import tables
from tests.support.eventfiles import write_tbx_run
from tests.support.snapshots import StoreFactory
from tests.support.sweep import STEPS, SWEEP, build_store, sweep_loss

RUNS = sorted(SWEEP)  # lr_0.01, lr_0.1, lr_1.0


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("hparams"), make_store)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def float32(value: float) -> float:
    """What tensorboardX's add_scalar stores: the value rounded to float32."""
    import numpy as np

    return float(np.float32(value))


def test_cli_aggregates_follow_the_library() -> None:
    assert AGGREGATES == tables.AGGREGATES


def test_table_has_one_row_per_session_with_params_and_last_metric(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--metric", "accuracy")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = lines[0].split()
    assert header == ["run_id", "run_path", "context", "batch_size", "lr", "optimizer", "accuracy"]
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert sorted(rows) == [f"sweep/{run}" for run in RUNS]
    for run, (lr, optimizer, final, _) in SWEEP.items():
        cells = dict(zip(header, rows[f"sweep/{run}"], strict=True))
        assert float(cells["lr"]) == lr and cells["optimizer"] == optimizer
        assert float(cells["accuracy"]) == pytest.approx(final, rel=1e-6)


def test_sort_descending_on_a_metric(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--metric", "accuracy", "--sort", "-accuracy")
    assert result.exit_code == 0, result.output
    order = [line.split()[1] for line in result.stdout.splitlines()[1:]]
    by_final = sorted(SWEEP, key=lambda run: SWEEP[run][2], reverse=True)
    assert order == [f"sweep/{run}" for run in by_final]
    ascending = invoke("hparams", "--store", store_path, "--sort", "lr", "--format", "csv")
    lrs = [float(row["lr"]) for row in csv.DictReader(io.StringIO(ascending.stdout))]
    assert lrs == sorted(lr for lr, *_ in SWEEP.values())


def test_min_and_max_of_a_metric_as_json(store_path: str) -> None:
    for agg, pick in (("min", min), ("max", max)):
        result = invoke(
            "hparams", "--store", store_path, "--metric", "loss", "--agg", agg, "--format", "json"
        )
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)
        assert [row["run_path"] for row in rows] == [f"sweep/{run}" for run in RUNS]
        for row in rows:
            run = row["run_path"].split("/")[1]
            logged = [sweep_loss(run, step) for step in range(STEPS)]
            expected = pick(float32(v) for v in logged if not math.isnan(v))
            assert row["loss"] == expected, (agg, run)


def test_best_is_the_lowest_loss_and_the_highest_accuracy_and_says_so(store_path: str) -> None:
    args = ["--metric", "loss", "--metric", "accuracy", "--agg"]
    best = invoke("hparams", "--store", store_path, *args, "best", "--format", "json")
    assert best.exit_code == 0, best.output
    assert "best: lowest loss, highest accuracy" in best.stderr
    lowest = invoke("hparams", "--store", store_path, *args, "min", "--format", "json")
    highest = invoke("hparams", "--store", store_path, *args, "max", "--format", "json")
    for row, low, high in zip(
        *(json.loads(r.stdout) for r in (best, lowest, highest)), strict=True
    ):
        assert row["loss"] == low["loss"] and row["accuracy"] == high["accuracy"], row


def test_last_of_a_series_that_ended_in_nan_is_empty(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--metric", "loss", "--format", "jsonl")
    rows = {json.loads(line)["run_path"]: json.loads(line) for line in result.stdout.splitlines()}
    assert rows["sweep/lr_1.0"]["loss"] is None
    assert rows["sweep/lr_0.1"]["loss"] == float32(sweep_loss("lr_0.1", STEPS - 1))


def test_run_filter(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--run", "sweep/lr_0.1", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["run_path"] for row in rows] == ["sweep/lr_0.1"]


def test_unknown_metric_is_a_usage_error_naming_close_tags(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--metric", "acuracy")
    assert result.exit_code == 2
    assert "'acuracy'" in result.stderr and "accuracy" in result.stderr.split("did you mean")[1]


def test_unknown_sort_column_is_a_usage_error(store_path: str) -> None:
    result = invoke("hparams", "--store", store_path, "--sort", "nothing")
    assert result.exit_code == 2 and "optimizer" in result.stderr


def test_a_store_without_sessions_says_so(tmp_path, make_store: StoreFactory) -> None:
    write_tbx_run(tmp_path / "logs", "run_a")
    store = make_store(tmp_path, "plain")
    tbconvert.convert(tmp_path / "logs", store, progress=False)
    result = invoke("hparams", "--store", store)
    assert result.exit_code == 0 and result.stdout == ""
    assert "no hparams sessions" in result.stderr


def test_library_sorts_missing_values_last() -> None:
    columns = ["run", "score"]
    rows = [["a", None], ["b", 2.0], ["c", math.nan], ["d", 3.0]]
    assert [r[0] for r in sort_rows(columns, rows, "score")] == ["b", "d", "a", "c"]
    assert [r[0] for r in sort_rows(columns, rows, "-score")] == ["d", "b", "a", "c"]
    with pytest.raises(UsageError):
        sort_rows(columns, rows, "other")


def test_library_call_equals_the_command(store_path: str) -> None:
    with tbconvert.open_store(store_path) as store:
        columns, rows = hparams_rows(store, ["accuracy"], sort="-accuracy")
    text = invoke(
        "hparams",
        "--store",
        store_path,
        "--metric",
        "accuracy",
        "--sort=-accuracy",
        "--format",
        "json",
    ).stdout
    assert [dict(zip(columns, row, strict=True)) for row in rows] == json.loads(text)
