"""Run selection on a store of 100,000 runs (#49): ``--where`` with a metric aggregate, ``--top
N --by``, against the target of 100 ms, on SQLite and a local PostgreSQL server.

    .venv/bin/python benchmarks/selection.py             # 100,000 runs, 2M points, both backends
    .venv/bin/python benchmarks/selection.py --runs 10000 --skip-pg   # a quick look
    .venv/bin/python benchmarks/selection.py --skip-sqlite --pg-url postgresql+psycopg://...

The store is written straight by SQL, as ``benchmarks/query.py`` writes its own: the schema of
the migrations, then per run two event files (the run's own and ``val``), a ``loss`` series in
the run's context and an ``acc`` series in ``val`` (``--steps`` points each), and an hparams
series whose params are ``lr`` (a number) and ``opt`` (text); the series summaries are filled by
``tbconvert.writing.series_summaries.recount_sql``, the statements the tests use to check that
the writer keeps them exact, the current summaries by ``writing.current_summaries.fill``
(what revision 0016 runs) and the params a selection reads by ``writing.run_params.fill``
(revision 0018).  One run in a hundred was resumed: its ``loss`` has a second
attempt, logged in the same file from a lower step (its summary's ``maybe_resumed``), which
``--resumed current`` (the default) reads from its current summary.

Each selection is timed warm in one process, as a user waits for it minus the interpreter's
start: ``Store.runs`` with the selection (``Store.select_runs`` and the listing ``tbconvert runs
--where`` prints), with ``--resumed all`` and ``current``.  The runs are interleaved (one of
each query per round, ``--rounds`` rounds), beside a reference query that reads every series
summary once, so that a busy host's figures can be read as ratios; each line gives the p50 and
p95 of the wall time, the median CPU time of this process plus, on the local server, of
PostgreSQL's processes, and the load average.  Then the whole ``tbconvert runs --where ...
--top 10 --by ...`` command once (start-up included).

PostgreSQL is a throwaway local server (``tests/support/pgserver.py``), or ``--pg-url``; its
store is vacuumed after the load, as autovacuum leaves a store that has settled (an index-only
scan needs the visibility map).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from query import _OWNER_SQL, create_schema  # noqa: E402

from tbconvert.rows import POINT_TABLES  # noqa: E402
from tbconvert.writing.series_summaries import recount_sql  # noqa: E402

try:  # revision 0016 on: the current summaries of the resumed series
    from tbconvert.writing.current_summaries import fill
    from tbconvert.writing.statements import Statements
except ImportError:  # a checkout from before it, measured for a comparison
    fill = None  # type: ignore[assignment]
try:  # revision 0018 on: the value a selection reads of each run's param
    from tbconvert.writing import run_params
except ImportError:
    run_params = None  # type: ignore[assignment]

TARGET = 0.1  # seconds
RESUMED_EVERY = 100  # one run in this many has a resumed loss
OPTIMIZERS = ("adam", "sgd", "rmsprop")
# What is timed: name, keywords of Store.select_runs; each with --resumed all and current.
SELECTIONS: list[tuple[str, dict[str, Any]]] = [
    ("where min(loss) < 0.169", {"where": "min(loss) < 0.169"}),
    (
        "where lr, opt and last(acc, val)",
        {"where": 'lr < 1e-3 and opt == "adam" and last(acc, context="val") > 0.95'},
    ),
    (
        "top 10 by -min(loss), where run glob",
        {"where": 'run % "run_0000*"', "top": 10, "by": "-min(loss)"},
    ),
    ("top 10 by -min(loss)", {"top": 10, "by": "-min(loss)"}),
    ("where mean(loss) < 0.2", {"where": "mean(loss) < 0.2"}),
    ("where argmin(loss) < 5", {"where": "argmin(loss) < 5"}),
]
# The yardstick measured beside them, so that a busy host's figures can be read as ratios:
# every series summary read once (what a selection must not do more than a few times).
REFERENCE = "SELECT count(*), sum(points) FROM series_summaries"
RESUMED = ("all", "current")
COMMAND = ["runs", "--where", "min(loss) < 0.169", "--top", "10", '--by=-max(acc, context="val")']


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def owners(runs: int) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of runs, contexts, series and event files: run r has series 3r+1 (loss), 3r+2
    (acc in val), 3r+3 (hparams), and files 2r+1 (its own) and 2r+2 (val)."""
    return {
        "runs": [
            (r + 1, "bench", "host", "/bench", f"run_{r:06d}", "", f"run_{r:06d}")
            for r in range(runs)
        ],
        "contexts": [(1, ""), (2, "val")],
        "series": [
            row
            for r in range(runs)
            for row in (
                (3 * r + 1, r + 1, 1, "loss", "scalars", "float32"),
                (3 * r + 2, r + 1, 2, "acc", "scalars", "float32"),
                (3 * r + 3, r + 1, 1, "hparams", "hparams", None),
            )
        ],
        "event_files": [
            (2 * r + 1 + c, r + 1, 1 + c, f"{c}/events.{r}", 1000, 0, 1000, 30, 0, "ok")
            for r in range(runs)
            for c in (0, 1)
        ],
    }


def points(runs: int, steps: int) -> Iterator[tuple[Any, ...]]:
    """Scalar rows: a decaying loss (a second attempt from half-way for resumed runs) and
    a rising accuracy, each run at its own rate."""
    for r in range(runs):
        rate = 0.05 + (r % 997) / 2000
        attempts = [range(steps)]
        if r % RESUMED_EVERY == 0:
            attempts.append(range(steps // 2, steps))
        offset = 0
        for attempt, span in enumerate(attempts):
            for step in span:
                offset += 40
                loss = 1.0 / (1.0 + rate * step) + 0.05 * attempt
                yield (3 * r + 1, step, 2 * r + 1, offset, 0, 1.7e9 + step, loss)
        for step in range(steps):
            accuracy = 1.0 - 0.9 / (1.0 + rate * step)
            yield (3 * r + 2, step, 2 * r + 2, 40 * step, 0, 1.7e9 + step, accuracy)


def params(runs: int) -> Iterator[tuple[Any, ...]]:
    for r in range(runs):
        lr = 10 ** -(1 + (r % 5))
        yield (3 * r + 3, 0, 2 * r + 1, 0, 0, None, "lr", repr(lr), lr, "number")
        yield (3 * r + 3, 0, 2 * r + 1, 0, 1, None, "opt", OPTIMIZERS[r % 3], None, "string")


_SQL = {
    **_OWNER_SQL,
    "scalars": "INSERT INTO scalars (series_id, step, file_id, record_offset, value_index, "
    "wall_time, value) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "params": "INSERT INTO params (series_id, step, file_id, record_offset, value_index, "
    "wall_time, key, value, value_num, value_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
}


def build_sqlite(path: Path, runs: int, steps: int) -> float:
    started = time.perf_counter()
    create_schema(str(path))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    for table, rows in owners(runs).items():
        db.executemany(_SQL[table], rows)
    db.executemany(_SQL["scalars"], points(runs, steps))
    db.executemany(_SQL["params"], params(runs))
    for statement in recount_sql("sqlite", POINT_TABLES):
        db.execute(statement)
    if fill is not None:
        fill(Statements(lambda: db, pyformat=False))
    if run_params is not None:
        run_params.fill(Statements(lambda: db, pyformat=False), "sqlite")
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return time.perf_counter() - started


def build_postgres(url: str, runs: int, steps: int) -> float:
    import psycopg

    started = time.perf_counter()
    create_schema(url)
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as db:
        tables = {**owners(runs), "scalars": points(runs, steps), "params": params(runs)}
        for table, rows in tables.items():
            columns = _SQL[table].split("(", 1)[1].split(")", 1)[0]
            with db.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        for statement in recount_sql("postgresql", POINT_TABLES):
            db.execute(statement)  # type: ignore[arg-type]
        if fill is not None:
            fill(Statements(lambda: db, pyformat=True))
        if run_params is not None:
            run_params.fill(Statements(lambda: db, pyformat=True), "postgresql")
        db.execute("ANALYZE")
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as db:
        db.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


class ServerClock:
    """CPU seconds a local PostgreSQL server spent: its postmaster with the children it
    reaped (parallel workers) and the processes still running; 0 without a server."""

    def __init__(self, postmaster: int | None) -> None:
        self.postmaster = postmaster

    def seconds(self) -> float:
        if self.postmaster is None:
            return 0.0
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            pid = int(stat.parent.name)
            if pid == self.postmaster:
                ticks += sum(int(field) for field in fields[11:15])  # with reaped children
            elif int(fields[1]) == self.postmaster:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")


def timed_rounds(
    runs: dict[str, Callable[[], Any]], rounds: int, clock: ServerClock
) -> dict[str, dict[str, Any]]:
    """Each callable once to warm up, then ``rounds`` rounds of one call each, interleaved:
    p50 and p95 wall seconds, median CPU seconds (here and the server's), the last result."""
    results = {name: run() for name, run in runs.items()}
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            server, mine, started = clock.seconds(), time.process_time(), time.perf_counter()
            results[name] = run()
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(time.process_time() - mine + clock.seconds() - server)
    return {
        name: {
            "p50": statistics.median(walls[name]),
            "p95": statistics.quantiles(walls[name], n=20, method="inclusive")[18],
            "cpu": statistics.median(cpus[name]),
            "runs": len(results[name]) if isinstance(results[name], list) else None,
        }
        for name in runs
    }


def measure(store: str, rounds: int, clock: ServerClock) -> dict[str, Any]:
    import tbconvert
    from tbconvert.query.selection import RunSelection

    figures: dict[str, Any] = {"load_average": os.getloadavg()}
    with tbconvert.open_store(store) as opened:
        runs: dict[str, Callable[[], Any]] = {"reference": lambda: opened.query(REFERENCE)}
        for resumed in RESUMED:
            for name, keywords in SELECTIONS:
                chosen = RunSelection(**keywords, resumed=resumed)
                runs[f"{name}, --resumed {resumed}"] = lambda c=chosen: opened.runs(None, c)
        figures |= timed_rounds(runs, rounds, clock)
    figures["load_average_after"] = os.getloadavg()
    reference = figures["reference"]["p50"]
    loads = figures["load_average"] + figures["load_average_after"]
    _log(
        f"  load average {loads[0]:.1f} {loads[1]:.1f} {loads[2]:.1f} (before), "
        f"{loads[3]:.1f} {loads[4]:.1f} {loads[5]:.1f} (after); {rounds} rounds"
    )
    _log(f"  {'':55} {'p50':>8} {'p95':>8} {'CPU':>8}  {'runs':>5}  {'/ref':>5}")
    for name in runs:
        entry = figures[name]
        verdict = "" if name == "reference" else ("PASS" if entry["p50"] < TARGET else "MISS")
        label = f"reference: {REFERENCE}" if name == "reference" else name
        _log(
            f"  {label[:55]:55} {entry['p50'] * 1000:6.1f}ms {entry['p95'] * 1000:6.1f}ms "
            f"{entry['cpu'] * 1000:6.1f}ms  {entry['runs'] or '':>5}  "
            f"x{entry['p50'] / reference:4.1f}  {verdict}"
        )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tbconvert", *COMMAND, "--store", store, "--json"],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    wall = time.perf_counter() - started
    figures["command"] = {"seconds": wall, "runs": len(json.loads(done.stdout))}
    _log(f"  {'tbconvert ' + ' '.join(COMMAND):45} {wall * 1000:8.1f} ms (whole process)")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--skip-pg", action="store_true", help="SQLite only")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--rounds", type=int, default=20, help="timed calls of each query")
    parser.add_argument("--pg-url", help="a PostgreSQL database to fill, not a local server")
    parser.add_argument("--json", action="store_true", help="results as JSON on stdout")
    args = parser.parse_args(argv)
    work = REPO / "benchmarks" / "data" / f"selection-{args.runs}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    report: dict[str, Any] = {"runs": args.runs, "steps": args.steps, "target": TARGET}
    if not args.skip_sqlite:
        path = work / "store.db"
        _log(f"writing {args.runs:,} runs into SQLite ...")
        report["sqlite_build_seconds"] = build_sqlite(path, args.runs, args.steps)
        _log("SQLite:")
        report["sqlite"] = measure(str(path), args.rounds, ServerClock(None))
    if not args.skip_pg:
        report["postgresql"] = _postgres(args)
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _postgres(args: argparse.Namespace) -> dict[str, Any]:
    """Fill and measure a PostgreSQL store: ``--pg-url``'s, or a local server's."""
    if args.pg_url:
        _log(f"writing {args.runs:,} runs into PostgreSQL ...")
        build_postgres(args.pg_url, args.runs, args.steps)
        _log("PostgreSQL (--pg-url; the server's CPU time is not counted):")
        return measure(args.pg_url, args.rounds, ServerClock(None))
    from tests.support.pgserver import PostgresServer

    server = PostgresServer.start()
    try:
        url = server.new_database("selection")
        _log(f"writing {args.runs:,} runs into PostgreSQL ...")
        build_postgres(url, args.runs, args.steps)
        postmaster = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
        _log("PostgreSQL (local server; CPU: this process and the server's):")
        return measure(url, args.rounds, ServerClock(postmaster))
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
