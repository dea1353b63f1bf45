"""A remote object's head (its first bytes: the first record, the first tags) read once per
pass: the layout, the planner and the reader each need it, and :mod:`remote` fetches it for
the first and serves the others from a :class:`RemoteHeads` the pass owns."""

from __future__ import annotations

__all__ = ["HEAD_BYTES", "RemoteHeads"]

# What a read of an object's first record fetches.
HEAD_BYTES = 16 << 10


class RemoteHeads:
    """The heads of one pass over a logdir, by URL and listed size.

    The layout (a writer's first tags), the planner (is a grown object the same file: the
    digest of its first record) and the reader (the same digest, the gzip magic) each read
    an object's head; without this a grown object would cost three heads beside its new
    bytes.  :func:`~tbconvert.reading.discovery.classify` makes one for its pass, and the
    classification carries it to the planner and, in the read settings, to the readers
    (``--jobs`` workers get a copy of what the planner read).  A next pass (``--watch``)
    makes a new one, so it reads objects as they are then.
    """

    # At most this many heads are kept (about 16 MiB).
    MOST = 1024

    def __init__(self) -> None:
        """An empty set of heads."""
        self._heads: dict[tuple[str, int], bytes] = {}

    def keep(self, url: str, size: int, head: bytes) -> None:
        """Keep the head of ``url`` listed with ``size``, while there is room."""
        # An object that is all head is not kept: its reader then asks the server again, which
        # tells it of an object deleted or replaced since the listing (design §9).
        if size > HEAD_BYTES and len(self._heads) < self.MOST:
            self._heads[url, size] = head

    def kept(self, url: str, size: int) -> bytes | None:
        """The head kept for ``url`` listed with ``size``, or None."""
        return self._heads.get((url, size))
