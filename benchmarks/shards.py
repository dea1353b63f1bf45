"""``tbconvert tf --shard K/N`` (issue #47): N shard converters at once into one local
PostgreSQL server against one plain converter, and what the hash split costs.

    .venv/bin/python benchmarks/shards.py [--runs 300] [--steps 1000] [--repeat 3] [--json]

A sweep of ``--runs`` runs (three scalar tags of ``--steps`` steps each, one event file a
run) is converted, each time into a fresh database of one server: by one ``tbconvert tf``,
then by ``--shards`` of them started together (``--shard K/N``), alternating, ``--repeat``
times; wall time until the last process ends, medians.  Then, in this process, a
classification of ``--split-runs`` runs and the time ``select_shard`` takes over it against
the time the classification itself took (best of 5 each).  Figures: docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from workloads import concurrent_converts  # noqa: E402

from tbconvert.filters import Shard  # noqa: E402
from tbconvert.reading import discovery  # noqa: E402
from tests.support.eventfiles import simple_value, summary_event, write_events  # noqa: E402

TAGS = ("loss", "accuracy", "lr")


def write_sweep(root: Path, runs: int, steps: int) -> None:
    """``runs`` runs of one event file each: TAGS for ``steps`` steps."""
    for index in range(runs):
        events = [
            summary_event(
                step,
                1e9 + step,
                [
                    simple_value(tag, (index + 1) / (step + 1 + offset))
                    for offset, tag in enumerate(TAGS)
                ],
            )
            for step in range(steps)
        ]
        write_events(root / f"sweep/run{index:05d}" / "events.out.tfevents.1.host", events)


def command(logdir: Path, store: str, shard: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "tbconvert", "tf", "--logdir", str(logdir), "--store", store]
    cmd += ["--source", "bench", "-q"]
    return cmd + (["--shard", shard] if shard else [])


def split_cost(root: Path, runs: int) -> dict[str, float]:
    """Best of 5: classifying a logdir of ``runs`` runs, and splitting it into 3 shards."""
    write_sweep(root, runs, steps=1)
    classify, split = [], []
    for _ in range(5):
        started = time.perf_counter()
        classification = discovery.classify(str(root))
        classify.append(time.perf_counter() - started)
        started = time.perf_counter()
        for index in range(3):
            discovery.select_shard(classification, Shard(index, 3))
        split.append((time.perf_counter() - started) / 3)
    return {"classify_seconds": min(classify), "select_shard_seconds": min(split)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--split-runs", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from tests.support.pgserver import PostgresServer

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TBCONVERT_BY_RECORD_BYTES", None)
    report: dict[str, object] = {"runs": args.runs, "points": args.runs * args.steps * len(TAGS)}
    with tempfile.TemporaryDirectory() as work:
        logdir = Path(work) / "logs"
        write_sweep(logdir, args.runs, args.steps)
        server = PostgresServer.start()
        plain, sharded = [], []
        try:
            for _ in range(args.repeat):
                wall, codes = concurrent_converts(
                    [command(logdir, server.new_database("plain"), None)], env
                )
                assert codes == [0], codes
                plain.append(wall)
                store = server.new_database("sharded")
                shards = [f"{k}/{args.shards}" for k in range(args.shards)]
                wall, codes = concurrent_converts(
                    [command(logdir, store, shard) for shard in shards], env
                )
                assert codes == [0] * args.shards, codes
                sharded.append(wall)
        finally:
            server.stop()
        report["plain_seconds"] = statistics.median(plain)
        report["sharded_seconds"] = statistics.median(sharded)
        report["speed_up"] = report["plain_seconds"] / report["sharded_seconds"]
        report["plain_all"], report["sharded_all"] = plain, sharded
        report.update(split_cost(Path(work) / "split", args.split_runs))
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
