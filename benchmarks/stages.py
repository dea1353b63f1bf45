"""Where tbconvert's time goes per scalar event, stage by stage, without a profiler.

    python benchmarks/stages.py            # the default 1M-scalar-event logdir
    python benchmarks/stages.py --quick    # small data
    python benchmarks/stages.py --json

cProfile's cost per Python call distorts a pipeline whose stages make very different numbers
of calls (``profile.py`` is for finding hot functions); here each stage is timed on its own,
in this process, best of ``--repeat`` runs (CPU seconds, so that other work on the machine
matters less):

1. start-up: ``tbconvert tf`` over an empty logdir into a fresh store, a subprocess
   (interpreter, imports, schema creation): paid once per command;
2. read + frame + CRC: ``RecordReader.blocks()`` over every file;
3. + decode to rows: ``filepass.read_file()`` over every file, every row tuple made;
4. ``convert()`` into a fresh store, imports already done;

and derived from them: decoding alone (3 - 2), and the store's part (4 - 3, less ``convert()``
over an empty logdir), split into ``StoreWriter.insert_points`` (timed in one more run) and the
rest (remapping series ids, commits).  Also counted: the records that took the general
(protobuf) path instead of the block path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Last, so that an older checkout on PYTHONPATH is measured instead (before/after figures).
sys.path.append(str(HERE.parent))

import generate  # noqa: E402  (benchmarks/ is put on the path just above)


def best(run: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best CPU and wall seconds of ``repeat`` calls, and the last result."""
    cpu, wall, result = [], [], None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = run()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall), result


def startup(work: Path, repeat: int) -> float:
    """Median wall seconds of ``tbconvert tf`` over an empty logdir into a fresh store."""
    empty = work / "empty"
    (empty / "run").mkdir(parents=True, exist_ok=True)
    script = Path(sys.executable).parent / "tbconvert"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tbconvert"]
    times = []
    for k in range(repeat):
        started = time.perf_counter()
        subprocess.run(
            [*cmd, "tf", "--logdir", str(empty), "--store", str(work / f"s{k}.db"), "-q"],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def tasks(logdir: Path) -> list[Any]:
    """A FileTask per event file, as a first conversion plans them."""
    from tbconvert.reading import discovery
    from tbconvert.reading.chunks import FileTask

    found = []
    for run in discovery.classify(logdir).runs:
        for source in run.files:
            stat = os.stat(source.path)
            found.append(
                FileTask(
                    index=len(found),
                    path=source.path,
                    rel_path=source.rel_path,
                    run_path=run.run_path,
                    context=source.context,
                    size=stat.st_size,
                    mtime_ns=stat.st_mtime_ns,
                    offset=0,
                    stored_size=None,
                    stored_digest=None,
                    known_metadata={},
                )
            )
    return found


def read_only(file_tasks: list[Any]) -> int:
    from tbconvert.reading.records import RecordReader

    records = 0
    for task in file_tasks:
        with open(task.path, "rb") as handle:
            reader = RecordReader(handle)
            # An older tbconvert (for a before/after comparison) reads record by record.
            for item in reader.blocks() if hasattr(reader, "blocks") else reader.batches():
                records += len(item)
    return records


def decode_only(file_tasks: list[Any]) -> tuple[int, int]:
    """Rows made, and records decoded by the general path."""
    from tbconvert.filters import Selection
    from tbconvert.reading.chunks import ReadSettings, read_file
    from tbconvert.reading.decoder import EventDecoder

    general = 0
    feed_records = EventDecoder.feed_records
    settings = ReadSettings(Selection(), chunk_points=50_000)

    def counted(self: Any, records: Any, **options: Any) -> None:
        nonlocal general
        general += len(records)
        feed_records(self, records, **options)

    EventDecoder.feed_records = counted  # type: ignore[method-assign]
    try:
        rows = 0
        carry: dict[Any, Any] = {}
        for task in file_tasks:
            for chunk in read_file(task, settings, carry):
                for table in chunk.rows.values():
                    # Packed rows make their tuples when iterated: count that in.
                    deque(table, maxlen=0)
                    rows += len(table)
        return rows, general
    finally:
        EventDecoder.feed_records = feed_records  # type: ignore[method-assign]


def timed_inserts() -> tuple[list[float], Callable[[], None]]:
    """Accumulate the CPU seconds spent in ``StoreWriter.insert_points``; returns the list
    holding the total and a function that undoes the wrapping."""
    from tbconvert.writing.writer import StoreWriter

    total = [0.0]
    insert = StoreWriter.insert_points

    def timed(self: Any, table: str, rows: Any, **options: Any) -> None:
        started = time.process_time()
        insert(self, table, rows, **options)
        total[0] += time.process_time() - started

    StoreWriter.insert_points = timed  # type: ignore[method-assign]
    return total, lambda: setattr(StoreWriter, "insert_points", insert)


def fresh(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=generate.Params().events)
    parser.add_argument("--quick", action="store_true", help="small data")
    parser.add_argument("--repeat", type=int, default=3, help="runs per stage (best taken)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)

    params = generate.QUICK if args.quick else generate.Params(events=args.events)
    dataset = generate.ensure_scalars(params)
    events = dataset.manifest["scalar_events"]
    records = dataset.manifest["records"]
    work = Path(tempfile.mkdtemp(prefix="stages-", dir=generate.DATA_DIR))
    try:
        import tbconvert

        start = startup(work, args.repeat)
        file_tasks = tasks(dataset.logdir)
        read_cpu, read_wall, read = best(lambda: read_only(file_tasks), args.repeat)
        decode_cpu, decode_wall, (rows, general) = best(
            lambda: decode_only(file_tasks), args.repeat
        )
        store = work / "stages.db"
        # The first call imports what convert() imports lazily: best of several leaves it out.
        empty_cpu, _, _ = best(
            lambda: tbconvert.convert(
                str(work / "empty"), store=str(fresh(work / "empty.db")), progress=False
            ),
            max(2, args.repeat),
        )
        convert_cpu, convert_wall, _ = best(
            lambda: tbconvert.convert(str(dataset.logdir), store=str(fresh(store)), progress=False),
            args.repeat,
        )
        inserting, undo = timed_inserts()
        try:
            tbconvert.convert(str(dataset.logdir), store=str(fresh(store)), progress=False)
        finally:
            undo()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert read == records, (read, records)

    def per_event(seconds: float) -> float:
        return round(seconds / events * 1e9)

    result = {
        "data": dataset.root.name,
        "scalar_events": events,
        "records": records,
        "rows": rows,
        "general_path_records": general,
        "startup_wall_s": round(start, 3),
        "ns_per_event_cpu": {
            "read_frame_crc": per_event(read_cpu),
            "decode_to_rows": per_event(decode_cpu - read_cpu),
            "read_file_total": per_event(decode_cpu),
            "store_insert": per_event(inserting[0]),
            "store_remap_commit": per_event(convert_cpu - decode_cpu - empty_cpu - inserting[0]),
            "convert_total": per_event(convert_cpu),
        },
        "convert_wall_s": round(convert_wall, 3),
        "read_file_wall_s": round(decode_wall, 3),
        "read_wall_s": round(read_wall, 3),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    cost = result["ns_per_event_cpu"]
    print(
        f"{dataset.root.name}: {events:,} scalar events in {records:,} records; "
        f"{general:,} records ({general / records:.1%}) took the general protobuf path"
    )
    print(f"{'start-up (tbconvert over an empty logdir, median)':52} {start:7.3f} s once")
    for key, label in (
        ("read_frame_crc", "read + frame + CRC (RecordReader.blocks)"),
        ("decode_to_rows", "decode to rows (read_file, less the above)"),
        ("store_insert", "store: insert_points (executemany)"),
        ("store_remap_commit", "store: remap ids, commits, the rest"),
        ("convert_total", "convert() in process, imports done"),
    ):
        print(f"{label:52} {cost[key]:7,} ns/event")
    print(f"{'convert() in process, wall':52} {events / convert_wall:7,.0f} events/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
