"""Reading a big store (#16): what users run against it, timed next to its target.

    .venv/bin/python benchmarks/query.py            # 20M scalar points (20 runs x 100 tags)
    .venv/bin/python benchmarks/query.py --big      # 100M points (100 runs x 100 tags)
    .venv/bin/python benchmarks/query.py --points 2000000 --skip-pg   # a quick look

The store is written straight by SQL, not by converting logs (20M events would take minutes
to generate and convert, and what is measured here is reading): the schema of the migrations,
one event file per run, ``steps`` points per series in step order, and the series summaries
filled by ``tbconvert.writing.series_summaries.recount_sql``, the statements the tests use to check
that the writer keeps them exact.  The same rows then go into a throwaway local PostgreSQL
server by COPY.

Each query is timed warm, median of 3, with the figure it had before #16 measured in the
same run where it is still expressible: ``v_last_scalars`` as revision 0005 defined it, and
``tbconvert runs``'s count over the point tables.  Then the same after ``ANALYZE``, the store
size per point before and after ``VACUUM``, and datasette's page of every view (through
``tbconvert serve``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tbconvert.output.datasette import QUERIES  # noqa: E402
from tbconvert.rows import POINT_TABLES  # noqa: E402
from tbconvert.writing.series_summaries import recount_sql  # noqa: E402

TBCONVERT = [sys.executable, "-m", "tbconvert"]
TAGS = 100
STEPS = 10_000
# Filled in for the canned queries' forms: a series that exists, and a tag for the others.
PARAMS = {"run_path": "run_007", "context": "", "tag": "tag_042", "step": "5000", "words": "x"}
# Target in seconds (None: reported only, a scan that grows with the store by design).
TARGETS: dict[str, float | None] = {
    "v_last_scalars": 0.2,
    "v_series": 0.2,
    "learning_curve": 0.05,
    "series_overview": 0.2,
    "last_values": 0.2,
    "final_metric_with_params": 0.2,
    "nan_series": None,
    "images_at_step": 0.2,
    "search_texts": None,
    "tbconvert runs": 1.0,
    "tbconvert show": 1.0,
    "Store.runs()": 1.0,
    "Store.describe(RUN)": 1.0,
}
BEFORE = True  # time the forms of before #16 too (minutes at 100M points)
LISTINGS = ("v_runs", "v_series", "v_last_scalars", "v_params")
# Revision 0005's v_last_scalars and the old `runs` count: the "before" of the same run.
OLD_LAST_SCALARS = """
    SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time,
           p.value
    FROM series AS s JOIN runs AS r ON r.id = s.run_id JOIN contexts AS c ON c.id = s.context_id
    JOIN scalars AS p ON p.series_id = s.id
     AND (p.step, p.file_id, p.record_offset, p.value_index) = (
        SELECT q.step, q.file_id, q.record_offset, q.value_index
        FROM scalars AS q JOIN event_files AS f ON f.id = q.file_id
        WHERE q.series_id = s.id
          AND q.step = (SELECT max(m.step) FROM scalars AS m WHERE m.series_id = s.id)
        ORDER BY f.path DESC, q.record_offset DESC, q.value_index DESC LIMIT 1)
"""
OLD_LAST_SCALARS_PG = """
    SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time,
           p.value
    FROM series AS s JOIN runs AS r ON r.id = s.run_id JOIN contexts AS c ON c.id = s.context_id
    CROSS JOIN LATERAL (
        SELECT q.step, q.wall_time, q.value
        FROM scalars AS q JOIN event_files AS f ON f.id = q.file_id
        WHERE q.series_id = s.id
          AND q.step = (SELECT max(m.step) FROM scalars AS m WHERE m.series_id = s.id)
        ORDER BY f.path COLLATE "C" DESC, q.record_offset DESC, q.value_index DESC
        LIMIT 1) AS p
"""
OLD_RUN_COUNTS = (
    "SELECT s.run_id, count(*), min(p.step), max(p.step) FROM scalars AS p "
    "JOIN series AS s ON s.id = p.series_id GROUP BY s.run_id"
)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def points(runs: int, steps: int) -> Iterator[tuple[int, int, int, int, int, float, float]]:
    """Scalar rows in clustered order: a noisy decaying curve per series."""
    import numpy as np

    step = np.arange(steps, dtype=np.int64)
    for run in range(runs):
        for tag in range(TAGS):
            series_id = run * TAGS + tag + 1
            offset = (step * TAGS + tag) * 40 + 24
            wall = 1.7e9 + run * 1e5 + step * 0.5
            value = np.exp(-step / (1000.0 + tag)) + 0.01 * np.sin(step * (tag + 1))
            if tag == 13:  # one series per run goes NaN at its end, for the NaN query
                value[-5:] = np.nan
            yield from zip(
                [series_id] * steps,
                step.tolist(),
                [run + 1] * steps,
                offset.tolist(),
                [0] * steps,
                wall.tolist(),
                value.tolist(),
                strict=True,
            )


def owners(runs: int, steps: int) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of runs, contexts, series and event_files for the generated points."""
    size = steps * TAGS * 40 + 24
    return {
        "runs": [
            (r + 1, "bench", "bench-host", "/bench", f"run_{r:03d}", "", f"run_{r:03d}")
            for r in range(runs)
        ],
        "contexts": [(1, "")],
        "series": [
            (r * TAGS + t + 1, r + 1, 1, f"tag_{t:03d}", "scalars", "float32")
            for r in range(runs)
            for t in range(TAGS)
        ],
        "event_files": [
            (r + 1, r + 1, 1, f"events.out.tfevents.{r}", size, 0, size, steps * TAGS, 0, "ok")
            for r in range(runs)
        ],
    }


_OWNER_SQL = {
    "runs": "INSERT INTO runs (id, source, host, logdir, run_path, group_path, name) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "contexts": "INSERT INTO contexts (id, name) VALUES (?, ?)",
    "series": "INSERT INTO series (id, run_id, context_id, name, plugin, dtype) "
    "VALUES (?, ?, ?, ?, ?, ?)",
    "event_files": "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
    "offset_consumed, records, damaged_records, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
}


def create_schema(url: str) -> None:
    """An empty store of this version, made by the migrations."""
    from tbconvert.store.engine import create_store_engine, store_url
    from tbconvert.store.migrate import ensure_schema

    engine = create_store_engine(store_url(url))
    try:
        ensure_schema(engine)
    finally:
        engine.dispose()


def build_sqlite(path: Path, runs: int, steps: int) -> float:
    """Write the store; returns the seconds it took."""
    started = time.perf_counter()
    create_schema(str(path))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    for table, rows in owners(runs, steps).items():
        db.executemany(_OWNER_SQL[table], rows)
    db.executemany(
        "INSERT INTO scalars (series_id, step, file_id, record_offset, value_index, wall_time, "
        "value) VALUES (?, ?, ?, ?, ?, ?, ?)",
        points(runs, steps),
    )
    for statement in recount_sql("sqlite", POINT_TABLES):
        db.execute(statement)
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return time.perf_counter() - started


def build_postgres(url: str, runs: int, steps: int) -> float:
    """Write the same store into a server database by COPY; returns the seconds."""
    import psycopg

    started = time.perf_counter()
    create_schema(url)
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as db:
        for table, rows in owners(runs, steps).items():
            columns = _OWNER_SQL[table].split("(", 1)[1].split(")", 1)[0]
            with db.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        columns = "series_id, step, file_id, record_offset, value_index, wall_time, value"
        with db.cursor().copy(f"COPY scalars ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int8", "int8", "int4", "float8", "float8"])
            for row in points(runs, steps):
                copy.write_row(row)
        db.execute("UPDATE scalars SET value = NULL WHERE value = 'NaN'")
        for statement in recount_sql("postgresql", POINT_TABLES):
            db.execute(statement)  # type: ignore[arg-type]
        for table in ("runs", "contexts", "series", "event_files"):
            db.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # type: ignore[arg-type]
                f"(SELECT max(id) FROM {table}))"
            )
    return time.perf_counter() - started


def timed(run: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median wall seconds of ``repeat`` runs, and the last result."""
    walls, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls), result


def sql_timings(
    execute: Callable[[str, dict[str, Any]], list[Any]], old_last: str = OLD_LAST_SCALARS
) -> dict[str, Any]:
    """Every view and canned query of the cookbook, with the old forms for reference."""
    results: dict[str, Any] = {}
    for name, sql in (
        ("v_last_scalars", "SELECT * FROM v_last_scalars"),
        ("v_series", "SELECT * FROM v_series"),
    ):
        seconds, rows = timed(lambda sql=sql: execute(sql, {}))
        results[name] = {"seconds": seconds, "rows": len(rows)}
    for name, query in QUERIES.items():
        params = {key: PARAMS[key] for key in query.get("params", [])}
        seconds, rows = timed(lambda sql=query["sql"], params=params: execute(sql, params))
        results[name] = {"seconds": seconds, "rows": len(rows)}
    if BEFORE:
        seconds, rows = timed(lambda: execute(old_last, {}), repeat=1)
        results["v_last_scalars (0005's view)"] = {"seconds": seconds, "rows": len(rows)}
        seconds, rows = timed(lambda: execute(OLD_RUN_COUNTS, {}), repeat=1)
        results["runs' old point count"] = {"seconds": seconds, "rows": len(rows)}
    return results


def sqlite_executor(path: Path) -> Callable[[str, dict[str, Any]], list[Any]]:
    db = sqlite3.connect(path)

    def execute(sql: str, params: dict[str, Any]) -> list[Any]:
        return db.execute(sql, params).fetchall()

    return execute


def postgres_executor(url: str) -> Callable[[str, dict[str, Any]], list[Any]]:
    import psycopg

    db = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True)

    def execute(sql: str, params: dict[str, Any]) -> list[Any]:
        # The cookbook's :name parameters in psycopg's spelling.
        sql = sql.replace("%", "%%") if params else sql
        for key in params:
            sql = sql.replace(f":{key}", f"%({key})s")
        cursor = db.execute(sql, params)  # type: ignore[call-overload]
        return cursor.fetchall() if cursor.description else []

    return execute


def command_timings(store: str) -> dict[str, Any]:
    """``tbconvert runs`` and ``show``, whole commands as a user waits for them (interpreter
    and imports included), and the library calls behind them alone."""
    from tbconvert import open_store

    results = {}
    with open_store(store) as opened:
        for name, call in (
            ("Store.runs()", opened.runs),
            ("Store.describe(RUN)", lambda: opened.describe(PARAMS["run_path"])),
        ):
            seconds, _ = timed(call)
            results[name] = {"seconds": seconds}
    for name, args in (
        ("tbconvert runs", ["runs", "--store", store]),
        ("tbconvert show", ["show", PARAMS["run_path"], "--store", store]),
    ):
        seconds, done = timed(
            lambda args=args: subprocess.run(
                [*TBCONVERT, *args], capture_output=True, text=True, cwd=REPO, check=False
            )
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed: {done.stderr}")
        results[name] = {"seconds": seconds, "lines": len(done.stdout.splitlines())}
    return results


def datasette_pages(path: Path) -> dict[str, Any]:
    """Datasette's page of every view, served by ``tbconvert serve`` (HTML, with the facets
    of the generated metadata): seconds and HTTP status."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*TBCONVERT, "serve", "--store", str(path), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/{path.stem}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base, timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        results = {}
        views = ["v_runs", "v_series", "v_last_scalars", "v_scalars", "v_params", "v_images"]
        views += ["v_histograms", "v_texts", "v_audio", "v_tensors"]
        for view in views:

            def page(view: str = view) -> int:
                try:
                    with urllib.request.urlopen(f"{base}/{view}", timeout=120) as answer:
                        body = answer.read().decode()
                        return 200 if "SQL query took too long" not in body else 408
                except urllib.error.HTTPError as error:
                    return error.code

            seconds, status = timed(page)
            results[f"datasette /{view}"] = {"seconds": seconds, "status": status}
        return results
    finally:
        server.terminate()
        server.wait(timeout=30)


def sqlite_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def table(title: str, results: dict[str, Any], total: int) -> str:
    lines = [f"{title}", f"  {'what':44} {'seconds':>9}  {'target':>7}  verdict"]
    for name, figures in results.items():
        target = TARGETS.get(name.removeprefix("datasette ").split(" (")[0])
        seconds = figures["seconds"]
        if name.startswith("datasette"):
            # Listings must fit in datasette's 1 s limit; a point view's page is its first
            # rows, after datasette gives up counting them at that limit: it must be served.
            target = 1.0 if name.split("/")[1] in LISTINGS else None
            served = figures["status"] == 200
            verdict = "PASS" if served and seconds < (target or math.inf) else "MISS"
        elif target is None:
            verdict = "scan" if name in TARGETS else "before"
        else:
            verdict = "PASS" if seconds < target else "MISS"
        shown = "" if target is None else f"< {target:g}"
        lines.append(f"  {name:44} {seconds:9.3f}  {shown:>7}  {verdict}")
    lines.append(f"  ({total:,} points)")
    return "\n".join(lines)


def _sqlite(path: Path, runs: int, steps: int, total: int) -> dict[str, Any]:
    """Build, time, ANALYZE, time again and VACUUM the SQLite store."""
    report: dict[str, Any] = {}
    _log(f"writing a SQLite store of {total:,} points ...")
    report["sqlite_build_seconds"] = build_sqlite(path, runs, steps)
    report["sqlite_bytes_per_point"] = sqlite_size(path) / total
    results = sql_timings(sqlite_executor(path))
    results.update(command_timings(str(path)))
    results.update(datasette_pages(path))
    report["sqlite"] = results
    print(table("SQLite, as written (no ANALYZE)", results, total), flush=True)
    db = sqlite3.connect(path)
    started = time.perf_counter()
    db.execute("ANALYZE")
    db.commit()
    report["sqlite_analyze_seconds"] = time.perf_counter() - started
    after = sql_timings(sqlite_executor(path))
    after.update(command_timings(str(path)))
    report["sqlite_analyzed"] = after
    print(table("SQLite after ANALYZE", after, total), flush=True)
    started = time.perf_counter()
    db.execute("VACUUM")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # VACUUM's copy of the file sits in the WAL
    db.close()
    report["sqlite_vacuum_seconds"] = time.perf_counter() - started
    report["sqlite_bytes_per_point_vacuumed"] = sqlite_size(path) / total
    print(
        f"SQLite size: {report['sqlite_bytes_per_point']:.1f} bytes/point as written, "
        f"{report['sqlite_bytes_per_point_vacuumed']:.1f} after VACUUM "
        f"({report['sqlite_vacuum_seconds']:.0f} s); ANALYZE took "
        f"{report['sqlite_analyze_seconds']:.1f} s",
        flush=True,
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--big", action="store_true", help="100M points (100 runs)")
    parser.add_argument("--points", type=int, help="about this many points instead")
    parser.add_argument("--skip-pg", action="store_true", help="SQLite only")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--skip-before", action="store_true", help="skip the forms of before #16 (slow)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the SQLite store")
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    args = parser.parse_args(argv)
    runs = 100 if args.big else 20
    steps = STEPS
    if args.points:
        runs = max(1, args.points // (TAGS * STEPS))
        steps = min(STEPS, args.points // TAGS)
    total = runs * TAGS * steps
    global BEFORE
    BEFORE = not args.skip_before
    PARAMS["run_path"] = f"run_{min(7, runs - 1):03d}"
    work = REPO / "benchmarks" / "data" / f"query-{total}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "store.db"
    report: dict[str, Any] = {"points": total, "runs": runs, "series": runs * TAGS}
    if not args.skip_sqlite:
        report.update(_sqlite(path, runs, steps, total))
    if not args.skip_pg:
        from tests.support.pgserver import PostgresServer

        server = PostgresServer.start()
        try:
            url = server.new_database("query")
            _log(f"writing the same {total:,} points into PostgreSQL ...")
            report["postgresql_build_seconds"] = build_postgres(url, runs, steps)
            execute = postgres_executor(url)
            execute("ANALYZE", {})
            pg = sql_timings(execute, OLD_LAST_SCALARS_PG)
            pg.update(command_timings(url))
            report["postgresql"] = pg
            print(table("PostgreSQL (local server, after ANALYZE)", pg, total), flush=True)
        finally:
            server.stop()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
