"""A logdir into W&B's offline run directories (#48): ``tbconvert tf`` + ``push wandb``
against W&B's own write path with nothing to read.

    .venv/bin/python benchmarks/push_wandb.py                  # 100k scalar events, 4 runs
    .venv/bin/python benchmarks/push_wandb.py --events 20000   # a quick look

Both write every scalar point of the same generated logdir (``generate.py``) into fresh
offline directories (``WANDB_MODE=offline``, no network):

* the ceiling: the same number of points, runs and keys logged through ``wandb.init`` and
  ``run.log``, generated in memory, as the push writes them: each series with its own step
  key, a row per step and wall time (its ``_timestamp``); the generated logdir gives each
  tag of a step its own wall time, so a row per point;
* ``tbconvert tf`` into a fresh store, then ``tbconvert push wandb --offline`` (the images
  too).

Each is timed in a fresh subprocess, wall-clock and in CPU seconds (the subprocess and
what it waited for: ``wandb-core``); the points the push sent are its ``--json`` count.  The
load average is printed beside the figures.  Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    row_number = 0
    for step in range(steps):
        for tag, key in enumerate(keys):
            wall = 1.7e9 + step + tag * 1e-4
            run.log({key: step * 0.5, key + "@step": step, "_timestamp": wall}, step=row_number)
            row_number += 1
    run.finish()
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``command``, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stdout


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
        ceiling, ceiling_cpu, _ = timed(
            [sys.executable, "-c", CEILING, str(runs), str(args.events // runs // tags),
             str(tags), str(base / "ceiling")],
            env,
        )  # fmt: skip
        store = str(base / "runs.db")
        tbconvert = [sys.executable, "-m", "tbconvert"]
        converting, converting_cpu, _ = timed(
            [*tbconvert, "tf", "--logdir", str(logdir), "--store", store], env
        )
        pushing, pushing_cpu, out = timed(
            [*tbconvert, "push", "wandb", "--store", store, "--project", "bench",
             "--offline", str(base / "push"), "--json", "-q"],
            env,
        )  # fmt: skip
    sent = json.loads(out)["metrics"]
    ours, ours_cpu = converting + pushing, converting_cpu + pushing_cpu
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(
        f"W&B SDK alone ({args.events} points): {ceiling:.1f} s ({ceiling_cpu:.1f} s CPU), "
        f"{args.events / ceiling:,.0f}/s"
    )
    print(
        f"tbconvert tf {converting:.1f} s ({converting_cpu:.1f} s CPU) + push wandb "
        f"{pushing:.1f} s ({pushing_cpu:.1f} s CPU) ({sent} points): {sent / ours:,.0f}/s; "
        f"ceiling / ours = {ceiling / ours:.2f} wall, {ceiling_cpu / ours_cpu:.2f} CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
