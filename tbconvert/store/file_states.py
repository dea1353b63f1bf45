"""What the store records per event file (design §7): read by the planner, written by the writer."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from tbconvert.store.engine import create_store_engine, sqlite_path, store_display
from tbconvert.store.errors import translate_errors
from tbconvert.store.migrate import current_revision, refuse_foreign


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
        status: new; reading (a read stopped between two chunks: never skipped as
            unchanged); ok; partial (read to a torn final record); damaged; invalid; gone.
        last_error: The last damage's reason.
        first_wall_time, last_wall_time: The span of its events' wall times.
        selection: The plugins and tags its points were read under
            (``Selection.canonical``; None: everything).

    Size and mtime describe the file as it was when its read began, and mean "read to its
    end" only once the status is past ``reading``: a file is skipped unopened only then.
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
    selection: str | None = None

    @property
    def complete(self) -> bool:
        """Read to its end (or to a torn final record) when last read, and still there."""
        return self.status not in _INCOMPLETE

    def updated(self, **changes: Any) -> FileState:
        """A copy with ``changes``: ``dataclasses.replace`` without its per-field ``__init__``
        (a sweep makes three per file)."""
        unknown = changes.keys() - _FIELDS
        if unknown:
            raise TypeError(f"FileState has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(FileState)
        fields = copy.__dict__  # frozen forbids setattr, not filling a new instance's dict
        fields.update(self.__dict__)
        fields.update(changes)
        return copy


_FIELDS = frozenset(FileState.__dataclass_fields__)
_INCOMPLETE = frozenset({"new", "reading", "gone"})


@dataclass(frozen=True)
class KnownFile:
    """A stored file state with the (run, context) it belongs to."""

    state: FileState
    run_path: str
    context: str


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
    "selection",
)


def file_rows(states: Iterable[FileState]) -> list[dict[str, Any]]:
    """The parameters of the statements that save files' states."""
    now = time.time()
    return [
        {
            **{column: _finite_or_none(getattr(state, column)) for column in FILE_COLUMNS},
            "updated_at": now,
            "id": state.id,
        }
        for state in states
    ]


def _finite_or_none(value: Any) -> Any:
    # SQLite stores NaN as NULL by itself; PostgreSQL would keep it.
    return None if isinstance(value, float) and math.isnan(value) else value


def select_file_states(
    conn: Connection, source: str, *, before_0005: bool = False
) -> dict[str, KnownFile]:
    """Every stored file state of one source (logdir), keyed by the file's path relative to
    the logdir: a file is the same file whatever (run, context) it was filed under.

    ``before_0005``: the store is older than revision 0005 (a dry run reads it as it is):
    no ``selection`` column (everything), and a ``partial`` file may be a read that stopped
    between chunks, as the migration will assume.
    """
    columns = ", ".join(
        "NULL" if before_0005 and column == "selection" else f"f.{column}"
        for column in FILE_COLUMNS
    )
    rows = conn.execute(
        text(
            f"SELECT r.run_path, c.name, f.id, {columns} FROM event_files AS f "
            "JOIN runs AS r ON r.id = f.run_id JOIN contexts AS c ON c.id = f.context_id "
            "WHERE r.source = :source ORDER BY f.id"
        ),
        {"source": source},
    ).all()
    known: dict[str, KnownFile] = {}
    for row in rows:
        state = FileState(*row[2:])
        if before_0005 and state.status == "partial":
            state = state.updated(status="reading")
        held = known.get(state.path)
        # A store written before revision 0005 may hold a file twice, once marked gone.
        if held is None or held.state.status == "gone":
            known[state.path] = KnownFile(state, row[0], row[1])
    return known


def read_file_states(url: str, source: str) -> dict[str, KnownFile]:
    """Stored file states of a source (logdir), read without creating or changing anything.

    A SQLite store that does not exist yet, or a database without the schema yet, holds
    nothing (every file is new); an older schema is read as the upgrade will leave it.

    Raises:
        StoreError: the store exists but cannot be read (wrong password, not a store...).
    """
    with read_only(url) as conn:
        if conn is None:
            return {}
        present = {column["name"] for column in inspect(conn).get_columns("event_files")}
        return select_file_states(conn, source, before_0005="selection" not in present)


@contextmanager
def read_only(url: str) -> Iterator[Connection | None]:
    """A connection that changes nothing to the store at ``url``; None when there is no
    store there yet (no SQLite file, or a database without the schema).

    Raises:
        StoreError: the store cannot be read, or the database is not a store.
    """
    path = sqlite_path(url)
    if path is not None:
        if not os.path.exists(path):
            yield None
            return
        url = f"sqlite:///file:{path}?mode=ro&uri=true"
    engine = create_store_engine(url)
    try:
        with translate_errors(store_display(url)), engine.connect() as conn:
            if current_revision(conn) is None:
                refuse_foreign(conn, None)  # a database not ours is no empty store
                yield None
                return
            yield conn
    finally:
        engine.dispose()
