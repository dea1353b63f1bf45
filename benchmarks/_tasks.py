"""Measured work that runs in a fresh interpreter, started by ``benchmarks/run.py``.

    python benchmarks/_tasks.py accumulator LOGDIR REL_DIR...
    python benchmarks/_tasks.py ceiling SOURCE_STORE NEW_DB [MANIFEST]
    python benchmarks/_tasks.py rewrite SOURCE_STORE NEW_DB

Each task prints one JSON object on its last stdout line: what it counted, and ``work_wall`` /
``work_cpu`` for the measured part alone (imports excluded).  The parent measures the whole
process (wall, CPU, peak RSS) from outside.  Nothing here imports tbconvert.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from itertools import chain
from typing import Any

SCALARS_DDL = """
CREATE TABLE scalars (
    series_id INTEGER NOT NULL,
    step BIGINT NOT NULL,
    file_id INTEGER NOT NULL,
    record_offset BIGINT NOT NULL,
    value_index INTEGER NOT NULL,
    wall_time FLOAT,
    value FLOAT,
    PRIMARY KEY (series_id, step, file_id, record_offset, value_index)
) WITHOUT ROWID
"""
COLUMNS = "series_id, step, file_id, record_offset, value_index, wall_time, value"
CEILING_ATTEMPTS = 3  # best of: the ceiling is what SQLite can do, not what noise allows
TBCONVERT_CHUNK = 50_000  # tbconvert's CHUNK_POINTS at the time of writing


def accumulator(logdir: str, rel_dirs: list[str]) -> dict[str, Any]:
    """TensorBoard's legacy EventAccumulator, nothing sampled away, every value read.

    One accumulator per directory that holds event files (it does not recurse), all kept
    alive to the end, as TensorBoard's multiplexer keeps them.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    imported = time.perf_counter() - started
    size_guidance = {
        ea.COMPRESSED_HISTOGRAMS: 0,
        ea.IMAGES: 0,
        ea.AUDIO: 0,
        ea.SCALARS: 0,
        ea.HISTOGRAMS: 0,
        ea.TENSORS: 0,
    }
    t0, c0 = time.perf_counter(), time.process_time()
    accumulators = []
    counts = {
        "scalar_events_tf1": 0,
        "scalar_events_tf2": 0,
        "images": 0,
        "histograms": 0,
        "other_tensors": 0,
    }
    checksum = 0.0
    per_dir: dict[str, dict[str, float]] = {}
    for rel in rel_dirs:
        d0, dc0 = time.perf_counter(), time.process_time()
        acc = ea.EventAccumulator(os.path.join(logdir, rel), size_guidance=size_guidance)
        acc.Reload()
        accumulators.append(acc)
        tags = acc.Tags()
        for tag in tags[ea.SCALARS]:
            for event in acc.Scalars(tag):
                checksum += event.value
                counts["scalar_events_tf1"] += 1
        for tag in tags[ea.TENSORS]:
            for event in acc.Tensors(tag):
                array = tensor_util.make_ndarray(event.tensor_proto)
                if array.ndim == 0 and array.dtype.kind == "f":
                    checksum += float(array.item())
                    counts["scalar_events_tf2"] += 1
                else:
                    counts["other_tensors"] += 1
        for tag in tags[ea.IMAGES]:
            counts["images"] += len(acc.Images(tag))
        for tag in tags[ea.HISTOGRAMS]:
            for event in acc.Histograms(tag):
                checksum += event.histogram_value.num
                counts["histograms"] += 1
        per_dir[rel] = {"wall": time.perf_counter() - d0, "cpu": time.process_time() - dc0}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    counts["scalar_events"] = counts["scalar_events_tf1"] + counts["scalar_events_tf2"]
    return {
        "work_wall": wall,
        "work_cpu": cpu,
        "import_wall": imported,
        "accumulators": len(accumulators),
        "checksum": checksum,
        **counts,
        "per_dir": per_dir,
        "startup_cpu": c0 - cpu_started,
    }


def _rows_from_store(store: str) -> list[tuple[Any, ...]]:
    source = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return source.execute(
            f"SELECT {COLUMNS} FROM scalars ORDER BY file_id, record_offset, value_index"
        ).fetchall()
    finally:
        source.close()


def _rows_from_manifest(manifest_path: str) -> list[tuple[Any, ...]]:
    """Rows shaped like tbconvert's, when its store is unusable (the converter failed)."""
    with open(manifest_path) as f:
        manifest = json.load(f)
    tags = manifest["params"]["tags"]
    rows = []
    series_base = 0
    for file_id, entry in enumerate(manifest["file_list"], start=1):
        per_file_tags = tags if entry["encoding"] == "tf1" else (tags + 1) // 2
        record_size = entry["bytes"] // max(entry["records"], 1)
        offset = record_size
        for k in range(entry["scalar_events"]):
            step, t = divmod(k, per_file_tags)
            rows.append(
                (series_base + t + 1, step, file_id, offset, 0, 1.7e9 + step * 0.05, 1.0 / (k + 1))
            )
            offset += record_size
        series_base += per_file_tags
    return rows


def _fresh_db(path: str, ddl: Sequence[str] = (SCALARS_DDL,)) -> sqlite3.Connection:
    """A new WAL database at ``path`` (anything there before removed) made by ``ddl``."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    for statement in ddl:
        db.execute(statement)
    return db


def ceiling(store: str, new_db: str, manifest: str | None = None) -> dict[str, Any]:
    """Bare ``executemany`` of the same rows into a table shaped like tbconvert's.

    The rows are the ones tbconvert stored, in its insertion order (file, then offset),
    loaded before the clock starts.  Timed: BEGIN, one ``executemany`` of plain INSERTs,
    COMMIT, into a fresh WAL database; best of ``CEILING_ATTEMPTS``.  Then, for reference,
    tbconvert's own statement
    (``ON CONFLICT DO NOTHING``) in its chunk size, one transaction per chunk.
    """
    source = "store"
    try:
        rows = _rows_from_store(store)
    except sqlite3.Error:
        rows = []
    if not rows and manifest:
        rows, source = _rows_from_manifest(manifest), "synthesised from manifest"
    marks = ", ".join("?" * 7)

    attempts = []
    for _ in range(CEILING_ATTEMPTS):
        db = _fresh_db(new_db)
        t0, c0 = time.perf_counter(), time.process_time()
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO scalars ({COLUMNS}) VALUES ({marks})", rows)
        db.execute("COMMIT")
        attempts.append((time.perf_counter() - t0, time.process_time() - c0))
        stored = db.execute("SELECT count(*) FROM scalars").fetchone()[0]
        db.close()
    wall, cpu = min(attempts)  # a ceiling: the best attempt

    db = _fresh_db(new_db)
    sql = f"INSERT INTO scalars ({COLUMNS}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    t1, c1 = time.perf_counter(), time.process_time()
    for i in range(0, len(rows), TBCONVERT_CHUNK):
        db.execute("BEGIN IMMEDIATE")
        db.executemany(sql, rows[i : i + TBCONVERT_CHUNK])
        db.execute("COMMIT")
    chunked_wall, chunked_cpu = time.perf_counter() - t1, time.process_time() - c1
    db.close()
    return {
        "rows": len(rows),
        "stored": stored,
        "source": source,
        "work_wall": wall,
        "work_cpu": cpu,
        "attempts_wall": [a[0] for a in attempts],
        "chunked_wall": chunked_wall,
        "chunked_cpu": chunked_cpu,
        "sqlite_version": sqlite3.sqlite_version,
    }


def rewrite(store: str, new_db: str) -> dict[str, Any]:
    """What writing a store's rows costs SQLite alone: every row of every table of a
    tbconvert store, loaded before the clock starts, inserted into a fresh WAL database with
    the same tables and indexes by plain INSERTs of many rows each (as the writer makes
    them, see ``_insert_rows``), in one transaction.
    Best of ``CEILING_ATTEMPTS``.  No conversion can write the same store for less."""
    source = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        ddl = [
            statement
            for (statement,) in source.execute(
                "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') "
                "AND sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type = 'index'"
            )
        ]
        tables = [
            name
            for (name,) in source.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        rows = {name: source.execute(f'SELECT * FROM "{name}"').fetchall() for name in tables}
    finally:
        source.close()
    attempts = []
    for _ in range(CEILING_ATTEMPTS):
        db = _fresh_db(new_db, ddl)
        t0, c0 = time.perf_counter(), time.process_time()
        db.execute("BEGIN")
        for name, table_rows in rows.items():
            if table_rows:
                _insert_rows(db, name, table_rows)
        db.execute("COMMIT")
        attempts.append((time.perf_counter() - t0, time.process_time() - c0))
        db.close()
    wall, cpu = min(attempts)
    return {
        "rows": {name: len(table_rows) for name, table_rows in rows.items() if table_rows},
        "work_wall": wall,
        "work_cpu": cpu,
        "attempts_wall": [a[0] for a in attempts],
    }


def _insert_rows(db: sqlite3.Connection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """Plain INSERTs of up to 100 rows a statement (999 parameters at most), then one a
    statement for the rest: how tbconvert binds points (``writing.sqlite``)."""
    width = len(rows[0])
    per = max(1, min(100, 999 // width))
    one = f"({', '.join('?' * width)})"
    whole = len(rows) - len(rows) % per
    db.executemany(
        f'INSERT INTO "{table}" VALUES {", ".join([one] * per)}',
        (tuple(chain.from_iterable(rows[i : i + per])) for i in range(0, whole, per)),
    )
    db.executemany(f'INSERT INTO "{table}" VALUES {one}', rows[whole:])


def main(argv: list[str]) -> int:
    task, *args = argv
    if task == "accumulator":
        result = accumulator(args[0], args[1:])
    elif task == "ceiling":
        result = ceiling(*args)
    elif task == "rewrite":
        result = rewrite(*args)
    else:
        raise SystemExit(f"unknown task {task!r}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
