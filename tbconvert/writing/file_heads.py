"""Writes the layout's reads of a remote logdir's files (``file_heads``, migration 0011;
read back by ``store.file_heads`` before the next pass classifies the logdir)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from tbconvert.writing.statements import Statements

__all__ = ["save_file_heads"]


def save_file_heads(
    statements: Statements, source: str, heads: Mapping[str, tuple[int, int, tuple[str, ...]]]
) -> None:
    """Replace a source's heads (size, time and first tags, by path relative to the
    logdir) with ``heads``, in the writer's open transaction."""
    statements.run("DELETE FROM file_heads WHERE source = :source", {"source": source})
    if not heads:
        return
    statements.many(
        "INSERT INTO file_heads (source, path, size, mtime_ns, tags) "
        "VALUES (:source, :path, :size, :mtime_ns, :tags)",
        [
            {
                "source": source,
                "path": path,
                "size": size,
                "mtime_ns": mtime_ns,
                "tags": json.dumps(list(tags)),
            }
            for path, (size, mtime_ns, tags) in sorted(heads.items())
        ],
    )
