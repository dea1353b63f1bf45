"""A SQLite store's scalars as Arrow batches, read in a child process by ADBC's SQLite driver
(``adbc-driver-sqlite``, in the ``parquet`` extra): the speed path of ``export dataset``.

Python's ``sqlite3`` makes a tuple of objects per row, which caps any reader through it at
about 0.9M rows/s; the ADBC driver builds Arrow columns in C, about 1.9M rows/s (figures:
docs/performance.md).  It runs in a child process for two reasons: it links its own copy of
SQLite, and two copies in one process release each other's POSIX locks when either closes
the file (SQLite's "How To Corrupt" §2.2); and the child's scan overlaps the parent's Parquet
writing on another core.

The child's rows must be those of the parent's snapshot (``Store.snapshot()``).  The child
opens its read transaction, prints a digest of the store's per-file state and point count
(``FINGERPRINT``, which every commit of points changes: points and offsets commit together),
then streams the rows as Arrow IPC; the parent compares the digest with its own and, on any
difference or failure before the first row, stops the child and reads through its own
connection instead (the general path, ``dataset_reads.fetch_batches``), which an
equivalence test binds this path to.

Columns that may be NULL are read as ``coalesce(x, 0.0)`` with ``x IS NULL`` beside it: the
driver infers a column's type from its first values, and a batch of NULLs first would type a
REAL column as an integer.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

FINGERPRINT = (
    "SELECT id, run_id, context_id, offset_consumed, quote(head_digest), quote(selection), "
    "(SELECT coalesce(sum(points), 0) FROM series_summaries) FROM event_files ORDER BY id"
)
BATCH_ROWS = 65536


def scalars_sql(origin: bool) -> str:
    """Every scalar point: series id (with file id and record offset when ``origin``), step,
    then wall time and value each as (value or 0.0, whether NULL)."""
    keys = "series_id, file_id, record_offset" if origin else "series_id"
    return (
        f"SELECT {keys}, step, coalesce(wall_time, 0.0), wall_time IS NULL, "
        "coalesce(value, 0.0), value IS NULL FROM scalars"
    )


def available() -> bool:
    """Whether the ADBC SQLite driver is installed."""
    return importlib.util.find_spec("adbc_driver_sqlite") is not None


def digest(rows: Sequence[Sequence[Any]]) -> str:
    """The digest of ``FINGERPRINT``'s rows, the same from either driver."""
    return hashlib.sha256(repr([tuple(row) for row in rows]).encode()).hexdigest()


def scalar_batches(path: str, snapshot_digest: str, origin: bool) -> Iterator[Any] | None:
    """The scalars of the SQLite store at ``path`` as Arrow record batches (columns of
    ``scalars_sql``), read by a child process in a snapshot whose ``FINGERPRINT`` digest is
    ``snapshot_digest``; None when the driver is missing, the child cannot start or its
    snapshot differs (the caller then reads the rows itself)."""
    if not available():
        return None
    errors = tempfile.TemporaryFile()  # noqa: SIM115  (closed by the stream)
    command = [sys.executable, "-m", __name__, path, "1" if origin else "0"]
    child = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors
    )
    assert child.stdout is not None
    if child.stdout.readline().decode().strip() != snapshot_digest:
        _stop(child, errors)
        return None
    return _stream(child, child.stdout, errors, path)


def _stream(
    child: subprocess.Popen[bytes], out: IO[bytes], errors: IO[bytes], path: str
) -> Iterator[Any]:
    import pyarrow as pa

    from tbconvert.errors import StoreError

    try:
        # A child that failed ends its stream early: its exit code and message follow.
        with contextlib.suppress(pa.ArrowInvalid):
            yield from pa.ipc.open_stream(out)
        if child.wait() != 0:
            errors.seek(0)
            message = errors.read().decode(errors="replace").strip().splitlines()
            raise StoreError(
                f"reading the scalars failed: {message[-1] if message else child.returncode}",
                path=path,
                hint="uninstall adbc-driver-sqlite to read through Python's sqlite3",
            )
    finally:
        _stop(child, errors)


def _stop(child: subprocess.Popen[bytes], errors: IO[bytes]) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()
    if child.stdout is not None:
        child.stdout.close()
    errors.close()


def _serve(path: str, origin: bool) -> None:
    import adbc_driver_sqlite.dbapi as dbapi
    import pyarrow as pa

    out = sys.stdout.buffer
    # Not autocommit: both statements read in one transaction, one snapshot.
    with dbapi.connect(f"file:{path}?mode=ro", autocommit=False) as conn:
        cursor = conn.cursor()
        cursor.execute(FINGERPRINT)
        marks = cursor.fetch_arrow_table().to_pylist()
        out.write(digest([tuple(row.values()) for row in marks]).encode() + b"\n")
        out.flush()
        cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        cursor.execute(scalars_sql(origin))
        reader = cursor.fetch_record_batch()
        with pa.ipc.new_stream(out, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        conn.rollback()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2] == "1")
