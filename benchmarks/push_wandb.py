"""A logdir into W&B's offline run directories (#48): ``tbconvert tf`` + ``push wandb``
against W&B's own write path with nothing to read.

    .venv/bin/python benchmarks/push_wandb.py                  # 100k scalar events, 4 runs
    .venv/bin/python benchmarks/push_wandb.py --events 20000   # a quick look

Both write every scalar point of the same generated logdir (``generate.py``) into fresh
offline directories (``WANDB_MODE=offline``, no network):

* the ceiling: the same number of points, runs and keys logged through ``wandb.init`` and
  ``run.log`` (a row per step holding every series of the run, each with its own step key,
  as the push writes them), generated in memory;
* ``tbconvert tf`` into a fresh store, then ``tbconvert push wandb --offline`` (the images
  too).

Each is timed wall-clock in a fresh subprocess; the points the push sent are its ``--json``
count.  Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

CEILING = """
import os, sys, wandb
runs, steps, tags = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for index in range(runs):
    run = wandb.init(project="ceiling", id=f"run{index}", dir=sys.argv[4], reinit="create_new",
                     settings=wandb.Settings(silent=True, console="off", x_disable_stats=True))
    keys = [f"run/tag{t}" for t in range(tags)]
    for key in keys:
        run.define_metric(key + "@step", hidden=True)
        run.define_metric(key, step_metric=key + "@step")
    for step in range(steps):
        row = {}
        for key in keys:
            row[key], row[key + "@step"] = step * 0.5, step
        run.log(row, step=step)
    run.finish()
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    runs, tags = 4, 10
    logdir = generate.ensure_scalars(
        generate.Params(events=args.events, runs=runs, tags=tags, images=4)
    ).root
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    with tempfile.TemporaryDirectory(prefix="tbconvert-bench-wandb-") as folder:
        base = Path(folder)
        ceiling, _ = timed(
            [sys.executable, "-c", CEILING, str(runs), str(args.events // runs // tags),
             str(tags), str(base / "ceiling")],
            env,
        )  # fmt: skip
        store = str(base / "runs.db")
        tbconvert = [sys.executable, "-m", "tbconvert"]
        converting, _ = timed([*tbconvert, "tf", "--logdir", str(logdir), "--store", store], env)
        pushing, out = timed(
            [*tbconvert, "push", "wandb", "--store", store, "--project", "bench",
             "--offline", str(base / "push"), "--json", "-q"],
            env,
        )  # fmt: skip
    sent = json.loads(out)["metrics"]
    print(f"W&B SDK alone ({args.events} points): {ceiling:.1f} s, {args.events / ceiling:,.0f}/s")
    print(
        f"tbconvert tf {converting:.1f} s + push wandb {pushing:.1f} s ({sent} points): "
        f"{sent / (converting + pushing):,.0f}/s; ceiling / ours = "
        f"{ceiling / (converting + pushing):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
