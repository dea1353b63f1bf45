"""What the one writer asks of a backend's bulk writes (alembic's ``Impl`` per dialect, in
small): :class:`Bulk`, which ``sqlite.SqliteBulk`` and ``postgres.PostgresBulk`` implement,
and the helpers both use.

Points bypass the ORM and SQLAlchemy's parameter processing (5x slower on this path): rows
are tuples handed to the DBAPI cursor.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

from sqlalchemy.engine import Connection

from tbconvert.rows import InsertRows, Row
from tbconvert.writing.statements import Statements

_RETRY_SQLSTATES = frozenset({"40P01", "40001"})


class Bulk(Protocol):
    """A backend's bulk writes and the hooks the writer calls around its transactions."""

    # True for a server that other converters may write to at the same time.
    shared: bool
    # Called before a write that waits on a server (see StoreWriter.call_when_waiting_on_server).
    waiting_on_server: Callable[[], None]

    def on_connect(self, dbapi: Any) -> None:
        """Set up the writer's own connection."""

    def after_commit(self) -> None:
        """A transaction of points committed."""

    def on_close(self, conn: Connection) -> None:
        """The writer closes its connection."""

    def text_value(self, value: str | None) -> str | None:
        """Text as the backend can hold it."""

    def lock_runs(self, statements: Statements, source: str, run_paths: Collection[str]) -> None:
        """Serialise the writers of these runs, where other writers may run."""

    def notices(self) -> list[str]:
        """What the user should hear about this store's writes."""

    def is_busy(self) -> bool:
        """True when another process holds the store's write lock right now."""

    def insert_points(self, dbapi: Any, table: str, rows: InsertRows, fresh: bool = False) -> int:
        """Insert point rows, ignoring rows already stored; how many were new."""

    def insert_blobs(self, dbapi: Any, blobs: Sequence[tuple[str, int, bytes]]) -> None:
        """Insert (sha256, size, data) rows, ignoring stored ones."""


def nothing() -> None:
    """The default hook: nothing to do."""


def is_transient(error: BaseException) -> bool:
    """A server's deadlock victim or serialisation failure: the transaction can run again."""
    original = getattr(error, "orig", error)
    return getattr(original, "sqlstate", None) in _RETRY_SQLSTATES


def executemany(dbapi: Any, sql: str, rows: Iterable[Row]) -> int:
    """Run ``sql`` for every row; returns the rows it changed."""
    cursor = dbapi.cursor()
    try:
        cursor.executemany(sql, rows)
        return int(cursor.rowcount)
    finally:
        cursor.close()
