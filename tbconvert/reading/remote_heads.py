"""A remote object's head (its first bytes: the first record, the first tags) read once per
pass (issue #44): the layout, the planner and the reader each need it, and :mod:`remote`
fetches it for the first and serves the others from here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HEAD_BYTES", "heads_read_once", "keep_head", "kept_head"]

# What a read of an object's first record fetches.
HEAD_BYTES = 16 << 10
# Within a pass, the heads fetched (at most _HEADS_KEPT of them, about 16 MiB), by URL and
# listed size: None outside a pass.
_HEADS_KEPT = 1024
_heads: dict[tuple[str, int], bytes] | None = None


@contextmanager
def heads_read_once() -> Iterator[None]:
    """Within (one pass over a logdir), each object's first bytes are fetched at most once.

    The layout (a writer's first tags), the planner (is a grown object the same file: the
    digest of its first record) and the reader (the same digest, the gzip magic) each read
    an object's head; a grown object cost three heads beside its new bytes (issue #44).
    Heads are kept by URL and listed size, and forgotten on leaving, so the next pass
    (``--watch``) reads objects as they are then.  ``--jobs`` workers, forked within the
    pass, inherit what the planner read.
    """
    global _heads
    outer = _heads
    if outer is None:
        _heads = {}
    try:
        yield
    finally:
        _heads = outer


def keep_head(url: str, size: int, head: bytes) -> None:
    """Keep the head of ``url`` listed with ``size``, within a pass and while there is room."""
    # An object that is all head is not kept: its reader then asks the server again, which
    # tells it of an object deleted or replaced since the listing (design §9).
    if _heads is not None and size > HEAD_BYTES and len(_heads) < _HEADS_KEPT:
        _heads[url, size] = head


def kept_head(url: str, size: int) -> bytes | None:
    """The head kept for ``url`` listed with ``size`` in this pass, or None."""
    return None if _heads is None else _heads.get((url, size))
