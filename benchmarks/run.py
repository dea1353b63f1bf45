"""tbconvert's performance benchmark (design §8): one run, same data, each figure by its target.

    python benchmarks/run.py               # default: ~1M scalar events (make bench)
    python benchmarks/run.py --quick       # small data, a smoke run of every measurement
    python benchmarks/run.py --events 2000000 --repeat 3 --json

Measured, each in a fresh subprocess (so imports and caches never leak between them):

1. ``tbconvert tf`` end to end into a fresh SQLite store (``--jobs 1``): scalar events/s and
   points/s, wall and CPU seconds, peak RSS.  The whole command counts: interpreter start,
   imports, schema creation, conversion, exit.
2. TensorBoard's legacy ``EventAccumulator``, every size_guidance 0 (nothing sampled away):
   ``Reload()`` of every event directory, then every scalar (TF1) and every tensor via
   ``make_ndarray`` (TF2) read back.  Whole process too.
3. The ``sqlite3.executemany`` ceiling: the very rows tbconvert stored, inserted with one
   ``executemany`` in one transaction into a fresh WAL database with a ``scalars`` table like
   tbconvert's (same columns, ``WITHOUT ROWID`` primary key).  Only the insert is timed.
4. ``--jobs 2`` against ``--jobs 1`` (same data, fresh stores).
5. ``tbconvert --help`` start-up, median of 5 (after one warm-up run).
6. A no-change re-run over 10,000 tiny files (converted once untimed first).
7. Peak RSS: of (1), and with ``--big`` of a conversion of a ~2 GB logdir.
8. ``tbconvert tf`` end to end into a throwaway PostgreSQL server on 127.0.0.1 (the tests'
   ``tests/support/pgserver.py``; skipped with a note when no server binaries are installed), and
   its
   ratio to (1); also without the point tables' foreign keys, and two converters at once.
9. A sweep: 2,000 runs of 200 scalar events, against EventAccumulator; the per-file overhead.
10. Mixed plugins (scalars, histograms, text, images) against EventAccumulator.
(8-10: ``benchmarks/workloads.py``.)

Both sides run from byte-compiled modules, as after ``pip install``: the harness compiles
``tbconvert/`` first, since an editable install under ``PYTHONDONTWRITEBYTECODE`` would
otherwise compile every module again in every run (about 60 ms), while the reference's
packages in site-packages were compiled when pip installed them.

Rates use wall time (what a user waits for); CPU seconds are printed too because this
2-core machine may be busy with other work (the load average is shown at start and end).
Data is generated once by ``benchmarks/generate.py`` and cached in ``benchmarks/data/``.
"""

from __future__ import annotations

import argparse
import compileall
import datetime as _dt
import json
import multiprocessing
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402  (benchmarks/ is put on the path just above)
import workloads  # noqa: E402

TASKS = HERE / "_tasks.py"

# design §8 targets.
TARGET_RATE = 250_000  # scalar events/s end to end, one process
TARGET_VS_EA = 5.0  # x EventAccumulator
TARGET_VS_CEILING = 0.5  # of the executemany ceiling
TARGET_JOBS_GAIN = 0.95  # jobs 2 wall must be below this fraction of jobs 1 (5%: beyond noise)
TARGET_HELP = 0.5  # s
TARGET_NOCHANGE = 2.0  # s
TARGET_RSS_MB = 300.0
HELP_RUNS = 5


# --------------------------------------------------------------------------- subprocesses


@dataclass
class Measured:
    """One child process, measured from outside."""

    cmd: list[str]
    returncode: int
    wall: float
    cpu: float  # user + system, the child and whatever it waited for
    maxrss_mb: float  # the child's (or its largest waited-for descendant's) peak RSS
    stdout: str
    stderr: str
    extra: dict[str, Any] = field(default_factory=dict)
    # This harness's own peak RSS when the child started.  Linux starts a child's ru_maxrss
    # at its parent's high-water mark (exec keeps the forked mm's), so a child figure at or
    # below it says nothing about the child.
    harness_mb: float = 0.0

    @property
    def rss_known(self) -> bool:
        return self.maxrss_mb > self.harness_mb * 1.01

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_json(self) -> dict[str, Any]:
        """The JSON object on the last non-empty stdout line ({} when there is none)."""
        for line in reversed(self.stdout.splitlines()):
            if line.strip():
                try:
                    value = json.loads(line)
                except ValueError:
                    return {}
                return value if isinstance(value, dict) else {}
        return {}

    def brief(self) -> dict[str, Any]:
        return {
            "returncode": self.returncode,
            "wall_s": round(self.wall, 4),
            "cpu_s": round(self.cpu, 4),
            "maxrss_mb": round(self.maxrss_mb, 1),
        }


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TBCONVERT_STORE", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def measure(cmd: list[str], *, cwd: Path | None = None) -> Measured:
    """Run ``cmd``; wall by perf_counter, CPU and peak RSS from ``wait4`` of that very child
    (so earlier children never contaminate the figure, unlike RUSAGE_CHILDREN)."""
    harness_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=_child_env()
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    return Measured(
        cmd,
        proc.returncode,
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024.0,
        stdout,
        stderr,
        harness_mb=harness_mb,
    )


def generated(ensure: Any, params: Any) -> generate.Dataset:
    """The dataset, generated (when not cached) in a child process: generating here would
    raise this process's high-water mark, which every later child's peak RSS starts from."""
    child = multiprocessing.get_context("fork").Process(
        target=ensure, args=(params,), kwargs={"log": _log}
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"generating the data failed (exit code {child.exitcode})")
    return ensure(params, log=_log)  # cached now: reads the manifest


def compile_package() -> bool:
    """Byte-compile ``tbconvert/`` (into its ``__pycache__``, as pip does for site-packages).

    The bytecode is read even where ``PYTHONDONTWRITEBYTECODE`` is set, which only stops
    the interpreter from writing it."""
    return bool(compileall.compile_dir(REPO / "tbconvert", quiet=1))


def tbconvert_cmd() -> list[str]:
    """The console script next to this interpreter, else ``python -m tbconvert``."""
    script = Path(sys.executable).parent / "tbconvert"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "tbconvert"]


def fresh_store(work: Path, name: str) -> Path:
    path = work / f"{name}.db"
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def convert(logdir: Path, store: Path, jobs: int = 1) -> Measured:
    cmd = [
        *tbconvert_cmd(),
        "tf",
        "--logdir",
        str(logdir),
        "--store",
        str(store),
        "--jobs",
        str(jobs),
        "-q",
        "--json",
    ]
    measured = measure(cmd)
    measured.extra = measured.last_json()
    return measured


def encodings(manifest: dict[str, Any]) -> dict[str, str]:
    """Event directory (relative to the logdir) -> "tf1" or "tf2"."""
    found = {str(Path(f["path"]).parent): f["encoding"] for f in manifest.get("file_list", [])}
    for rel in manifest["event_dirs"]:
        found.setdefault(rel, "tf2" if "_tf2" in rel else "tf1")
    return found


def encoding_logdir(dataset: generate.Dataset, work: Path, encoding: str) -> Path:
    """A logdir of symlinks to the runs of one encoding only (tbconvert follows them)."""
    target = work / f"only-{encoding}"
    target.mkdir()
    runs = sorted(
        {rel.split("/")[0] for rel, enc in encodings(dataset.manifest).items() if enc == encoding}
    )
    for run_dir in runs:
        os.symlink(dataset.logdir / run_dir, target / run_dir)
    return target


def warm_page_cache(logdir: Path) -> int:
    """Read every file once, so no measurement pays for the disk and the first one none more."""
    total = 0
    for root, _dirs, files in os.walk(logdir):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while chunk := f.read(8 << 20):
                    total += len(chunk)
    return total


# --------------------------------------------------------------------------- formatting


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _s(value: float) -> str:
    return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def _git() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "tbconvert", "migrations"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" + uncommitted changes in tbconvert/" if dirty else "")


def _environment() -> dict[str, Any]:
    try:
        from google.protobuf.internal import api_implementation

        backend = api_implementation.Type()
        import google.protobuf

        protobuf = f"{google.protobuf.__version__} ({backend})"
    except ImportError:
        protobuf = "?"
    return {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "commit": _git(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "protobuf": protobuf,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "load_start": os.getloadavg(),
    }


class Report:
    """Rows of the result table and the JSON document, built as measurements come in."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.details: list[str] = []
        self.notes: list[str] = []
        self.results: dict[str, Any] = {}

    def row(self, number: str, what: str, result: str, target: str = "", verdict: str = "") -> None:
        self.rows.append((number, what, result, target, verdict))

    def table(self) -> str:
        widths = [
            max(
                len(r[i])
                for r in [("#", "measurement", "result", "target (§8)", "verdict"), *self.rows]
            )
            for i in range(5)
        ]
        head = ("#", "measurement", "result", "target (§8)", "verdict")
        lines = []
        for i, r in enumerate([head, *self.rows]):
            lines.append("  ".join(cell.ljust(widths[k]) for k, cell in enumerate(r)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _log(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)


def _unknown_rss(what: str, measured: Measured) -> str:
    return (
        f"CHECK: peak RSS of {what} ({measured.maxrss_mb:,.0f} MB) is not above this "
        f"harness's own ({measured.harness_mb:,.0f} MB), which a child's figure starts from"
    )


def _failed(what: str, measured: Measured) -> str:
    tail = "\n".join((measured.stderr or measured.stdout).strip().splitlines()[-8:])
    return f"{what} failed (exit {measured.returncode}):\n{tail}"


# --------------------------------------------------------------------------- the benchmark


# What ``--only`` can name; the big logdir's conversion (1) always runs, as the sweep's
# per-file overhead is measured against it.
PARTS = ("breakdown", "ea", "ceiling", "jobs", "startup", "nochange", "sweep", "mixed", "pg")


def _selection(args: argparse.Namespace) -> set[str]:
    """The parts to run: ``--only``'s, else every part not skipped."""
    if args.only:
        return set(args.only)
    skipped = {
        "breakdown": args.skip_breakdown,
        "ea": args.skip_ea,
        "jobs": args.skip_jobs,
        "sweep": args.skip_sweep,
        "mixed": args.skip_mixed,
        "pg": args.skip_pg,
    }
    return {part for part in PARTS if not skipped.get(part, False)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    selected = _selection(args)

    def wanted(part: str) -> bool:
        return part in selected

    env = _environment()
    env["bytecode_compiled"] = compile_package()
    report = Report()
    if args.quick:
        params, small_params = generate.QUICK, generate.QUICK_SMALL
    else:
        params = generate.Params(events=args.events, runs=args.runs, tags=args.tags)
        small_params = generate.SmallParams(files=args.small_files, run_dirs=args.small_dirs)
    dataset = generated(generate.ensure_scalars, params)
    small = generated(generate.ensure_small, small_params) if wanted("nochange") else None
    manifest = dataset.manifest
    events = manifest["scalar_events"]
    image_events = manifest["image_events"]
    warm_page_cache(dataset.logdir)
    if small is not None:
        warm_page_cache(small.logdir)

    work = Path(tempfile.mkdtemp(prefix="work-", dir=generate.DATA_DIR))
    results = report.results
    results["environment"] = env
    results["data"] = {k: v for k, v in manifest.items() if k not in ("file_list",)}
    results["data"]["path"] = str(dataset.root)
    checks: dict[str, bool | None] = {}
    try:
        # (1) and (4): jobs 1 and jobs 2, alternated when repeated.
        runs: dict[int, list[Measured]] = {1: [], 2: []}
        for i in range(args.repeat):
            for jobs in (1, 2):
                if jobs == 2 and not wanted("jobs"):
                    continue
                _log(f"tbconvert --jobs {jobs} ({i + 1}/{args.repeat}) ...")
                store = fresh_store(work, f"jobs{jobs}-{i}")
                runs[jobs].append(convert(dataset.logdir, store, jobs))
        first = runs[1][0]
        main_store = work / "jobs1-0.db"
        if not first.ok:
            report.notes.append(_failed("tbconvert --jobs 1", first))
        one = _median_run(runs[1])
        stored = one.extra.get("points", {}) if one.extra else {}
        if stored.get("scalars") != events or stored.get("images", 0) != image_events:
            report.notes.append(
                f"CHECK: tbconvert stored {stored} but the data holds {events:,} scalar events "
                f"and {image_events} image events"
            )
        points = sum(stored.values()) if stored else events + image_events
        rate = events / one.wall if one.ok else 0.0
        cpu_rate = events / one.cpu if one.ok and one.cpu else 0.0
        checks["rate"] = one.ok and rate >= TARGET_RATE
        report.row(
            "1",
            "tbconvert end to end, --jobs 1",
            f"{_n(rate)} scalar events/s",
            f">= {_n(TARGET_RATE)} events/s",
            _verdict(checks["rate"]),
        )
        report.row("", "  points/s (all plugins)", f"{_n(points / one.wall)} points/s")
        report.row(
            "",
            "  wall / CPU",
            f"{_s(one.wall)} / {_s(one.cpu)} ({_n(cpu_rate)} events/CPU-s)" + _spread(runs[1]),
        )
        inner = one.extra.get("elapsed_seconds") if one.extra else None
        if inner:
            report.row(
                "",
                "  convert() alone (its summary)",
                f"{_s(inner)} ({_n(events / inner)} events/s)",
            )
        results["tbconvert_jobs1"] = {
            **one.brief(),
            "events_per_s": rate,
            "points_per_s": points / one.wall,
            "events_per_cpu_s": cpu_rate,
            "convert_elapsed_s": inner,
            "points": stored,
            "all_walls_s": [m.wall for m in runs[1]],
        }

        # Per encoding: the same runs, TF1 only and TF2 only (a logdir of symlinks each).
        by_encoding: dict[str, dict[str, Any]] = {}
        if wanted("breakdown"):
            for encoding, label in (("tf1", "TF1 simple_value"), ("tf2", "TF2 tensor")):
                count = manifest[f"{encoding}_scalar_events"]
                if not count:
                    continue
                _log(f"tbconvert, {label} runs only ...")
                part = convert(
                    encoding_logdir(dataset, work, encoding), fresh_store(work, f"only-{encoding}")
                )
                if not part.ok:
                    report.notes.append(_failed(f"tbconvert on the {label} runs", part))
                    continue
                elapsed = part.extra.get("elapsed_seconds") or part.wall
                by_encoding[encoding] = {
                    **part.brief(),
                    "events": count,
                    "events_per_s": count / part.wall,
                    "convert_elapsed_s": elapsed,
                    "convert_events_per_s": count / elapsed,
                }
                report.row(
                    "",
                    f"  {label} runs only ({_n(count)})",
                    f"{_n(count / part.wall)} events/s ({_s(part.wall)}; "
                    f"convert() {_n(count / elapsed)}/s)",
                )
            results["tbconvert_by_encoding"] = by_encoding

        # (2) EventAccumulator.
        ea_rate = 0.0
        if wanted("ea"):
            _log("EventAccumulator (size_guidance 0) ...")
            ea = measure(
                [
                    sys.executable,
                    str(TASKS),
                    "accumulator",
                    str(dataset.logdir),
                    *manifest["event_dirs"],
                ]
            )
            got = ea.last_json()
            if ea.ok:
                ea_rate = events / ea.wall
                if got.get("scalar_events") != events:
                    report.notes.append(
                        f"CHECK: EventAccumulator read {got.get('scalar_events')}"
                        f" scalar events, the data holds {events:,}"
                    )
            else:
                report.notes.append(_failed("EventAccumulator", ea))
            ratio = rate / ea_rate if ea_rate else 0.0
            checks["vs_ea"] = bool(ea_rate) and ratio >= TARGET_VS_EA
            report.row(
                "2",
                "EventAccumulator, nothing sampled, all read",
                f"{_n(ea_rate)} scalar events/s",
                "",
                "",
            )
            report.row(
                "",
                "  wall / CPU / peak RSS",
                f"{_s(ea.wall)} / {_s(ea.cpu)} / {ea.maxrss_mb:,.0f} MB",
            )
            report.row(
                "",
                "  tbconvert / EventAccumulator",
                f"{ratio:.2f}x (CPU: {(ea.cpu / one.cpu) if one.cpu else 0:.2f}x)",
                f">= {TARGET_VS_EA:g}x",
                _verdict(checks["vs_ea"]),
            )
            ea_by_encoding: dict[str, Any] = {}
            per_dir = got.get("per_dir", {})
            for encoding, label in (("tf1", "TF1"), ("tf2", "TF2")):
                count = manifest[f"{encoding}_scalar_events"]
                spent = sum(
                    t["wall"]
                    for rel, t in per_dir.items()
                    if encodings(manifest).get(rel) == encoding
                )
                if not count or not spent:
                    continue
                ea_by_encoding[encoding] = {"work_wall_s": spent, "events_per_s": count / spent}
                ours = by_encoding.get(encoding, {}).get("convert_events_per_s")
                report.row(
                    "",
                    f"  {label} only, work time (excl. start-up)",
                    f"{_n(count / spent)} events/s"
                    + (f"; tbconvert {ours / (count / spent):.2f}x" if ours else ""),
                )
            results["event_accumulator"] = {
                **ea.brief(),
                "events_per_s": ea_rate,
                "ratio": ratio,
                "by_encoding": ea_by_encoding,
                "child": got,
            }

        if wanted("ceiling"):
            # (3) executemany ceiling, with the rows tbconvert stored.
            _log("sqlite3 executemany ceiling ...")
            manifest_path = dataset.root / "manifest.json"
            ceiling = measure(
                [
                    sys.executable,
                    str(TASKS),
                    "ceiling",
                    str(main_store),
                    str(work / "ceiling.db"),
                    str(manifest_path),
                ]
            )
            got = ceiling.last_json()
            ceiling_rate = 0.0
            if ceiling.ok and got.get("work_wall"):
                ceiling_rate = got["rows"] / got["work_wall"]
                chunked_rate = got["rows"] / got["chunked_wall"]
                if got.get("source") != "store":
                    report.notes.append(
                        "CHECK: the ceiling's rows were synthesised (no tbconvert "
                        "store to take them from)"
                    )
            else:
                chunked_rate = 0.0
                report.notes.append(_failed("executemany ceiling", ceiling))
            ratio = rate / ceiling_rate if ceiling_rate else 0.0
            checks["vs_ceiling"] = bool(ceiling_rate) and ratio >= TARGET_VS_CEILING
            report.row(
                "3", "sqlite3.executemany ceiling (best of 3)", f"{_n(ceiling_rate)} rows/s", "", ""
            )
            report.row(
                "",
                "  insert wall / CPU",
                f"{_s(got.get('work_wall', 0))} / "
                f"{_s(got.get('work_cpu', 0))} for {_n(got.get('rows', 0))} rows",
            )
            report.row(
                "", "  tbconvert's SQL (ON CONFLICT, 50k txns)", f"{_n(chunked_rate)} rows/s"
            )
            report.row(
                "",
                "  tbconvert / ceiling",
                f"{ratio:.2f}",
                f">= {TARGET_VS_CEILING:g}",
                _verdict(checks["vs_ceiling"]),
            )
            results["executemany_ceiling"] = {
                **ceiling.brief(),
                "rows_per_s": ceiling_rate,
                "tbconvert_sql_rows_per_s": chunked_rate,
                "ratio": ratio,
                "child": got,
            }

        # (4) jobs 2 vs jobs 1.
        if runs[2]:
            two = _median_run(runs[2])
            gain = one.wall / two.wall if two.ok and two.wall else 0.0
            checks["jobs"] = two.ok and one.ok and two.wall < TARGET_JOBS_GAIN * one.wall
            if not two.ok:
                report.notes.append(_failed("tbconvert --jobs 2", two))
            report.row(
                "4",
                "--jobs 2 vs --jobs 1 (wall)",
                f"{_s(two.wall)} vs {_s(one.wall)} ({gain:.2f}x)" + _spread(runs[2]),
                "jobs 2 faster (> 5%)",
                _verdict(checks["jobs"]),
            )
            report.row(
                "",
                "  --jobs 2: events/s, CPU, peak RSS",
                f"{_n(events / two.wall)}/s, {_s(two.cpu)}, {two.maxrss_mb:,.0f} MB",
            )
            results["tbconvert_jobs2"] = {
                **two.brief(),
                "events_per_s": events / two.wall,
                "speedup": gain,
                "points": two.extra.get("points"),
                "all_walls_s": [m.wall for m in runs[2]],
            }

        if wanted("startup"):
            # (5) start-up.
            _log("tbconvert --help start-up ...")
            measure([*tbconvert_cmd(), "--help"])  # warm-up: .pyc files, page cache
            helps = [measure([*tbconvert_cmd(), "--help"]) for _ in range(HELP_RUNS)]
            bare = [measure([sys.executable, "-c", "pass"]) for _ in range(HELP_RUNS)]
            help_wall = statistics.median(m.wall for m in helps)
            bare_wall = statistics.median(m.wall for m in bare)
            checks["help"] = all(m.ok for m in helps) and help_wall < TARGET_HELP
            if not helps[0].ok:
                report.notes.append(_failed("tbconvert --help", helps[0]))
            report.row(
                "5",
                f"tbconvert --help (median of {HELP_RUNS})",
                _s(help_wall),
                f"< {TARGET_HELP:g} s",
                _verdict(checks["help"]),
            )
            report.row("", "  bare `python -c pass`", _s(bare_wall))
            results["startup"] = {
                "help_median_s": help_wall,
                "python_median_s": bare_wall,
                "help_walls_s": [m.wall for m in helps],
            }

        if wanted("nochange"):
            # (6) no-change re-run over many small files.
            assert small is not None  # generated above when "nochange" is wanted
            files = small.manifest["files"]
            _log(f"{files:,} small files: first conversion (untimed) ...")
            small_store = fresh_store(work, "small")
            first_small = convert(small.logdir, small_store)
            _log(f"{files:,} small files: no-change re-run ...")
            again = convert(small.logdir, small_store)
            unchanged = again.extra.get("files", {}).get("unchanged") if again.extra else None
            checks["nochange"] = (
                first_small.ok and again.ok and unchanged == files and again.wall < TARGET_NOCHANGE
            )
            if not first_small.ok:
                report.notes.append(_failed("small files, first conversion", first_small))
            elif unchanged != files:
                report.notes.append(f"CHECK: the re-run saw {unchanged} of {files} files unchanged")
            report.row(
                "6",
                f"no-change re-run, {files:,} files",
                _s(again.wall),
                f"< {TARGET_NOCHANGE:g} s",
                _verdict(checks["nochange"]),
            )
            report.row(
                "",
                "  convert() alone / first conversion",
                f"{_s(again.extra.get('elapsed_seconds', 0))} / {_s(first_small.wall)}",
            )
            results["nochange"] = {
                **again.brief(),
                "files": files,
                "unchanged": unchanged,
                "convert_elapsed_s": again.extra.get("elapsed_seconds"),
                "first_conversion": first_small.brief(),
            }

        # (7) peak RSS.
        rss = one.maxrss_mb
        checks["rss"] = one.ok and rss < TARGET_RSS_MB
        if not one.rss_known:
            report.notes.append(_unknown_rss("tbconvert --jobs 1", one))
        report.row(
            "7",
            f"peak RSS, {_n(events)} events, --jobs 1",
            f"{rss:,.0f} MB",
            f"< {TARGET_RSS_MB:g} MB",
            _verdict(checks["rss"]),
        )
        results["rss"] = {"jobs1_mb": rss}
        if args.big:
            big = generated(generate.ensure_scalars, generate.BIG)
            warm_page_cache(big.logdir)
            _log(f"tbconvert on the big logdir ({big.manifest['bytes'] / 1e9:.2f} GB) ...")
            measured = convert(big.logdir, fresh_store(work, "big"))
            big_events = big.manifest["scalar_events"]
            checks["rss_big"] = measured.ok and measured.maxrss_mb < TARGET_RSS_MB
            if not measured.ok:
                report.notes.append(_failed("tbconvert on the big logdir", measured))
            if not measured.rss_known:
                report.notes.append(_unknown_rss("the big logdir", measured))
            report.row(
                "",
                f"peak RSS, {big.manifest['bytes'] / 1e9:.1f} GB logdir",
                f"{measured.maxrss_mb:,.0f} MB",
                f"< {TARGET_RSS_MB:g} MB",
                _verdict(checks["rss_big"]),
            )
            report.row(
                "",
                "  its rate / wall",
                f"{_n(big_events / measured.wall)} events/s / {_s(measured.wall)}",
            )
            results["rss"]["big"] = {
                **measured.brief(),
                "bytes": big.manifest["bytes"],
                "events": big_events,
                "events_per_s": big_events / measured.wall,
            }
        harness = sys.modules[__name__]
        if wanted("sweep"):
            results["sweep"] = workloads.sweep(harness, args, work, report, checks, one)
        if wanted("mixed"):
            results["mixed"] = workloads.mixed(harness, args, work, report, checks)
        if wanted("pg"):
            results["postgresql"] = workloads.server(
                harness, args, dataset.logdir, events, one, report, checks
            )
    finally:
        if args.keep:
            _log(f"stores kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    env["load_end"] = os.getloadavg()
    results["checks"] = {name: _verdict(ok) for name, ok in checks.items()}
    results["targets"] = {
        "events_per_s": TARGET_RATE,
        "vs_event_accumulator": TARGET_VS_EA,
        "vs_ceiling": TARGET_VS_CEILING,
        "jobs2_wall_fraction": TARGET_JOBS_GAIN,
        "help_s": TARGET_HELP,
        "nochange_s": TARGET_NOCHANGE,
        "rss_mb": TARGET_RSS_MB,
        "sweep_vs_event_accumulator": workloads.TARGET_SWEEP_VS_EA,
        "per_file_ms": workloads.TARGET_PER_FILE_MS,
        "mixed_vs_event_accumulator": workloads.TARGET_MIXED_VS_EA,
        "postgresql_vs_sqlite": workloads.TARGET_SERVER_VS_SQLITE,
    }
    results["notes"] = report.notes
    results["_table"] = report.table()
    return results


def _spread(measured: list[Measured]) -> str:
    """The spread of a repeated measurement, for its table row ("" when run once)."""
    if len(measured) < 2:
        return ""
    walls = [m.wall for m in measured]
    return f" [median of {len(walls)}: {min(walls):.2f}-{max(walls):.2f} s]"


def _median_run(measured: list[Measured]) -> Measured:
    """The run with the median wall time (the lower median for an even count)."""
    ordered = sorted(measured, key=lambda m: (not m.ok, m.wall))
    return ordered[(len(ordered) - 1) // 2]


def render(results: dict[str, Any]) -> str:
    env, data = results["environment"], results["data"]
    load = (
        f"load avg {env['load_start'][0]:.2f} at start, {env['load_end'][0]:.2f} at end"
        if "load_end" in env
        else ""
    )
    mb = data["bytes"] / 1e6
    lines = [
        f"tbconvert benchmark, {env['date']}, commit {env['commit']}",
        f"Python {env['python']}, SQLite {env['sqlite']}, protobuf {env['protobuf']}, "
        f"{env['cpus']} CPUs, {load}",
        f"data: {data['path']}",
        f"  {data['scalar_events']:,} scalar events ({data['tf1_scalar_events']:,} TF1 "
        f"simple_value, {data['tf2_scalar_events']:,} TF2 tensor) + {data['image_events']} "
        f"images, {data['files']} files in {len(data['event_dirs'])} directories, {mb:,.1f} MB",
        "",
        results["_table"],
    ]
    checks = results["checks"]
    passed = sum(1 for v in checks.values() if v == "PASS")
    lines.append("")
    lines.append(f"{passed}/{len(checks)} targets met.")
    for note in results["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="tbconvert's performance benchmark (design §8).",
        epilog="Data is cached in benchmarks/data/ (python benchmarks/generate.py --list).",
    )
    defaults = generate.Params()
    parser.add_argument(
        "--events",
        type=int,
        default=defaults.events,
        help="scalar events in the main logdir (default %(default)s)",
    )
    parser.add_argument("--runs", type=int, default=defaults.runs, help=argparse.SUPPRESS)
    parser.add_argument("--tags", type=int, default=defaults.tags, help=argparse.SUPPRESS)
    parser.add_argument(
        "--small-files",
        type=int,
        default=generate.SmallParams().files,
        help="files in the no-change re-run logdir (default %(default)s)",
    )
    parser.add_argument(
        "--small-dirs", type=int, default=generate.SmallParams().run_dirs, help=argparse.SUPPRESS
    )
    parser.add_argument("--quick", action="store_true", help="small data: a smoke run")
    parser.add_argument(
        "--json", action="store_true", help="print the results as one JSON document on stdout"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="tbconvert runs per --jobs value; the median is reported",
    )
    parser.add_argument(
        "--big",
        action="store_true",
        help="also convert a ~2 GB logdir for peak RSS (slow: minutes)",
    )
    parser.add_argument("--skip-ea", action="store_true", help="skip the EventAccumulator run")
    parser.add_argument("--skip-pg", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--skip-sweep", action="store_true", help="skip the 2,000-run sweep")
    parser.add_argument("--skip-mixed", action="store_true", help="skip the mixed-plugin logdir")
    parser.add_argument("--skip-jobs", action="store_true", help="skip the --jobs 2 runs")
    parser.add_argument(
        "--skip-breakdown",
        action="store_true",
        help="skip the TF1-only and TF2-only tbconvert runs",
    )
    parser.add_argument(
        "--only",
        type=lambda text: [part.strip() for part in text.split(",") if part.strip()],
        help="run only these parts, comma-separated, of: "
        + ", ".join(PARTS)
        + " (the big logdir's conversion always runs: e.g. --only sweep,mixed)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the stores it wrote")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    unknown = set(args.only or ()) - set(PARTS)
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}")
    started = time.perf_counter()
    results = run(args)
    results["benchmark_seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        table = results.pop("_table")
        print(json.dumps(results, indent=1, default=str))
        print(table, file=sys.stderr)
    else:
        print(render(results))
        print(f"\n(benchmark took {results['benchmark_seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
