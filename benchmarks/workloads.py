"""The sweep, mixed-plugin and server workloads of ``benchmarks/run.py`` (issue #14).

* **sweep**: 2,000 runs of 200 scalar events each (half TF1, half TF2 with train/validation,
  so 3,000 files), against EventAccumulator; plus the per-file overhead: the sweep's time
  beyond what its events cost at the big logdir's rate measured in the same run.
* **mixed**: runs with scalars, histograms, text and images (TF1 and TF2 encodings), against
  EventAccumulator reading every value back.
* **server**: the big logdir into a throwaway local PostgreSQL server, next to SQLite's rate
  of the same run: as the server's superuser (the converter checks the point tables' foreign
  keys per chunk, ``tbconvert/writing/pg_foreign_keys.py``), as a role without the grant that
  allows it
  (the server checks every row), without the keys (dropped in that database only, to price
  them), and two converters at once (two ``--source`` names into one database).

Each measurement is a fresh subprocess, as in ``run.py``, which passes its ``measure`` and
``convert`` helpers in.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import generate

SWEEP = generate.Params(events=400_000, runs=2000, tags=10, images=0)
QUICK_SWEEP = generate.Params(events=40_000, runs=200, tags=10, images=0)
TARGET_SWEEP_VS_EA = 5.0
TARGET_PER_FILE_MS = 0.3
TARGET_MIXED_VS_EA = 5.0
TARGET_SERVER_VS_SQLITE = 0.5
POINT_TABLES = ("scalars", "images", "audio", "histograms", "texts", "params", "tensors")


# --------------------------------------------------------------------------- mixed data


@dataclass(frozen=True)
class MixedParams:
    """Runs holding every common plugin.

    Attributes:
        runs: Run directories, TF1 encoding (even index) and TF2 (odd index).
        steps: Steps per run; each step writes two scalar events.
        histogram_every, text_every, image_every: Steps between those events.
        seed: Seed of the values and images.
    """

    runs: int = 8
    steps: int = 5000
    histogram_every: int = 5
    text_every: int = 10
    image_every: int = 100
    seed: int = 0

    def key(self) -> str:
        """Cache directory name."""
        blob = json.dumps({"v": generate.GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        return f"mixed-r{self.runs}-s{self.steps}-{digest}"


QUICK_MIXED = MixedParams(runs=4, steps=1000)


def _tensor_value(value: Any, plugin: str, dtype: int) -> None:
    value.metadata.plugin_data.plugin_name = plugin
    value.tensor.dtype = dtype


def _write_mixed_file(path: Path, tf2: bool, params: MixedParams, rng: Any) -> dict[str, Any]:
    """One run's file: every event a writer of that encoding would make for these plugins."""
    import numpy as np
    from tensorboard.compat.proto.event_pb2 import Event

    out = generate._RecordFile(path)
    out.add(Event(wall_time=generate.T0, file_version=generate.FILE_VERSION).SerializeToString())
    counts = {"scalars": 0, "histograms": 0, "text": 0, "images": 0}  # by plugin
    edges = np.linspace(-3.0, 3.0, 31)
    for step in range(params.steps):
        wall = generate.T0 + step * generate.STEP_SECONDS
        for tag, number in (("loss", 1.0 / (step + 1)), ("accuracy", step / params.steps)):
            event = Event(wall_time=wall, step=step)
            value = event.summary.value.add(tag=tag)
            if tf2:
                _tensor_value(value, "scalars", generate.DT_FLOAT)
                value.tensor.tensor_shape.SetInParent()
                value.tensor.tensor_content = np.float32(number).tobytes()
            else:
                value.simple_value = number
            out.add(event.SerializeToString())
            counts["scalars"] += 1
        if step % params.histogram_every == 0:
            sample = rng.standard_normal(200)
            bucket_counts = np.histogram(sample, edges)[0].astype(np.float64)
            event = Event(wall_time=wall + 0.01, step=step)
            value = event.summary.value.add(tag="weights")
            if tf2:  # the histograms plugin's [k, 3] tensor of (left, right, count)
                _tensor_value(value, "histograms", 2)  # DT_DOUBLE
                table = np.stack([edges[:-1], edges[1:], bucket_counts], axis=1)
                value.tensor.tensor_shape.dim.add(size=30)
                value.tensor.tensor_shape.dim.add(size=3)
                value.tensor.tensor_content = table.astype("<f8").tobytes()
            else:
                histo = value.histo
                histo.min, histo.max = float(sample.min()), float(sample.max())
                histo.num, histo.sum = 200.0, float(sample.sum())
                histo.sum_squares = float((sample**2).sum())
                histo.bucket_limit.extend(edges[1:].tolist())
                histo.bucket.extend(bucket_counts.tolist())
            out.add(event.SerializeToString())
            counts["histograms"] += 1
        if step % params.text_every == 0:
            event = Event(wall_time=wall + 0.02, step=step)
            value = event.summary.value.add(tag="notes")
            _tensor_value(value, "text", generate.DT_STRING)
            value.tensor.tensor_shape.SetInParent()
            value.tensor.string_val.append(f"step {step}: loss went down".encode())
            out.add(event.SerializeToString())
            counts["text"] += 1
        if step % params.image_every == 0:
            event = Event(wall_time=wall + 0.03, step=step)
            value = event.summary.value.add(tag="samples")
            png = generate._png(rng, 32)
            if tf2:
                _tensor_value(value, "images", generate.DT_STRING)
                value.tensor.tensor_shape.dim.add(size=3)
                value.tensor.string_val.extend([b"32", b"32", png])
            else:
                value.image.height = value.image.width = 32
                value.image.colorspace = 3
                value.image.encoded_image_string = png
            out.add(event.SerializeToString())
            counts["images"] += 1
    out.close()
    return {
        "scalar_events": counts["scalars"],
        "image_events": counts["images"],
        "points": counts,
        "records": out.records,
        "bytes": out.bytes,
    }


def _build_mixed(params: MixedParams, logdir: Path) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(params.seed)
    files = []
    for number in range(params.runs):
        tf2 = number % 2 == 1
        run = logdir / f"run_{number:02d}_{'tf2' if tf2 else 'tf1'}"
        run.mkdir(parents=True)
        suffix = ".v2" if tf2 else ""
        path = run / f"events.out.tfevents.{int(generate.T0) + number}.{generate.HOST}{suffix}"
        stats = _write_mixed_file(path, tf2, params, rng)
        files.append({"path": str(path.relative_to(logdir)), "encoding": "tf2" if tf2 else "tf1"})
        files[-1].update(stats)
    return {"files": files}


def ensure_mixed(params: MixedParams, *, log: Any = generate._stderr) -> generate.Dataset:
    """The mixed logdir for ``params``, generated unless already cached."""
    return generate._ensure(params.key(), params, _build_mixed, generate.DATA_DIR, False, log)


def mixed_points(dataset: generate.Dataset) -> dict[str, int]:
    """Points per plugin the mixed logdir holds (as tbconvert's summary counts them)."""
    files = dataset.manifest.get("file_list") or []
    total: dict[str, int] = {}
    for entry in files:
        for table, count in entry.get("points", {}).items():
            total[table] = total.get(table, 0) + count
    return total


# --------------------------------------------------------------------------- measurements


def accumulator_cmd(dataset: generate.Dataset, tasks: Path) -> list[str]:
    """The EventAccumulator task over every event directory of a dataset."""
    return [
        sys.executable,
        str(tasks),
        "accumulator",
        str(dataset.logdir),
        *dataset.manifest["event_dirs"],
    ]


def alternate(
    repeat: int, first: Callable[[int], Any], second: Callable[[int], Any]
) -> tuple[list[Any], list[Any]]:
    """Run two measurements ``repeat`` times each, alternated (so load drifts hit both)."""
    ones, twos = [], []
    for number in range(repeat):
        ones.append(first(number))
        twos.append(second(number))
    return ones, twos


def median_by_wall(measured: list[Any]) -> Any:
    """The measurement with the median wall time (lower median for an even count)."""
    ordered = sorted(measured, key=lambda m: (not m.ok, m.wall))
    return ordered[(len(ordered) - 1) // 2]


def spread(measured: list[Any]) -> str:
    """ " [median of N: low-high s]", or "" for one measurement."""
    if len(measured) < 2:
        return ""
    walls = [m.wall for m in measured]
    return f" [median of {len(walls)}: {min(walls):.2f}-{max(walls):.2f} s]"


def drop_point_foreign_keys(url: str) -> int:
    """Drop the point tables' foreign keys in one database (to price them); returns how many."""
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        keys = connection.execute(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE contype = 'f' "
            "AND conrelid::regclass::text = ANY(%s)",
            (list(POINT_TABLES),),
        ).fetchall()
        for table, name in keys:
            connection.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    return len(keys)


def concurrent_converts(cmds: list[list[str]], env: dict[str, str]) -> tuple[float, list[int]]:
    """Start every command at once; (wall until the last ends, exit codes)."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        for cmd in cmds
    ]
    codes = [proc.wait() for proc in procs]
    for proc in procs:
        if proc.stderr is not None:
            proc.stderr.close()
    return time.perf_counter() - started, codes


def median(values: list[float]) -> float:
    """The median (0.0 for none)."""
    return statistics.median(values) if values else 0.0


# --------------------------------------------------------------------------- the workloads
# ``h`` is the harness module (benchmarks/run.py): its measure, convert, report helpers.


def sweep(h: Any, args: Any, work: Path, report: Any, checks: dict[str, Any], big: Any) -> dict:
    """The sweep against EventAccumulator, and the per-file overhead against ``big`` (the
    median big-logdir conversion of this run)."""
    dataset = h.generated(generate.ensure_scalars, QUICK_SWEEP if args.quick else SWEEP)
    events, files = dataset.manifest["scalar_events"], dataset.manifest["files"]
    h._log(f"sweep: {files} files, tbconvert and EventAccumulator x {args.repeat} ...")
    race = _race(h, args, work, dataset, "sweep")
    ours, theirs, one, ea, stored = race.ours, race.theirs, race.one, race.ea, race.stored
    ratio, cpu_ratio = race.ratio, race.cpu_ratio
    if stored.get("scalars") != events:
        report.notes.append(f"CHECK: sweep: tbconvert stored {stored}, the data holds {events:,}")
    if ea.last_json().get("scalar_events") != events:
        report.notes.append("CHECK: sweep: EventAccumulator did not read every scalar event")
    checks["sweep_vs_ea"] = one.ok and ratio >= TARGET_SWEEP_VS_EA
    big_events = big.extra.get("points", {}).get("scalars", 0) if big.extra else 0
    # What the sweep's events would cost at the big logdir's rate; the rest is per file.
    per_file_ms = (one.wall - events * big.wall / big_events) / files * 1e3 if big_events else 0
    per_file_cpu_ms = (one.cpu - events * big.cpu / big_events) / files * 1e3 if big_events else 0
    checks["per_file_ms"] = one.ok and per_file_ms < TARGET_PER_FILE_MS
    report.row(
        "9",
        f"sweep: {dataset.manifest['params']['runs']:,} runs, {files:,} files, {events:,} events",
        f"{h._n(events / one.wall)} events/s ({h._s(one.wall)})" + spread(ours),
    )
    _against_accumulator(h, report, ea, theirs, ratio, cpu_ratio, TARGET_SWEEP_VS_EA)
    report.row(
        "",
        "  per-file overhead (vs the big logdir)",
        f"{per_file_ms:.2f} ms wall, {per_file_cpu_ms:.2f} ms CPU",
        f"< {TARGET_PER_FILE_MS:g} ms",
        h._verdict(checks["per_file_ms"]),
    )
    floor = race.floor
    net_per_file_ms = None
    if floor is not None and big_events:
        # The formula above charges the sweep 60% of a start-up (the big logdir has 2.5x its
        # events, and one start-up too): without it in either, what is left is per file.
        startup = floor.startup
        big_rate = (big.wall - startup) / big_events
        net_per_file_ms = (one.wall - startup - events * big_rate) / files * 1e3
        report.row(
            "",
            "  per-file overhead, start-up left out of both (for information)",
            f"{net_per_file_ms:.2f} ms wall (start-up: tbconvert tf over an empty logdir)",
        )
    _floor_row(h, report, race)
    floor_per_file_ms = None
    if floor is not None and big_events:
        floor_per_file_ms = (floor.wall - events * big.wall / big_events) / files * 1e3
        report.row("", "  per-file overhead of the floor", f"{floor_per_file_ms:.2f} ms wall")
    jobs2 = _jobs2_row(h, report, race)
    return {
        "files": files,
        "events": events,
        "tbconvert": {**one.brief(), "all_walls_s": [m.wall for m in ours]},
        "event_accumulator": {**ea.brief(), "all_walls_s": [m.wall for m in theirs]},
        "ratio": ratio,
        "cpu_ratio": cpu_ratio,
        "per_file_ms": per_file_ms,
        "per_file_cpu_ms": per_file_cpu_ms,
        "per_file_ms_without_startup": net_per_file_ms,
        "floor": None if floor is None else asdict(floor),
        "floor_per_file_ms": floor_per_file_ms,
        "jobs2": jobs2,
    }


@dataclass
class _Race:
    """tbconvert and EventAccumulator on one logdir, taking turns: every measurement, the
    medians, the points tbconvert stored, the ratios (wall and CPU; 0 when one failed) and
    the floor under the workload (None when it could not be measured)."""

    ours: list[Any]
    theirs: list[Any]
    one: Any
    ea: Any
    stored: dict[str, int]
    ratio: float
    cpu_ratio: float
    floor: _Floor | None
    jobs2: Any | None  # the median --jobs 2 conversion, unless --skip-jobs


def _race(h: Any, args: Any, work: Path, dataset: generate.Dataset, name: str) -> _Race:
    h.warm_page_cache(dataset.logdir)
    stores = [h.fresh_store(work, f"{name}-{i}") for i in range(args.repeat)]
    ours, theirs = alternate(
        args.repeat,
        lambda i: h.convert(dataset.logdir, stores[i]),
        lambda i: h.measure(accumulator_cmd(dataset, h.TASKS)),
    )
    one, ea = median_by_wall(ours), median_by_wall(theirs)
    jobs2 = None
    if not args.skip_jobs:
        jobs2 = median_by_wall(
            [h.convert(dataset.logdir, h.fresh_store(work, f"{name}-jobs2"), 2) for _ in stores]
        )
    return _Race(
        ours,
        theirs,
        one,
        ea,
        stored=one.extra.get("points", {}) if one.extra else {},
        ratio=ea.wall / one.wall if one.ok and ea.ok else 0.0,
        cpu_ratio=ea.cpu / one.cpu if one.cpu else 0.0,
        floor=_floor(h, args, work, name, ours.index(one), stores) if one.ok else None,
        jobs2=jobs2,
    )


@dataclass
class _Floor:
    """What no conversion of a logdir can go below, measured in the same run: tbconvert's
    start-up (a conversion of an empty logdir into a fresh store, median) plus SQLite's cost
    of writing the rows tbconvert stored (``_tasks.py rewrite``, best of 3)."""

    startup: float
    writes: float

    @property
    def wall(self) -> float:
        return self.startup + self.writes


def _floor(
    h: Any, args: Any, work: Path, name: str, median: int, stores: list[Path]
) -> _Floor | None:
    """The floor, its writes those of the median conversion's store (``stores[median]``)."""
    empty = work / f"{name}-empty"
    empty.mkdir(exist_ok=True)
    startups = [
        h.convert(empty, h.fresh_store(work, f"{name}-empty-{i}")) for i in range(args.repeat)
    ]
    rewrite = h.measure(
        [
            sys.executable,
            str(h.TASKS),
            "rewrite",
            str(stores[median]),
            str(h.fresh_store(work, f"{name}-rewrite")),
        ]
    )
    if not rewrite.ok or not all(m.ok for m in startups):
        return None
    return _Floor(median_by_wall(startups).wall, rewrite.last_json()["work_wall"])


def _jobs2_row(h: Any, report: Any, race: _Race) -> dict[str, Any] | None:
    """The workload with decoding in a worker process (``--jobs 2``), against ``--jobs 1``."""
    jobs2 = race.jobs2
    if jobs2 is None:
        return None
    if not jobs2.ok:
        report.notes.append("CHECK: the --jobs 2 conversion failed")
        return None
    report.row(
        "",
        "  --jobs 2 (decoding in a worker)",
        f"{h._s(jobs2.wall)}: {race.one.wall / jobs2.wall:.2f}x --jobs 1, "
        f"{race.ea.wall / jobs2.wall:.2f}x EventAccumulator",
    )
    return jobs2.brief()  # type: ignore[no-any-return]


def _floor_row(h: Any, report: Any, race: _Race) -> None:
    """The floor under a workload, and the ratio to EventAccumulator it would give."""
    floor = race.floor
    if floor is None:
        report.notes.append("CHECK: the floor (start-up, store writes) could not be measured")
        return
    report.row(
        "",
        "  floor: start-up + SQLite writing the same rows",
        f"{h._s(floor.wall)} (start-up {h._s(floor.startup)}, writes {h._s(floor.writes)}); "
        f"EventAccumulator / floor: {race.ea.wall / floor.wall:.2f}x",
    )


def _against_accumulator(
    h: Any, report: Any, ea: Any, theirs: list[Any], ratio: float, cpu_ratio: float, target: float
) -> None:
    """The rows under a workload: EventAccumulator's own figures, then the ratio to it."""
    report.row(
        "",
        "  EventAccumulator wall / CPU",
        f"{h._s(ea.wall)} / {h._s(ea.cpu)}" + spread(theirs),
    )
    report.row(
        "",
        "  tbconvert / EventAccumulator",
        f"{ratio:.2f}x (CPU: {cpu_ratio:.2f}x)",
        f">= {target:g}x",
        h._verdict(ratio >= target),
    )


def mixed(h: Any, args: Any, work: Path, report: Any, checks: dict[str, Any]) -> dict:
    """Scalars, histograms, text and images against EventAccumulator."""
    dataset = h.generated(ensure_mixed, QUICK_MIXED if args.quick else MixedParams())
    expected = mixed_points(dataset)
    records = dataset.manifest["records"] - dataset.manifest["files"]  # less file_version
    h._log(f"mixed plugins: tbconvert and EventAccumulator x {args.repeat} ...")
    race = _race(h, args, work, dataset, "mixed")
    ours, theirs, one, ea, stored = race.ours, race.theirs, race.one, race.ea, race.stored
    ratio, cpu_ratio = race.ratio, race.cpu_ratio
    if stored != expected:
        report.notes.append(f"CHECK: mixed: tbconvert stored {stored}, the data holds {expected}")
    got = ea.last_json()
    read = got.get("scalar_events", 0) + got.get("histograms", 0) + got.get("other_tensors", 0)
    read += got.get("images", 0)
    if read != records:
        report.notes.append(f"CHECK: mixed: EventAccumulator read {read} of {records} events")
    checks["mixed_vs_ea"] = one.ok and ratio >= TARGET_MIXED_VS_EA
    summary = ", ".join(f"{count:,} {table}" for table, count in sorted(expected.items()))
    report.row(
        "10",
        "mixed plugins (" + summary + ")",
        f"{h._n(records / one.wall)} events/s ({h._s(one.wall)})" + spread(ours),
    )
    _against_accumulator(h, report, ea, theirs, ratio, cpu_ratio, TARGET_MIXED_VS_EA)
    _floor_row(h, report, race)
    jobs2 = _jobs2_row(h, report, race)
    return {
        "events": records,
        "points": expected,
        "tbconvert": {**one.brief(), "all_walls_s": [m.wall for m in ours]},
        "event_accumulator": {**ea.brief(), "all_walls_s": [m.wall for m in theirs]},
        "ratio": ratio,
        "floor": None if race.floor is None else asdict(race.floor),
        "jobs2": jobs2,
    }


def server(
    h: Any, args: Any, logdir: Path, events: int, sqlite: Any, report: Any, checks: dict
) -> dict:
    """The big logdir into a local PostgreSQL server, against SQLite's run ``sqlite``."""
    sys.path.insert(0, str(h.REPO))
    from tests.support.pgserver import PostgresServer, find_bindir

    if find_bindir() is None:
        report.notes.append("PostgreSQL: no server binaries (apt-get install postgresql)")
        return {}
    h._log(f"PostgreSQL: keys per chunk, per row and dropped; two at once x {args.repeat}")
    server = PostgresServer.start()
    keyed: list[Any] = []
    per_row: list[Any] = []
    unkeyed: list[Any] = []
    together: list[float] = []
    try:
        server.execute("CREATE ROLE member LOGIN")
        for repeat in range(args.repeat):
            keyed.append(h.convert(logdir, server.new_database("keyed")))
            server.execute(f"CREATE DATABASE member_{repeat} OWNER member")
            member_url = server.url(f"member_{repeat}").replace(f"//{server.user}@", "//member@")
            per_row.append(h.convert(logdir, member_url))
            bare = server.new_database("bare")
            subprocess.run(
                [*h.tbconvert_cmd(), "db", "upgrade", "--store", bare],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            dropped = drop_point_foreign_keys(bare)
            unkeyed.append(h.convert(logdir, bare))
            shared = server.new_database("shared")
            base = [*h.tbconvert_cmd(), "tf", "--logdir", str(logdir), "--store", shared, "-q"]
            wall, codes = concurrent_converts(
                [[*base, "--source", "first"], [*base, "--source", "second"]], h._child_env()
            )
            if any(codes):
                report.notes.append(f"PostgreSQL: two converters at once exited {codes}")
            count = server.execute("SELECT count(*) FROM scalars", shared.rsplit("/", 1)[1])
            if count[0][0] != 2 * events:
                report.notes.append(f"CHECK: two converters at once stored {count[0][0]} points")
            together.append(wall)
    finally:
        server.stop()
    one, bare_one, row_one = median_by_wall(keyed), median_by_wall(unkeyed), median_by_wall(per_row)
    failed = next((m for m in (one, bare_one, row_one) if not m.ok), None)
    if failed is not None:
        report.notes.append(h._failed("tbconvert into PostgreSQL", failed))
        return {}
    rate, sqlite_rate = events / one.wall, events / sqlite.wall
    bare_rate, both_rate = events / bare_one.wall, 2 * events / median(together)
    row_rate = events / row_one.wall
    checks["server_vs_sqlite"] = rate / sqlite_rate >= TARGET_SERVER_VS_SQLITE
    report.row(
        "8", "tbconvert into PostgreSQL (local server)", f"{h._n(rate)} events/s" + spread(keyed)
    )
    report.row(
        "",
        "  PostgreSQL / SQLite (same run)",
        f"{rate / sqlite_rate:.2f}x (client CPU {h._s(one.cpu)})",
        f">= {TARGET_SERVER_VS_SQLITE:g}x",
        h._verdict(checks["server_vs_sqlite"]),
    )
    report.row(
        "",
        "  a role without the grant: the server checks each row's keys",
        f"{h._n(row_rate)} events/s ({row_rate / sqlite_rate:.2f}x SQLite)" + spread(per_row),
    )
    report.row(
        "",
        f"  without the point tables' {dropped} foreign keys",
        f"{h._n(bare_rate)} events/s ({bare_rate / sqlite_rate:.2f}x SQLite)" + spread(unkeyed),
    )
    report.row(
        "",
        "  two converters at once (two sources)",
        f"{h._n(both_rate)} events/s together ({h._s(median(together))})",
    )
    return {
        **one.brief(),
        "events_per_s": rate,
        "vs_sqlite": rate / sqlite_rate,
        "keys_per_row": {**row_one.brief(), "events_per_s": row_rate},
        "without_foreign_keys": {**bare_one.brief(), "events_per_s": bare_rate},
        "two_at_once": {"walls_s": together, "events_per_s": both_rate},
    }
