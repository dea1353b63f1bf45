"""The viewer (#46) on a 20M-point store: 100 runs x 20 tags x 10k steps.

    .venv/bin/python benchmarks/viewer.py                 # builds the store, then measures
    .venv/bin/python benchmarks/viewer.py --store S.db    # an existing store of that shape
    .venv/bin/python benchmarks/viewer.py --runs 10 --steps 1000   # a quick look

The store is written straight by SQL as ``benchmarks/query.py`` writes it (``TAGS`` set to
20).  Measured:

1. a chart's answer on the server side (``output/viewer/data.chart``, what ``/api/chart.json``
   computes, warm): the whole range and zooms to 10% and 1% of it, 1000 buckets, for one run
   and for every run, p50 and p95 over 20 random ranges each (target: a zoom under 200 ms at
   p95);
2. ``tbconvert publish`` of the whole store: its size (target: 10 MB) and time;
3. in headless chromium: the first chart drawn by ``serve`` and by the published page opened
   from ``file://`` (``TBV.timing.firstChart``, ms since navigation; targets 1.5 s and 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import query  # noqa: E402

from tbconvert import open_store  # noqa: E402
from tbconvert.output.viewer import data  # noqa: E402

TAGS = 20
TBCONVERT = [sys.executable, "-m", "tbconvert"]


def build(path: Path, runs: int, steps: int) -> float:
    query.TAGS = TAGS
    return query.build_sqlite(path, runs, steps)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def chart_timings(store: str, steps: int, repeat: int = 20) -> dict[str, Any]:
    """Each case's p50 and p95, warm as ``serve`` is: every series' last attempt read once
    before (the server keeps them between charts)."""
    rng = random.Random(46)
    results: dict[str, Any] = {}
    attempts: dict[int, Any] = {}
    with open_store(store) as opened:
        data.make_read_only(opened)
        run_ids = [row["run_id"] for row in opened.runs()]
        for tag in range(TAGS):
            data.chart(opened, f"tag_{tag:03d}", run_ids, "step", 0, 0, 1, attempts)
        cases = (("1 run", run_ids[:1]), ("10 runs", run_ids[:10]), ("all runs", run_ids))
        for runs_label, chosen in cases:
            for share in (1.0, 0.1, 0.01):
                samples = []
                for _ in range(repeat):
                    width = steps * share
                    low = rng.uniform(0, steps - width) if share < 1 else None
                    high = None if low is None else low + width
                    tag = f"tag_{rng.randrange(TAGS):03d}"
                    started = time.perf_counter()
                    data.chart(opened, tag, chosen, "step", low, high, 1000, attempts)
                    samples.append(time.perf_counter() - started)
                results[f"{runs_label}, {share:.0%} of the range"] = percentiles(samples)
        results["reference"] = reference(opened)
    results["load_average"] = os.getloadavg()
    return results


def reference(opened: Any) -> dict[str, float]:
    """A query to hold the figures against on the same host: count, min and max of ten
    10k-point series (one index range scan, no thinning), median of 5."""
    samples = []
    with opened.connect() as conn:
        for _ in range(5):
            started = time.perf_counter()
            conn.exec_driver_sql(
                "SELECT count(*), min(value), max(value) FROM scalars WHERE series_id <= 10"
            ).all()
            samples.append(time.perf_counter() - started)
    return {"median_ms": statistics.median(samples) * 1000}


def publish(store: str, target: Path) -> dict[str, Any]:
    """The bundle's size and the time to write it: wall and CPU seconds of the child process
    (the host is shared), with the load average beside them."""
    import resource

    started = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [*TBCONVERT, "publish", "--store", store, "-o", str(target), "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    files = [path for path in target.rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files)
    data_size = sum(path.stat().st_size for path in (target / "data").iterdir())
    return {
        "seconds": seconds,
        "cpu_seconds": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime,
        "load_average": os.getloadavg(),
        "bytes": size,
        "data_bytes": data_size,
        "files": len(files),
    }


def first_chart(url: str) -> float:
    from tests.support.viewer_browser import browser, wait_ready

    with browser() as driver:
        driver.get(url)
        wait_ready(driver)
        return float(driver.execute_script("return TBV.timing.firstChart"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="an existing SQLite store of the benchmark's shape")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20, help="random ranges per case")
    parser.add_argument("--charts-only", action="store_true", help="only the server's timings")
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        store = arguments.store or str(Path(scratch) / "viewer.db")
        results: dict[str, Any] = {"points": arguments.runs * TAGS * arguments.steps}
        if not arguments.store:
            results["build_seconds"] = build(Path(store), arguments.runs, arguments.steps)
        results["chart"] = chart_timings(store, arguments.steps, arguments.repeat)
        if arguments.charts_only:
            print(json.dumps(results, indent=2))
            return 0
        site = Path(scratch) / "site"
        results["publish"] = publish(store, site)
        results["first_chart_ms"] = {
            "published (file://)": first_chart(f"{(site / 'index.html').as_uri()}#tags=tag_000")
        }
        with query_server(store) as base:
            results["first_chart_ms"]["serve"] = first_chart(f"{base}/#tags=tag_000")
    if arguments.json:
        print(json.dumps(results, indent=2))
    else:
        print(json.dumps(results, indent=2), file=sys.stderr)
    return 0


def query_server(store: str) -> Any:
    from tests.support.viewer_browser import served

    return served(store)


if __name__ == "__main__":
    sys.exit(main())
