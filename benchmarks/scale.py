"""The scale benchmark (issue #47): 1M, 10M and 100M points from several sources converted into
one PostgreSQL server by ``--shard K/N`` processes, then the dataset export of each store.

    python benchmarks/scale.py                                  # 1M, 10M and 100M points
    python benchmarks/scale.py --points 1000000 --points 10000000 --json-out scale.jsonl
    python benchmarks/scale.py --spark-python /tmp/spark/bin/python  # and Spark reads it back

Not in ``make test`` nor ``make bench`` (``make bench-big`` runs it): 1M, 10M and 100M points
take about 40 minutes on two busy cores (Spark's checks included) and 25 GB of disk at the
peak, in ``--work`` (default: the system's temporary directory), all removed at the end.

The data: one unit logdir of ``--unit-events`` scalar events (``generate.Params``, 20 runs,
TF1 and TF2 encodings, no images), generated once and cached; a scale of P points is P / unit
copies of it, hard-linked (so generating 100M points costs no disk and no time), named
``source_S/copy_CCCC/run_...`` and dealt round-robin to ``--sources`` source directories.
Each source is converted under its own ``--source`` name by ``--shards`` processes started
together (``tbconvert tf --shard K/N``), the sources one after another, into a fresh database
of one throwaway server (``tests/support/pgserver.py``: fsync off, as the tests run it).

Per scale it reports, as one JSON line: the conversion's wall time and rows/s, the shards'
CPU and peak RSS (``wait4`` of each child), the server's CPU (its postmaster's own and its
reaped backends' times), the store's size; then ``tbconvert export dataset`` of the store in
a subprocess of its own (wall, CPU, peak RSS, dataset size); the cost per point of each; and
checks: the store holds P points, the dataset's count and sums per (run, context, tag) equal
``v_scalars`` (pyarrow), and with ``--spark-python`` the same through Spark, plus one series
row for row.  A figure over wrong output says CHECK.  Figures: docs/scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import generate  # noqa: E402
from run import generated, measure  # noqa: E402

from tests.support.pgserver import PostgresServer  # noqa: E402

TBCONVERT = [sys.executable, "-m", "tbconvert"]
AGGREGATE = (
    "SELECT run_path, context, tag, count(*), sum(step), sum(value) FROM v_scalars "
    "GROUP BY run_path, context, tag"
)
ARROW_CHECK = """
import json, sys
import pyarrow.dataset as ds
table = ds.dataset(sys.argv[1] + "/scalars", partitioning="hive").to_table(
    columns=["run_path", "context", "tag", "step", "value"])
grouped = table.group_by(["run_path", "context", "tag"]).aggregate(
    [("step", "count"), ("step", "sum"), ("value", "sum")])
print(json.dumps([list(row.values()) for row in grouped.to_pylist()]))
"""
SPARK_CHECK = """
import json, sys
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").appName("tbconvert-scale")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
frame = spark.read.parquet(sys.argv[1] + "/scalars")
run_path, context, tag = json.loads(sys.argv[2])
grouped = frame.groupBy("run_path", "context", "tag").agg(
    F.count("step"), F.sum("step"), F.sum("value")).collect()
series = (frame.where((F.col("run_path") == run_path) & (F.col("context") == context)
                      & (F.col("tag") == tag))
          .orderBy("step", "wall_time").select("step", "wall_time", "value").collect())
print(json.dumps({"columns": frame.columns, "groups": [list(row) for row in grouped],
                  "series": [list(row) for row in series]}))
"""


def unit_logdir(events: int) -> generate.Dataset:
    """The logdir every scale copies: ``events`` scalar events over 20 runs, no images."""
    params = generate.Params(events=events, runs=20, tags=10, images=0)
    return generated(generate.ensure_scalars, params)


def link_sources(unit: Path, root: Path, copies: int, sources: int) -> list[Path]:
    """``copies`` hard-linked copies of ``unit`` dealt over ``sources`` directories."""
    files = [path for path in unit.rglob("*") if path.is_file()]
    for copy in range(copies):
        target = root / f"source_{copy % sources}" / f"copy_{copy:04d}"
        for path in files:
            linked = target / path.relative_to(unit)
            linked.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, linked)
    return sorted(root.glob("source_*"))


def server_cpu(server: PostgresServer) -> float:
    """CPU seconds of the postmaster and of every backend it has reaped so far."""
    pid = (server.root / "data" / "postmaster.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def run_shards(commands: list[list[str]], env: dict[str, str]) -> dict[str, Any]:
    """Start every command at once; wall until the last ends, each one's CPU and peak RSS."""
    started = time.perf_counter()
    procs = {}
    for command in commands:
        proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env
        )
        procs[proc.pid] = proc
    cpu, rss, codes = [], [], []
    while procs:
        pid, status, usage = os.wait4(-1, 0)
        if procs.pop(pid, None) is None:
            continue
        codes.append(os.waitstatus_to_exitcode(status))
        cpu.append(usage.ru_utime + usage.ru_stime)
        rss.append(usage.ru_maxrss / 1024.0)
    if any(codes):
        raise SystemExit(f"a shard failed: exit codes {codes}")
    return {"wall_s": time.perf_counter() - started, "cpu_s": sum(cpu), "maxrss_mb": max(rss)}


def convert(
    server: PostgresServer, url: str, sources: list[Path], shards: int, env: dict[str, str]
) -> dict[str, Any]:
    """Every source into ``url`` by ``shards`` processes at once, one source after another."""
    total = {"wall_s": 0.0, "cpu_s": 0.0, "maxrss_mb": 0.0}
    server_before = server_cpu(server)
    for source in sources:
        command = [*TBCONVERT, "tf", "--logdir", str(source), "--store", url, "-q"]
        command += ["--source", source.name]
        ran = run_shards([[*command, "--shard", f"{k}/{shards}"] for k in range(shards)], env)
        total = {key: (max if key == "maxrss_mb" else sum)((total[key], ran[key])) for key in ran}
    total["server_cpu_s"] = server_cpu(server) - server_before
    return total


def store_figures(server: PostgresServer, database: str) -> dict[str, Any]:
    """Points and bytes of the store, and its aggregate per series (the checks' oracle)."""
    size = server.execute("SELECT pg_database_size(current_database())", database)[0][0]
    groups = server.execute(AGGREGATE, database)
    return {"bytes": size, "points": sum(int(row[3]) for row in groups), "groups": groups}


def same_groups(expected: list[tuple[Any, ...]], found: list[list[Any]]) -> bool:
    """Counts and step sums equal, value sums equal to float summation order."""
    want = {tuple(row[:3]): row[3:] for row in expected}
    got = {tuple(row[:3]): row[3:] for row in found}
    if want.keys() != got.keys():
        return False
    for key, (count, steps, values) in want.items():
        other = got[key]
        if (int(count), int(steps)) != (int(other[0]), int(other[1])):
            return False
        if abs(float(values) - float(other[2])) > 1e-9 * max(1.0, abs(float(values))) * count:
            return False
    return True


def child_json(python: str, code: str, *arguments: str) -> Any:
    found = subprocess.run(
        [python, "-c", code, *arguments], check=True, capture_output=True, text=True
    )
    return json.loads(found.stdout.strip().splitlines()[-1])


def spark_check(python: str, target: Path, store: dict[str, Any], server: Any, db: str) -> str:
    """Spark's aggregates per series and one series row for row, against ``v_scalars``."""
    run_path, context, tag = sorted(tuple(row[:3]) for row in store["groups"])[0]
    found = child_json(python, SPARK_CHECK, str(target), json.dumps([run_path, context, tag]))
    rows = server.execute(
        "SELECT step, wall_time, value FROM v_scalars WHERE run_path = "
        f"'{run_path}' AND context = '{context}' AND tag = '{tag}' ORDER BY step, wall_time",
        db,
    )
    columns = ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"]
    same = (
        found["columns"][: len(columns)] == columns
        and same_groups(store["groups"], found["groups"])
        and [list(row) for row in rows] == found["series"]
    )
    return "ok" if same else "CHECK"


def one_scale(args: argparse.Namespace, server: PostgresServer, points: int) -> dict[str, Any]:
    unit = unit_logdir(args.unit_events)
    copies = points // args.unit_events
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TBCONVERT_BY_RECORD_BYTES", None)
    env.pop("TBCONVERT_STORE", None)
    work = Path(tempfile.mkdtemp(prefix=f"scale-{points}-", dir=args.work))
    url = server.new_database("scale")
    database = url.rsplit("/", 1)[1]
    try:
        sources = link_sources(unit.logdir, work / "logs", copies, args.sources)
        converted = convert(server, url, sources, args.shards, env)
        store = store_figures(server, database)
        target = work / "dataset"
        export = measure([*TBCONVERT, "export", "dataset", "--store", url, "-o", str(target), "-q"])
        if not export.ok:
            raise SystemExit(f"export failed: {export.stderr}")
        dataset_bytes = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        arrow = child_json(sys.executable, ARROW_CHECK, str(target))
        report: dict[str, Any] = {
            "points": points,
            "sources": args.sources,
            "shards": args.shards,
            "runs": copies * 20,
            "convert": {**converted, "rows_per_s": round(points / converted["wall_s"])},
            "store_bytes": store["bytes"],
            "export": {**export.brief(), "rows_per_s": round(points / export.wall)},
            "dataset_bytes": dataset_bytes,
            "per_point": {
                "convert_wall_us": 1e6 * converted["wall_s"] / points,
                "convert_cpu_us": 1e6 * converted["cpu_s"] / points,
                "server_cpu_us": 1e6 * converted["server_cpu_s"] / points,
                "store_bytes": store["bytes"] / points,
                "export_wall_us": 1e6 * export.wall / points,
                "export_cpu_us": 1e6 * export.cpu / points,
                "dataset_bytes": dataset_bytes / points,
            },
            "check_store_points": "ok" if store["points"] == points else "CHECK",
            "check_pyarrow": "ok" if same_groups(store["groups"], arrow) else "CHECK",
        }
        if args.spark_python:
            started = time.perf_counter()
            report["check_spark"] = spark_check(args.spark_python, target, store, server, database)
            report["spark_s"] = time.perf_counter() - started
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)
        server.execute(f'DROP DATABASE IF EXISTS "{database}"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, action="append")
    parser.add_argument("--unit-events", type=int, default=1_000_000)
    parser.add_argument("--sources", type=int, default=2)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--spark-python", help="a Python with pyspark (and a Java) to check with")
    parser.add_argument("--work", type=Path, help="where logdirs and datasets go (temporary)")
    parser.add_argument("--json-out", type=Path, help="append each scale's JSON line here too")
    args = parser.parse_args()
    server = PostgresServer.start()
    try:
        for points in args.points or [1_000_000, 10_000_000, 100_000_000]:
            line = json.dumps(one_scale(args, server, points))
            print(line, flush=True)
            if args.json_out:
                with args.json_out.open("a") as out:
                    out.write(line + "\n")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
