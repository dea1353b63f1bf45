"""Reading a store: the Python API behind ``tbconvert runs`` and friends (SPEC §10)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from converter.errors import StoreError
from converter.store.engine import create_store_engine, sqlite_path, store_url
from converter.store.errors import translate_errors
from converter.store.writer import FileState, select_file_states

class Store:
    """A store opened for reading.  Use :func:`open_store`."""

    def __init__(self, engine: Engine, display: str) -> None:
        """Wrap an engine whose schema is current."""
        self.engine = engine
        self.display = display

    def close(self) -> None:
        """Release the store's connections."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A read connection, with driver errors turned into StoreError."""
        with translate_errors(self.display), self.engine.connect() as conn:
            yield conn

    def runs(self) -> list[dict[str, Any]]:
        """Every run with its group, contexts and series/point counts, sorted by logdir, path."""
        sql = text(
            "SELECT r.run_id, r.logdir, r.run_path, r.group_path, r.name, "
            "r.first_wall_time, r.last_wall_time, "
            "(SELECT count(*) FROM series AS s WHERE s.run_id = r.run_id) AS series, "
            "(SELECT count(*) FROM scalars AS p JOIN series AS s ON s.id = p.series_id "
            " WHERE s.run_id = r.run_id) AS scalar_points "
            "FROM v_runs AS r ORDER BY r.logdir, r.run_path"
        )
        contexts_sql = text(
            "SELECT DISTINCT s.run_id, c.name FROM series AS s JOIN contexts AS c "
            "ON c.id = s.context_id ORDER BY s.run_id, c.name"
        )
        with self.connect() as conn:
            rows = [dict(row._mapping) for row in conn.execute(sql)]
            contexts: dict[int, list[str]] = {}
            for run_id, name in conn.execute(contexts_sql):
                contexts.setdefault(run_id, []).append(name)
        for row in rows:
            row["contexts"] = contexts.get(row["run_id"], [])
        return rows


def open_store(store: str | os.PathLike[str] | None = None) -> Store:
    """Open an existing store for reading (never creates or upgrades it).

    Raises:
        StoreError: there is no store there, or its schema is not this version's.
    """
    from converter.store.migrate import current_revision, head_revision

    url = store_url(store if store is not None else os.environ.get("TBCONVERT_STORE",
                                                                    "tbconvert.db"))
    path = sqlite_path(url)
    display = path or url
    if path is not None and not os.path.exists(path):
        raise StoreError("no store here", path=path,
                         hint="convert a logdir first: tbconvert tf --logdir DIR --store PATH")
    engine = create_store_engine(url)
    with translate_errors(display), engine.connect() as conn:
        current = current_revision(conn)
    head = head_revision()
    if current != head:
        engine.dispose()
        if current is None:
            raise StoreError("not a tbconvert store", path=display, hint="check --store")
        raise StoreError(
            f"the store is at schema revision {current}, this version reads {head}",
            path=display,
            hint="run 'tbconvert db upgrade' (or upgrade tbconvert if the store is newer)",
        )
    return Store(engine, display)


def read_file_states(url: str, logdir: str) -> dict[tuple[str, str], FileState]:
    """Stored file states of a logdir, read without creating or changing anything.

    A missing store, or one that cannot be read, gives an empty dict (everything is new).
    """
    path = sqlite_path(url)
    if path is not None:
        if not os.path.exists(path):
            return {}
        url = f"sqlite:///file:{path}?mode=ro&uri=true"
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return select_file_states(conn, logdir)
    except Exception:  # noqa: BLE001 - a store we cannot read plans as empty
        return {}
    finally:
        engine.dispose()
