"""``tbconvert export dataset`` on a store of several million points (issue #47).

    python benchmarks/dataset.py                 # 5 copies of the 1M-event logdir: 5M points
    python benchmarks/dataset.py --copies 20     # 20M points
    python benchmarks/dataset.py --store S.db    # an existing SQLite store
    python benchmarks/dataset.py --repeat 3 --json

The store is the benchmark's 1M-event logdir (``generate.ensure_scalars``) converted ``--copies``
times under distinct ``--source`` names.  Each measurement runs in a subprocess of its own,
its wall time by ``perf_counter`` and its CPU and peak RSS from ``wait4`` of that very child
(``run.measure``):

1. ``export_dataset`` into an empty directory, ``--repeat`` times each way, alternating: the
   scalars read by ADBC's SQLite driver in a child process (``output/sqlite_arrow``, when
   ``adbc-driver-sqlite`` is installed) and through Python's ``sqlite3``; medians of wall and
   CPU (the export's and its reader child's), rows/s, peak RSS of the export and of its
   child (target: 1M rows/s, under 250 MB);
2. ``tbconvert export dataset --store S -o D -q`` again into the last dataset, nothing new
   (target: nothing written);
3. references from the same run: the Python SQLite driver merely fetching the scalars' rows
   (``fetchmany``, the columns the export reads: the floor of any reader through it), and
   pyarrow writing the same rows, already in memory, as one Parquet file (its own time).

The dataset's scalars are then counted and summed with pyarrow against the store's
``v_scalars``: a figure over wrong output is marked CHECK.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import generate
from run import measure

TBCONVERT = [sys.executable, "-m", "tbconvert"]
EXPORT = """
import json, resource, sys
import tbconvert
from tbconvert.output.dataset import export_dataset
with tbconvert.open_store(sys.argv[1]) as store:
    export_dataset(store, sys.argv[2], progress=False, arrow_scan_from=int(sys.argv[3]))
child = resource.getrusage(resource.RUSAGE_CHILDREN)
own = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"export_mb": own.ru_maxrss / 1024, "reader_mb": child.ru_maxrss / 1024,
                  "reader_cpu_s": child.ru_utime + child.ru_stime}))
"""
# How the scalars are read: from 0 points on by the ADBC child, or never (Python's sqlite3).
READERS = {"adbc": "0", "sqlite3": str(2**62)}
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


def compare_readers(
    store: Path, scratch: Path, repeat: int
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Both readers, alternating, ``repeat`` times each: medians, and each one's last dataset."""
    runs: dict[str, list[Any]] = {name: [] for name in READERS}
    targets = {}
    for attempt in range(repeat):
        for name, scan_from in READERS.items():
            target = targets[name] = scratch / f"dataset-{name}-{attempt}"
            command = [sys.executable, "-c", EXPORT, str(store), str(target), scan_from]
            measured = measure(command)
            if not measured.ok:
                raise SystemExit(f"export ({name}) failed: {measured.stderr}")
            runs[name].append((measured, measured.last_json()))
            if attempt + 1 < repeat:
                shutil.rmtree(target)
    figures = {}
    for name, measured in runs.items():
        walls = [m.wall for m, _ in measured]
        figures[name] = {
            "wall_s": round(statistics.median(walls), 2),
            "walls": [round(wall, 2) for wall in walls],
            "cpu_s": round(statistics.median(m.cpu for m, _ in measured), 2),
            "reader_cpu_s": round(statistics.median(j["reader_cpu_s"] for _, j in measured), 2),
            "export_mb": round(max(j["export_mb"] for _, j in measured)),
            "reader_mb": round(max(j["reader_mb"] for _, j in measured)),
        }
    return figures, targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
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
        readers, targets = compare_readers(store, Path(scratch), options.repeat)
        target = targets["adbc"]
        export = [*TBCONVERT, "export", "dataset", "--store", str(store), "-o", str(target), "-q"]
        again = measure(export)
        fetched = child_json(FETCH, str(store))
        written = child_json(WRITE, str(store), str(Path(scratch) / "one.parquet"))
        found = {name: child_json(CHECK, str(path)) for name, path in targets.items()}
        rows = expected[0]
        same = all(
            sums[:2] == list(expected[:2]) and abs(sums[2] - expected[2]) < 1e-6 * rows
            for sums in found.values()
        )
        report = {
            "points": rows,
            "export": {
                name: {**figures, "rows_per_s": round(rows / figures["wall_s"])}
                for name, figures in readers.items()
            },
            "no_change_rerun": again.brief(),
            "sqlite_fetch_rows_per_s": round(fetched["rows"] / fetched["seconds"]),
            "pyarrow_write_rows_per_s": round(written["rows"] / written["seconds"]),
            "dataset_bytes": sum(p.stat().st_size for p in target.rglob("*") if p.is_file()),
            "check": "ok" if same else "CHECK",
        }
    if options.json:
        print(json.dumps(report, indent=1))
        return
    print(f"points: {rows:,} ({report['dataset_bytes'] / 2**20:.0f} MB of Parquet)")
    for name, figures in report["export"].items():
        print(
            f"export dataset, scalars read by {name}: {figures['wall_s']:.1f} s wall "
            f"(median of {figures['walls']}), {figures['cpu_s']:.1f} s CPU of which the reader "
            f"child {figures['reader_cpu_s']:.1f} s, {figures['rows_per_s']:,} rows/s (target "
            f"1,000,000), peak RSS {figures['export_mb']} MB (target 250), reader child "
            f"{figures['reader_mb']} MB"
        )
    print(f"again, nothing new: {report['no_change_rerun']['wall_s']:.2f} s")
    print(f"reference: sqlite3 fetchmany alone {report['sqlite_fetch_rows_per_s']:,} rows/s")
    print(f"reference: pyarrow writing from memory {report['pyarrow_write_rows_per_s']:,} rows/s")
    print(f"both datasets equal v_scalars (count, sums): {report['check']}")


if __name__ == "__main__":
    main()
