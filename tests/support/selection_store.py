"""A small sweep for run selection (``--where``, ``--top``, ``check``): runs with typed params
(a number, an integer, a bool, a string; some missing), a ``loss`` in the run's own context
with NaN points, an ``acc`` in ``train`` and ``val`` contexts, and two resumed runs (a second
writer starts again at a lower step; a writer goes back within its file), written with
tensorboardX.

Values are multiples of 1/4, so that a mean is exact whatever order it is summed in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tbconvert import convert
from tests.support.snapshots import StoreFactory

NAN = math.nan
INF = math.inf
# run path -> params, loss points by writer (lists of (step, value)), acc points by context.
RUNS: dict[str, dict[str, Any]] = {
    "a/r0": {
        "params": {"lr": 0.001, "opt": "adam", "layers": 2, "flag": True},
        "loss": [[(0, 2.0), (1, 1.5), (2, 0.75), (3, 0.5), (4, 0.75), (5, 0.25)]],
        "acc": {"train": [(0, 0.25), (1, 0.5)], "val": [(0, 0.25), (1, 0.75)]},
    },
    "a/r1": {
        "params": {"lr": 0.01, "opt": "sgd", "layers": 4, "flag": False},
        "loss": [[(0, 3.0), (1, NAN), (2, 1.0), (3, 1.0), (4, 1.25)]],
        "acc": {"train": [(0, 0.5)], "val": [(0, 0.5), (1, 0.5), (2, 1.0)]},
    },
    "a/r2": {
        "params": {"lr": 0.1, "opt": "adam", "layers": 2, "flag": True},
        "loss": [[(0, NAN), (1, NAN), (2, NAN)]],
        "acc": {"val": [(0, 0.75)]},
    },
    "b/r3": {
        "params": {"lr": 1.0, "opt": "rms"},
        # Resumed from step 3: the first attempt's steps 3..5 are dropped by ``current``.
        "loss": [
            [(0, 2.5), (1, 2.0), (2, 1.5), (3, 0.25), (4, 0.5), (5, 0.5)],
            [(3, 1.25), (4, 1.0), (5, 0.75), (6, 0.75), (7, 1.0), (8, 1.5)],
        ],
        "acc": {"train": [(0, 0.25), (3, 0.5)], "val": [(0, 0.0), (5, 1.0)]},
    },
    "b/r4": {
        "params": {},
        "loss": [[(0, 1.0), (1, -0.5), (2, INF), (3, NAN)]],
        "acc": {"train": [(0, 1.0)]},
    },
    "b/r6": {
        "params": {},
        # Restarted inside one file, from step 1: the current points are 1.0, 2.0, 1.5.
        "loss": [[(0, 1.0), (1, 0.5), (2, 0.25), (1, 2.0), (2, 1.5)]],
        "acc": {},
    },
    "b/r5": {
        "params": {"lr": 0.01, "opt": "sgd", "layers": 8, "flag": 1.0},
        "loss": [],
        "acc": {"val": [(0, 0.5), (1, 0.25)]},
    },
}


def write_selection_sweep(logdir: Path) -> None:
    """Write :data:`RUNS` under ``logdir``."""
    from tensorboardX import FileWriter
    from tensorboardX.summary import hparams, scalar

    for run, spec in RUNS.items():
        directory = logdir / run
        writers = spec["loss"] or [[]]
        for attempt, points in enumerate(writers):
            writer = FileWriter(str(directory), filename_suffix=f".{attempt}", flush_secs=3600)
            if attempt == 0 and spec["params"]:
                for summary in hparams(spec["params"], {}):
                    writer.add_summary(summary)
            for step, value in points:
                writer.add_summary(scalar("loss", value), step, walltime=1e9 + step)
            writer.close()
        for context, points in spec["acc"].items():
            writer = FileWriter(str(directory / context), flush_secs=3600)
            for step, value in points:
                writer.add_summary(scalar("acc", value), step, walltime=1e9 + step)
            writer.close()


def build_selection_store(base: Path, make_store: StoreFactory) -> str:
    """Convert a fresh :data:`RUNS` sweep into a new store of the current backend."""
    write_selection_sweep(base / "logs")
    store = make_store(base, "selection")
    summary = convert(base / "logs", store, progress=False)
    assert summary.exit_code == 0, summary.problems
    return store
