"""What the store records per event file (SPEC §7): read by the planner, written by the writer."""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

from converter.store.engine import create_store_engine, sqlite_path, store_display
from converter.store.errors import translate_errors


@dataclass(frozen=True)
class FileState:
    """One row of ``event_files``: what was read of a file, committed with its points.

    Attributes:
        id: The row's id (None before it is saved).
        run_id, context_id: The (run, context) the file belongs to.
        path: The file's path relative to the logdir.
        size, mtime_ns: Size and mtime when last read.
        head_digest: sha256 of its first record (a changed one means the file was replaced).
        offset_consumed: The byte offset read to.
        records, damaged_records: Records read and damaged regions skipped, in total.
        status: new, ok, partial (ends in a torn record), damaged, invalid or gone.
        last_error: The last damage's reason.
        first_wall_time, last_wall_time: The span of its events' wall times.
    """

    id: int | None
    run_id: int
    context_id: int
    path: str
    size: int = 0
    mtime_ns: int = 0
    head_digest: str | None = None
    offset_consumed: int = 0
    records: int = 0
    damaged_records: int = 0
    status: str = "new"
    last_error: str | None = None
    first_wall_time: float | None = None
    last_wall_time: float | None = None


FILE_COLUMNS = (
    "run_id",
    "context_id",
    "path",
    "size",
    "mtime_ns",
    "head_digest",
    "offset_consumed",
    "records",
    "damaged_records",
    "status",
    "last_error",
    "first_wall_time",
    "last_wall_time",
)


def select_file_states(conn: Connection, source: str) -> dict[tuple[str, str], FileState]:
    """Every stored file state of one source (logdir), keyed by (run_path, path)."""
    columns = ", ".join(f"f.{column}" for column in FILE_COLUMNS)
    rows = conn.execute(
        text(
            f"SELECT r.run_path, f.id, {columns} FROM event_files AS f "
            "JOIN runs AS r ON r.id = f.run_id WHERE r.source = :source"
        ),
        {"source": source},
    ).all()
    return {(row[0], row[4]): FileState(*row[1:]) for row in rows}


def read_file_states(url: str, source: str) -> dict[tuple[str, str], FileState]:
    """Stored file states of a source (logdir), read without creating or changing anything.

    A SQLite store that does not exist yet holds nothing (every file is new).

    Raises:
        StoreError: the store exists but cannot be read (wrong password, not a store...).
    """
    path = sqlite_path(url)
    if path is not None:
        if not os.path.exists(path):
            return {}
        url = f"sqlite:///file:{path}?mode=ro&uri=true"
    engine = create_store_engine(url)
    try:
        with translate_errors(store_display(url)), engine.connect() as conn:
            return select_file_states(conn, source)
    finally:
        engine.dispose()
