"""The layout's cache of a remote logdir's file heads (``file_heads``, migration 0011): the
tags of a file's first records, by its size and time, so that a re-run over unchanged
objects fetches nothing (design §4).  Read here, before the writer opens; written by
``StoreWriter.save_file_heads``."""

from __future__ import annotations

import json
import os

from sqlalchemy import inspect, text

from tbconvert.store.engine import create_store_engine, sqlite_path, store_display
from tbconvert.store.errors import translate_errors
from tbconvert.store.migrate import current_revision

__all__ = ["Head", "read_file_heads"]

# (size, mtime_ns, tags): a file listed with that size and time begins with those tags.
Head = tuple[int, int, tuple[str, ...]]


def read_file_heads(url: str, source: str) -> dict[str, Head]:
    """The heads a store holds for a source, by path relative to the logdir; read without
    creating or changing anything (no store, or one older than 0011, holds none)."""
    path = sqlite_path(url)
    if path is not None:
        if not os.path.exists(path):
            return {}
        url = f"sqlite:///file:{path}?mode=ro&uri=true"
    engine = create_store_engine(url)
    try:
        with translate_errors(store_display(url)), engine.connect() as conn:
            if current_revision(conn) is None or not inspect(conn).has_table("file_heads"):
                return {}
            rows = conn.execute(
                text("SELECT path, size, mtime_ns, tags FROM file_heads WHERE source = :source"),
                {"source": source},
            )
            return {row[0]: (row[1], row[2], tuple(json.loads(row[3]))) for row in rows}
    finally:
        engine.dispose()
