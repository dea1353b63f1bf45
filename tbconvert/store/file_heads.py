"""The layout's cache of a remote logdir's file heads (``file_heads``, migration 0011): the
tags of a file's first records, by its size and time, so that a re-run over unchanged
objects fetches nothing (design §4).  Read here, before the writer opens; written by
``writing.file_heads.save_file_heads``."""

from __future__ import annotations

import json

from sqlalchemy import inspect, text

from tbconvert.store.file_states import read_only

__all__ = ["Head", "read_file_heads"]

# (size, mtime_ns, tags): a file listed with that size and time begins with those tags.
Head = tuple[int, int, tuple[str, ...]]


def read_file_heads(url: str, source: str) -> dict[str, Head]:
    """The heads a store holds for a source, by path relative to the logdir; read without
    creating or changing anything (no store, or one older than 0011, holds none)."""
    with read_only(url) as conn:
        if conn is None or not inspect(conn).has_table("file_heads"):
            return {}
        rows = conn.execute(
            text("SELECT path, size, mtime_ns, tags FROM file_heads WHERE source = :source"),
            {"source": source},
        )
        return {row[0]: (row[1], row[2], tuple(json.loads(row[3]))) for row in rows}
