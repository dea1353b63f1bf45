"""The viewer (#46): its two speed targets, on a 20M-point store (100 runs x 20 tags x 10k
steps) and on the demo store of ``make demo``.

    .venv/bin/python benchmarks/viewer.py                 # builds both stores, then measures
    .venv/bin/python benchmarks/viewer.py --store S.db    # an existing store of that shape
    .venv/bin/python benchmarks/viewer.py --runs 10 --steps 1000   # a quick look

The 20M-point store is written straight by SQL as ``benchmarks/query.py`` writes it (``TAGS``
set to 20); the demo store is ``sample_logdirs/make_demo.py`` and ``sample_logdirs`` converted.
Printed, for each store:

1. the first chart drawn in headless chromium by ``serve`` with the default selection (the first
   10 runs past 50; ``TBV.timing.firstChart``, ms since navigation): a fresh browser's first
   load, and the median of the reloads after it (target: under 1.5 s);
2. a zoom answered on the server side (``output/viewer/data.chart``, what ``/api/chart.json``
   computes, warm as ``serve`` keeps it), for the default selection at the page's bucket count
   (one a pixel column of the plot area the page measured in that browser): to 10% and 1% of the
   range, p50 and p95 over random ranges and tags (target: p95 under 200 ms); and the whole
   range, what the first chart asks for;
3. beside them, CPU seconds of the same calls, when plotly.js had run and the first chart's
   answer had come (``TBV.timing``), a reference query (count, min and max of ten 10k-point
   series) and the load average, since the host is shared.

``--publish`` adds ``tbconvert publish`` of the 20M-point store (size and time, minutes) and its
first chart from ``file://``.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
DEFAULT_RUNS = 10  # the page's default selection past 50 runs (static/viewer.js)
RELOADS = 5


def build(path: Path, runs: int, steps: int) -> float:
    query.TAGS = TAGS
    return query.build_sqlite(path, runs, steps)


def build_demo(scratch: Path) -> str:
    """The store of ``make demo``, in ``scratch``."""
    logs, store = scratch / "demo_logs", str(scratch / "demo.db")
    commands = (
        [sys.executable, str(REPO / "sample_logdirs" / "make_demo.py"), str(logs)],
        [*TBCONVERT, "tf", "--logdir", str(logs), "--store", store, "-q"],
        [*TBCONVERT, "tf", "--logdir", str(REPO / "sample_logdirs"), "--store", store, "-q"],
    )
    for command in commands:
        subprocess.run(command, check=True, capture_output=True)
    return store


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000}


def chart_timings(store: str, buckets: int, repeat: int) -> dict[str, Any]:
    """The default selection's charts, warm as ``serve`` is (every series' last attempt read
    once before): the whole range and zooms to 10% and 1%, wall and CPU p50 and p95."""
    rng = random.Random(46)
    results: dict[str, Any] = {"buckets": buckets}
    attempts: dict[int, Any] = {}
    with open_store(store) as opened:
        data.make_read_only(opened)
        overview = data.overview(opened)
        run_ids = [row["id"] for row in overview["runs"]]
        chosen = run_ids[:DEFAULT_RUNS] if len(run_ids) > 50 else run_ids
        tags = overview["tags"]
        for tag in tags:
            data.chart(opened, tag, chosen, "step", None, None, 1, attempts)
        results["lines"] = len(data.chart(opened, tags[0], chosen, "step")["lines"])
        for share in (1.0, 0.1, 0.01):
            wall, cpu = [], []
            for _ in range(repeat):
                tag = rng.choice(tags)
                low = high = None
                if share < 1:
                    first, last = steps_of(opened, tag, chosen)
                    width = (last - first) * share
                    low = rng.uniform(first, last - width)
                    high = low + width
                started, processed = time.perf_counter(), time.process_time()
                data.chart(opened, tag, chosen, "step", low, high, buckets, attempts)
                wall.append(time.perf_counter() - started)
                cpu.append(time.process_time() - processed)
            label = "whole range" if share == 1 else f"zoom to {share:.0%}"
            results[label] = {**percentiles(wall), "cpu": percentiles(cpu)}
        results["reference_ms"] = reference(opened)
    return results


def steps_of(opened: Any, tag: str, run_ids: Sequence[int]) -> tuple[int, int]:
    """The first and last step of ``tag`` over the runs (what a zoom cuts a share of)."""
    with opened.connect() as conn:
        chosen = [s.id for s in data.tag_series(conn, tag, run_ids)]
        row = conn.exec_driver_sql(
            "SELECT min(first_step), max(last_step) FROM series_summaries "
            f"WHERE series_id IN ({', '.join(map(str, chosen))})"
        ).one()
    return int(row[0]), int(row[1])


def reference(opened: Any) -> float:
    """A query to hold the figures against on the same host: count, min and max of ten
    10k-point series (one index range scan, no thinning), median of 5, in ms."""
    samples = []
    with opened.connect() as conn:
        for _ in range(5):
            started = time.perf_counter()
            conn.exec_driver_sql(
                "SELECT count(*), min(value), max(value) FROM scalars WHERE series_id <= 10"
            ).all()
            samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def first_chart(url: str, reloads: int = RELOADS) -> dict[str, Any]:
    """A fresh browser's first chart at ``url``, then the median of ``reloads`` more, and the
    bucket count the page asked for (its plot area in pixels)."""
    from tests.support.viewer_browser import browser, wait_ready

    timings = []
    with browser() as driver:
        for _ in range(reloads + 1):
            driver.get("about:blank")
            driver.get(url)
            wait_ready(driver)
            timings.append(driver.execute_script("return TBV.timing"))
        buckets = driver.execute_script(
            "return document.querySelector('.panel .plot').clientWidth - 60"
        )
    again = {key: statistics.median(t.get(key, 0) for t in timings[1:]) for key in timings[0]}
    return {"first": timings[0], "again": again, "buckets": buckets}


@contextmanager
def serving(store: str) -> Iterator[str]:
    from tests.support.viewer_browser import served

    with served(store) as base:
        yield base


def measure(store: str, repeat: int) -> dict[str, Any]:
    """Both targets on one store: the browser's first, whose bucket count the server's
    timings then use."""
    with serving(store) as base:
        browser = first_chart(f"{base}/")
    charts = chart_timings(store, int(browser["buckets"]), repeat)
    return {"first_chart": browser, "chart": charts, "load_average": os.getloadavg()}


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
    first = first_chart(f"{(target / 'index.html').as_uri()}#tags=tag_000")
    return {
        "seconds": seconds,
        "cpu_seconds": after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime,
        "load_average": os.getloadavg(),
        "bytes": size,
        "data_bytes": data_size,
        "files": len(files),
        "first_chart": first,
    }


def table(name: str, found: dict[str, Any]) -> str:
    """The targets' figures of one store as Markdown lines."""
    browser, charts = found["first_chart"], found["chart"]
    load = " / ".join(f"{value:.1f}" for value in found["load_average"])
    lines = [
        f"{name}: {charts['lines']} line{'' if charts['lines'] == 1 else 's'} a chart, "
        f"{charts['buckets']} buckets, "
        f"load average {load}, reference query {charts['reference_ms']:.1f} ms",
        "| figure | measured | target |",
        "|---|---|---|",
        f"| first chart in chromium, first load / again (median of {RELOADS}) | "
        f"{browser['first']['firstChart']:.0f} / {browser['again']['firstChart']:.0f} ms "
        "| < 1500 ms |",
        "| (plotly.js run / the first chart's answer in, first load / again) | "
        f"{browser['first'].get('plotly', 0):.0f}, {browser['first']['firstAnswer']:.0f} / "
        f"{browser['again'].get('plotly', 0):.0f}, {browser['again']['firstAnswer']:.0f} ms | |",
    ]
    for label in ("whole range", "zoom to 10%", "zoom to 1%"):
        case = charts[label]
        target = "< 200 ms (p95)" if label.startswith("zoom") else ""
        lines.append(
            f"| {label}, server side p50 / p95 (CPU p50 / p95) | {case['p50_ms']:.0f} / "
            f"{case['p95_ms']:.0f} ms ({case['cpu']['p50_ms']:.0f} / "
            f"{case['cpu']['p95_ms']:.0f}) | {target} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="an existing SQLite store of the benchmark's shape")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20, help="random ranges per case")
    parser.add_argument("--publish", action="store_true", help="time `tbconvert publish` too")
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        store = arguments.store or str(Path(scratch) / "viewer.db")
        results: dict[str, Any] = {"points": arguments.runs * TAGS * arguments.steps}
        if not arguments.store:
            results["build_seconds"] = build(Path(store), arguments.runs, arguments.steps)
        results["big"] = measure(store, arguments.repeat)
        results["demo"] = measure(build_demo(Path(scratch)), arguments.repeat)
        if arguments.publish:
            results["publish"] = publish(store, Path(scratch) / "site")
    if arguments.json:
        print(json.dumps(results, indent=2))
        return 0
    print(table(f"{results['points']:,} points", results["big"]))
    print()
    print(table("the demo store", results["demo"]))
    if arguments.publish:
        print(json.dumps(results["publish"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
