"""Thinning one long scalar series in SQL (#49): what the viewer's zoom and ``tbconvert mcp``'s
``get_series`` ask, timed on SQLite and a local PostgreSQL server.

    .venv/bin/python benchmarks/thinning.py                  # 1M points, both backends
    .venv/bin/python benchmarks/thinning.py --points 200000 --skip-pg

The store holds one series written straight by SQL (``tests/support/big_series.py``: a noisy
decaying curve with NaN, infinite and spike points), in step order, so that ``current`` finds no
restart: its figures are what every series that was never resumed costs.  Each request is
``thin_series(conn, 1, 500 buckets, ...)`` (at most 2,500 points back), warm, median of 3:

- the whole series, ``resumed="all"``;
- the whole series, ``resumed="current"``, its last attempt read anew (a first view), then
  with the attempt of the first answer passed back (the viewer's next request);
- zooms into 10 %, 1 % and 0.1 % of the steps, with the attempt passed back.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import tbconvert  # noqa: E402
from tbconvert.query.thinning import Thinned, thin_series  # noqa: E402
from tests.support.big_series import build_series_store, curve  # noqa: E402

BUCKETS = 500


def timed(run: Callable[[], Thinned], repeat: int = 3) -> tuple[float, Thinned]:
    """Median wall seconds of ``repeat`` runs, and the last answer."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def measure(store: str, points: int) -> dict[str, Any]:
    """The requests of the module's docstring on one store: ``{name: (ms, points back)}``."""
    last = (points - 1) * 10
    figures: dict[str, Any] = {}
    with tbconvert.open_store(store) as opened, opened.connect() as conn:

        def thin(**options: Any) -> Callable[[], Thinned]:
            return lambda: thin_series(conn, 1, BUCKETS, **options)

        for name, options in (
            ("whole, all", {"resumed": "all"}),
            ("whole, current, attempt read", {}),
        ):
            seconds, result = timed(thin(**options))
            figures[name] = (round(seconds * 1000, 1), len(result.points))
        attempt = result.attempt
        ranges = {"whole": (0, last), "10 %": (0, last // 10), "1 %": (0, last // 100)}
        ranges["0.1 %"] = (last // 2, last // 2 + last // 1000)
        for name, (lo, hi) in ranges.items():
            seconds, result = timed(thin(lo=lo, hi=hi, attempt=attempt))
            figures[f"{name}, current, attempt passed"] = (
                round(seconds * 1000, 1),
                len(result.points),
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--skip-pg", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    steps, walls, values = curve(args.points)
    report: dict[str, Any] = {"points": args.points, "buckets": BUCKETS}
    with tempfile.TemporaryDirectory() as work:
        path = str(Path(work) / "long.db")
        build_series_store(path, steps, walls, values)
        report["sqlite"] = measure(path, args.points)
    if not args.skip_pg:
        from tests.support.pgserver import PostgresServer

        server = PostgresServer.start()
        try:
            url = server.new_database("thinning")
            build_series_store(url, steps, walls, values)
            server.execute("ANALYZE", url.rsplit("/", 1)[1])
            report["postgresql"] = measure(url, args.points)
        finally:
            server.stop()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.points:,} points, {BUCKETS} buckets: ms (median of 3), points back")
    print("| request | SQLite | PostgreSQL |\n|---|---|---|")
    for name, (ms, kept) in report["sqlite"].items():
        other = report.get("postgresql", {}).get(name)
        pg = f"{other[0]} ms ({other[1]})" if other else "-"
        print(f"| {name} | {ms} ms ({kept}) | {pg} |")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
