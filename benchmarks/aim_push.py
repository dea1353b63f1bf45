"""A logdir into Aim (#48): ``aim convert tensorboard`` against ``tbconvert tf`` + ``push aim``.

    .venv/bin/python benchmarks/aim_push.py                  # 400k scalar events, 4 runs
    .venv/bin/python benchmarks/aim_push.py --events 40000   # a quick look
    .venv/bin/python benchmarks/aim_push.py --aim-python /path/to/venv/bin/python

Three contenders put the same generated logdir (``generate.py``: TF1 and TF2 runs, the TF2
ones with train/ and validation/ contexts, a few images) into a fresh Aim repo each (made by
``aim init`` beforehand, untimed), each timed wall-clock in a fresh subprocess:

* ``aim convert --repo R tensorboard --logdir D``, Aim's own converter.  It imports
  TensorFlow, which tbconvert's environment lacks: ``--aim-python`` names an interpreter with
  aim and tensorflow (by default this one, if it has both);
* ``tbconvert tf`` into a fresh store, then ``tbconvert push aim``;
* the ceiling of Aim's SDK: the very points ``v_scalars_current`` holds (loaded from the
  store first, untimed), written with ``Run.track`` one Aim run per run, nothing to read.

Then every repo is indexed (Aim's UI does it when it starts) and its metric points counted
through Aim's SDK, to check that each contender put every point there.  Figures:
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

TARGET = 10.0  # against aim convert
CEILING_TARGET = 1.5  # at most this much slower than Aim's SDK writing with nothing to read
AIM_CLI = "import sys; from aim.cli.cli import cli_entry_point; sys.exit(cli_entry_point())"


def ceiling(store: str, repo: str) -> None:
    """Aim's SDK writing the store's current points (``--ceiling``); prints the seconds."""
    from aim import Run

    with closing(sqlite3.connect(store)) as conn:
        rows = conn.execute(
            "SELECT run_path, context, tag, step, value FROM v_scalars_current "
            "ORDER BY run_path, context, tag, step"
        ).fetchall()
    by_run: dict[str, list[tuple[str, str, int, float]]] = {}
    for run_path, context, tag, step, value in rows:
        number = float("nan") if value is None else value
        by_run.setdefault(run_path, []).append((context, tag, step, number))
    started = time.perf_counter()
    for run_path, points in by_run.items():
        run = Run(repo=repo, system_tracking_interval=None, capture_terminal_logs=False)
        run.name = run_path
        for context, tag, step, value in points:
            run.track(value, name=tag, step=step, context={"subset": context} if context else {})
        run.close()
    print(f"{time.perf_counter() - started:.3f}")


def count(repo: str) -> None:
    """Index every run of ``repo``, then print its metric points as Aim's SDK reads them
    (``--count``)."""
    from aim import Repo
    from aim.sdk.index_manager import RepoIndexManager

    opened = Repo.from_path(repo)
    manager = RepoIndexManager.get_index_manager(opened)
    for run_hash in opened.list_all_runs():
        manager.index(run_hash)
    total = 0
    for run in Repo(repo).iter_runs():
        for metric in run.metrics():
            steps, _ = metric.data.numpy()
            total += len(steps)
    print(total)


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        command, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    return time.perf_counter() - started, done.stdout


def fresh_repo(python: str, path: Path) -> str:
    path.mkdir()
    subprocess.run(
        [python, "-c", AIM_CLI, "init", "--repo", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--aim-python", default=sys.executable)
    parser.add_argument("--ceiling", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--count", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ceiling:
        ceiling(*args.ceiling)
        return 0
    if args.count:
        count(args.count)
        return 0
    dataset = generate.ensure_scalars(generate.Params(events=args.events, runs=4, images=4))
    logdir = str(dataset.logdir)
    seconds: dict[str, float] = {}
    points: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="aim-bench-") as folder:
        root = Path(folder)
        store = str(root / "store.db")
        repos = {name: fresh_repo(args.aim_python, root / name) for name in ("aim", "tb", "sdk")}
        aim_cli = [args.aim_python, "-c", AIM_CLI, "convert", "--repo", repos["aim"]]
        seconds["aim"], _ = timed([*aim_cli, "tensorboard", "--logdir", logdir])
        tbconvert = [sys.executable, "-m", "tbconvert"]
        seconds["tf"], _ = timed([*tbconvert, "tf", "--logdir", logdir, "--store", store, "-q"])
        push = ["push", "aim", "--store", store, "--repo", repos["tb"], "-q", "--json"]
        seconds["push"], said = timed([*tbconvert, *push])
        seconds["tb"] = seconds["tf"] + seconds["push"]
        _, said = timed([sys.executable, __file__, "--ceiling", store, repos["sdk"]])
        seconds["sdk"] = float(said.split()[-1])
        for name, repo in repos.items():
            _, said = timed([args.aim_python, __file__, "--count", repo])
            points[name] = int(said.split()[-1])
        with closing(sqlite3.connect(store)) as conn:
            (current,) = conn.execute("SELECT count(*) FROM v_scalars_current").fetchone()
    if not points["aim"]:
        print(
            f"aim convert put no point in its repo: has {args.aim_python} tensorflow and "
            "tensorboard (aim convert tensorboard imports both)?",
            file=sys.stderr,
        )
        return 1
    events = dataset.manifest.get("scalar_events", args.events)
    report = {"events": events, "current_points": current, "seconds": seconds, "points": points}
    print(json.dumps(report), file=sys.stderr)
    print(f"Aim push, {events:,} scalar events ({current:,} points in v_scalars_current)")
    print(f"{'contender':<48} {'seconds':>8} {'events/s':>10} {'in Aim':>10}")
    for name, label in (
        ("aim", "aim convert tensorboard"),
        ("tb", "tbconvert tf + tbconvert push aim"),
        ("sdk", "Aim's SDK, Run.track, nothing to read (ceiling)"),
    ):
        print(
            f"{label:<48} {seconds[name]:>8.1f} {events / seconds[name]:>10,.0f} "
            f"{points[name]:>10,}"
        )
    print(f"  {'of tbconvert: tbconvert tf':<46} {seconds['tf']:>8.1f}")
    print(f"  {'of tbconvert: tbconvert push aim':<46} {seconds['push']:>8.1f}")
    print(
        f"tbconvert / aim convert: {seconds['aim'] / seconds['tb']:.1f}x (target >= {TARGET:.0f}x)"
    )
    print(
        f"tbconvert / Aim's SDK ceiling: {seconds['sdk'] / seconds['tb']:.1f}x "
        f"(target >= {1 / CEILING_TARGET:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
