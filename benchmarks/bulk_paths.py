"""A C-level SQLite bulk path against today's ``executemany``, from the same packed rows (#14).

    python benchmarks/bulk_paths.py STORE.db [--repeat 3]

STORE.db is a tbconvert store (``run.py --keep`` leaves one in ``benchmarks/data/work-*``).
Its scalar rows are packed the way the decoder hands them to the writer (``rows.PACKED_ROW``,
40 bytes a row, file by file) before any clock starts.  Then, into a fresh WAL database with
tbconvert's ``scalars`` table, in transactions of 50,000 rows (tbconvert's chunk), timed from
the packed bytes to the last commit:

* ``executemany``: what the writer did until the eighth pass of #14, the tuples unpacked by
  ``struct.iter_unpack`` in record order and bound one statement a row by ``sqlite3``
  (``INSERT ... ON CONFLICT DO NOTHING``);
* ``many_rows``: what the writer does now (``tbconvert.writing.statements.insert_many``): the
  rows sorted in key order (``tbconvert.rows.in_key_order``, timed), a hundred a statement,
  on the same connection and in the same transaction as everything else of the chunk;
* ``adbc``: ``adbc-driver-sqlite``'s ``adbc_ingest`` of an Arrow table whose columns are
  NumPy views of the same bytes (no tuple is ever made), on its own connection, one ADBC
  transaction per chunk.  Only when ``pip install adbc-driver-sqlite pyarrow`` was run (not a
  tbconvert dependency): it cannot share the writer's transaction, so it is a reference.

Median of ``--repeat`` attempts each, alternated.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from typing import Any

PACKED_ROW = struct.Struct("<qqqdd")  # tbconvert.rows.PACKED_ROW
CHUNK = 50_000
COLUMNS = "series_id, step, file_id, record_offset, value_index, wall_time, value"


def packed_chunks(store: str) -> list[tuple[int, bytes]]:
    """(file id, packed rows) per chunk of at most CHUNK rows, in file and offset order."""
    db = sqlite3.connect(store)
    rows = db.execute(
        "SELECT file_id, series_id, step, record_offset, wall_time, value FROM scalars "
        "ORDER BY file_id, record_offset, value_index"
    ).fetchall()
    db.close()
    chunks: list[tuple[int, bytes]] = []
    start = 0
    while start < len(rows):
        file_id = rows[start][0]
        stop = start
        while stop < len(rows) and stop - start < CHUNK and rows[stop][0] == file_id:
            stop += 1
        chunks.append(
            (
                file_id,
                b"".join(
                    PACKED_ROW.pack(s, st, o, w, v if v is not None else float("nan"))
                    for _f, s, st, o, w, v in rows[start:stop]
                ),
            )
        )
        start = stop
    return chunks


def fresh(store: str, path: str) -> None:
    """A new database at ``path`` with the store's ``scalars`` table and its indexes."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    source = sqlite3.connect(store)
    ddl = [
        sql
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'scalars' AND sql IS NOT NULL"
        )
    ]
    source.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    for statement in ddl:
        # The foreign keys stay declared; neither connection enforces them (tbconvert's own
        # writing connection does not either: see ``SqliteBulk.on_connect``).
        db.execute(statement)
    db.commit()
    db.close()


def with_executemany(path: str, chunks: list[tuple[int, bytes]]) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    for file_id, packed in chunks:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            f"INSERT INTO scalars ({COLUMNS}) VALUES (?, ?, {file_id}, ?, 0, ?, ?) "
            "ON CONFLICT DO NOTHING",
            PACKED_ROW.iter_unpack(packed),
        )
        db.execute("COMMIT")
    wall = time.perf_counter() - started
    db.close()
    return wall


def with_many_rows(path: str, chunks: list[tuple[int, bytes]]) -> float:
    import numpy as np

    from tbconvert.rows import in_key_order, packed_dtype
    from tbconvert.writing.statements import insert_many

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    for file_id, packed in chunks:
        ordered = in_key_order(np.frombuffer(packed, dtype=packed_dtype())).tobytes()
        db.execute("BEGIN IMMEDIATE")
        insert_many(
            db,
            f"INSERT INTO scalars ({COLUMNS})",
            f"(?, ?, {file_id}, ?, 0, ?, ?)",
            PACKED_ROW.iter_unpack(ordered),
            len(packed) // PACKED_ROW.size,
        )
        db.execute("COMMIT")
    wall = time.perf_counter() - started
    db.close()
    return wall


def with_adbc(path: str, chunks: list[tuple[int, bytes]]) -> float:
    import adbc_driver_sqlite.dbapi
    import numpy as np
    import pyarrow as pa

    layout = np.dtype(
        [
            ("series_id", "<i8"),
            ("step", "<i8"),
            ("record_offset", "<i8"),
            ("wall_time", "<f8"),
            ("value", "<f8"),
        ]
    )
    # Autocommit, with the transactions spelt out: the pragma cannot be set inside one.
    connection = adbc_driver_sqlite.dbapi.connect(path, autocommit=True)
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous = NORMAL")
    started = time.perf_counter()
    for file_id, packed in chunks:
        rows = np.frombuffer(packed, dtype=layout)
        count = len(rows)
        table = pa.table(
            {
                "series_id": rows["series_id"],
                "step": rows["step"],
                "file_id": np.full(count, file_id, dtype=np.int64),
                "record_offset": rows["record_offset"],
                "value_index": np.zeros(count, dtype=np.int64),
                "wall_time": rows["wall_time"],
                "value": pa.array(rows["value"], from_pandas=True),  # NaN -> NULL
            }
        )
        cursor.execute("BEGIN IMMEDIATE")
        cursor.adbc_ingest("scalars", table, mode="append")
        cursor.execute("COMMIT")
    wall = time.perf_counter() - started
    cursor.close()
    connection.close()
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    chunks = packed_chunks(args.store)
    rows = sum(len(packed) // PACKED_ROW.size for _f, packed in chunks)
    paths = {"executemany": with_executemany, "many_rows": with_many_rows}
    try:
        import adbc_driver_sqlite  # noqa: F401
    except ImportError:
        print("adbc-driver-sqlite is not installed: its path is left out", file=sys.stderr)
    else:
        paths["adbc"] = with_adbc
    walls: dict[str, list[float]] = {name: [] for name in paths}
    with tempfile.TemporaryDirectory() as work:
        target = os.path.join(work, "target.db")
        for _ in range(args.repeat):
            for name, insert in paths.items():
                fresh(args.store, target)
                walls[name].append(insert(target, chunks))
                check = sqlite3.connect(target)
                stored = check.execute("SELECT count(*) FROM scalars").fetchone()[0]
                check.close()
                if stored != rows:
                    raise SystemExit(f"{name} stored {stored} rows of {rows}")
    result: dict[str, Any] = {"rows": rows, "chunks": len(chunks)}
    for name, measured in walls.items():
        median = statistics.median(measured)
        result[name] = {"median_s": median, "rows_per_s": rows / median, "walls": measured}
    for name in paths:
        if name != "executemany":
            result[f"{name}_vs_executemany"] = (
                result["executemany"]["median_s"] / result[name]["median_s"]
            )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
