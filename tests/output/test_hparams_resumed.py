"""``hparams --metric`` follows ``--resumed`` as ``--column`` does: by default a resumed run's
metric is its last attempt's, and ``--resumed all`` reads every record.

The run logs steps 0..100, then a second writer restarts at step 50 and logs 50..150 with
values 0.05 higher (``tests/support/resumed_run``), beside an ``add_hparams`` session; the
expected values are worked out from what was written, in float32 as tensorboardX stores them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tbconvert import convert
from tbconvert.cli import cli
from tests.support.resumed_run import TAG, write_resumed_run
from tests.support.snapshots import StoreFactory


def written(step: int, resumed: bool) -> float:
    return float(np.float32(1.0 / (step + 1) + (0.05 if resumed else 0.0)))


# The current points: steps 0..49 of the first attempt, then 50..150 of the second.
CURRENT = [written(step, False) for step in range(50)] + [
    written(step, True) for step in range(50, 151)
]
EVERY = [written(step, False) for step in range(101)] + [
    written(step, True) for step in range(50, 151)
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    from tensorboardX import SummaryWriter

    base = tmp_path_factory.mktemp("hparams_resumed")
    write_resumed_run(base / "logs" / "run")
    with SummaryWriter(str(base / "logs" / "run"), filename_suffix=".c") as writer:
        writer.add_hparams({"lr": 0.1}, {"hparam/accuracy": 0.5}, name="session")
    store = make_store(base)
    assert convert(base / "logs", store, progress=False).exit_code == 0
    return store


def metric(store: str, agg: str, *resumed: str) -> float:
    args = ["hparams", "--store", store, "--metric", TAG, "--agg", agg, "--format", "json"]
    result = CliRunner().invoke(cli, [*args, *resumed])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    return float(row[TAG])


@pytest.mark.parametrize(
    ("agg", "current", "every"),
    [
        # the last attempt ends at step 150 too: the last point is the same either way
        ("last", CURRENT[-1], written(150, True)),
        ("min", min(CURRENT), min(EVERY)),
        ("max", max(CURRENT), max(EVERY)),
    ],
    ids=["last", "min", "max"],
)
def test_a_metric_column_is_the_last_attempts_unless_asked(
    store: str, agg: str, current: float, every: float
) -> None:
    assert metric(store, agg) == current
    assert metric(store, agg, "--resumed", "current") == current
    assert metric(store, agg, "--resumed", "all") == every


def test_the_two_readings_differ_where_the_attempts_overlap() -> None:
    # Guards the test above: the first attempt's steps 50..100 are lower than the second's.
    assert min(EVERY) < min(CURRENT)
