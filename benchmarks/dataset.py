"""``tbconvert export dataset`` on a store of several million points (issue #47).

    python benchmarks/dataset.py                 # 5 copies of the 1M-event logdir: 5M points
    python benchmarks/dataset.py --copies 20     # 20M points
    python benchmarks/dataset.py --store S.db    # an existing SQLite store
    python benchmarks/dataset.py --json

The store is the benchmark's 1M-event logdir (``generate.ensure_scalars``) converted ``--copies``
times under distinct ``--source`` names.  Each measurement runs in a subprocess of its own,
its wall time by ``perf_counter`` and its CPU and peak RSS from ``wait4`` of that very child
(``run.measure``):

1. ``tbconvert export dataset --store S -o D -q`` into an empty directory: rows/s, peak RSS
   (target: 1M rows/s, under 250 MB);
2. the same again, nothing new (target: nothing written);
3. references from the same run: the Python SQLite driver merely fetching the scalars' rows
   (``fetchmany``, the columns the export reads: the floor of any reader through it), and
   pyarrow writing the same rows, already in memory, as one Parquet file (its own time).

The dataset's scalars are then counted and summed with pyarrow against the store's
``v_scalars``: a figure over wrong output is marked CHECK.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import generate
from run import measure

TBCONVERT = [sys.executable, "-m", "tbconvert"]
FETCH = """
import json, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1])
started = time.perf_counter()
cursor = conn.execute("SELECT series_id, step, wall_time, value FROM scalars")
rows = 0
while batch := cursor.fetchmany(32768):
    rows += len(batch)
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}))
"""
WRITE = """
import json, sqlite3, sys, time
import pyarrow as pa, pyarrow.parquet as pq
conn = sqlite3.connect(sys.argv[1])
sql = ("SELECT s.run_id, r.run_path, c.name, s.name, p.step, p.wall_time, p.value "
       "FROM scalars AS p JOIN series AS s ON s.id = p.series_id "
       "JOIN runs AS r ON r.id = s.run_id JOIN contexts AS c ON c.id = s.context_id")
columns = list(zip(*conn.execute(sql).fetchall()))
names = ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"]
table = pa.table({n: pa.array(c) for n, c in zip(names, columns)})
started = time.perf_counter()
pq.write_table(table, sys.argv[2], compression="zstd")
print(json.dumps({"rows": table.num_rows, "seconds": time.perf_counter() - started}))
"""
CHECK = """
import json, sys
import pyarrow.compute as pc, pyarrow.dataset as ds
table = ds.dataset(sys.argv[1] + "/scalars", partitioning="hive").to_table(
    columns=["step", "value"])
print(json.dumps([table.num_rows, pc.sum(table["step"]).as_py(), pc.sum(table["value"]).as_py()]))
"""


def build_store(store: Path, copies: int) -> None:
    """The benchmark's 1M-event logdir converted ``copies`` times into ``store``."""
    logdir = generate.ensure_scalars().logdir
    for copy in range(copies):
        command = [*TBCONVERT, "tf", "--logdir", str(logdir), "--store", str(store)]
        subprocess.run([*command, "--source", f"copy{copy}", "-q"], check=True)


def child_json(code: str, *arguments: str) -> dict[str, Any]:
    found = subprocess.run(
        [sys.executable, "-c", code, *arguments], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(found.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbconvert-dataset-") as scratch:
        store = options.store or Path(scratch) / "store.db"
        if options.store is None:
            build_store(store, options.copies)
        with sqlite3.connect(store) as conn:
            expected = conn.execute(
                "SELECT count(*), sum(step), sum(value) FROM v_scalars"
            ).fetchone()
        target = Path(scratch) / "dataset"
        export = [*TBCONVERT, "export", "dataset", "--store", str(store), "-o", str(target), "-q"]
        first = measure(export)
        again = measure(export)
        fetched = child_json(FETCH, str(store))
        written = child_json(WRITE, str(store), str(Path(scratch) / "one.parquet"))
        found = child_json(CHECK, str(target))
        rows = expected[0]
        same = found[:2] == list(expected[:2]) and abs(found[2] - expected[2]) < 1e-6 * rows
        report = {
            "points": rows,
            "export": {**first.brief(), "rows_per_s": round(rows / first.wall)},
            "no_change_rerun": again.brief(),
            "sqlite_fetch_rows_per_s": round(fetched["rows"] / fetched["seconds"]),
            "pyarrow_write_rows_per_s": round(written["rows"] / written["seconds"]),
            "dataset_bytes": sum(p.stat().st_size for p in target.rglob("*") if p.is_file()),
            "check": "ok" if same else "CHECK",
        }
    if options.json:
        print(json.dumps(report, indent=1))
        return
    export_figures = report["export"]
    print(f"points: {rows:,} ({report['dataset_bytes'] / 2**20:.0f} MB of Parquet)")
    print(
        f"export dataset: {export_figures['wall_s']:.1f} s wall, {export_figures['cpu_s']:.1f} s "
        f"CPU, {export_figures['rows_per_s']:,} rows/s (target 1,000,000), peak RSS "
        f"{export_figures['maxrss_mb']:.0f} MB (target 250)"
    )
    print(f"again, nothing new: {report['no_change_rerun']['wall_s']:.2f} s")
    print(f"reference: sqlite3 fetchmany alone {report['sqlite_fetch_rows_per_s']:,} rows/s")
    print(f"reference: pyarrow writing from memory {report['pyarrow_write_rows_per_s']:,} rows/s")
    print(f"dataset equals v_scalars (count, sums): {report['check']}")


if __name__ == "__main__":
    main()
