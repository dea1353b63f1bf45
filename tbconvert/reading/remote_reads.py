"""How one pass reads a URL logdir (:class:`RemoteReads`): its file system's storage options,
and each object's head (its first bytes: the first record, the first tags) read once.  The
layout, the planner and the reader each need a head; :mod:`remote` fetches it for the first
and serves the others from the pass's :class:`RemoteHeads`.  Nothing here is process-wide:
a pass makes its own, and ``--jobs`` workers get it with their read settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HEAD_BYTES", "RemoteHeads", "RemoteReads"]

# What a read of an object's first record fetches.
HEAD_BYTES = 16 << 10


class RemoteHeads:
    """The heads of one pass over a logdir, by URL and listed size.

    The layout (a writer's first tags), the planner (is a grown object the same file: the
    digest of its first record) and the reader (the same digest, the gzip magic) each read
    an object's head; without this a grown object would cost three heads beside its new
    bytes.  The pass's :class:`RemoteReads` holds one; ``--jobs`` workers get a copy of what
    the planner read.  A next pass (``--watch``) makes a new one, so it reads objects as they
    are then.
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


@dataclass
class RemoteReads:
    """How one pass reads a URL logdir: its file system's storage options (as fsspec takes
    them: ``endpoint_url``, ``anon``, credentials) and the objects' heads, fetched once.

    :func:`~tbconvert.reading.discovery.classify` makes one when given none; reading without
    one uses no options and keeps no heads.
    """

    # Credentials among them: never shown.
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    heads: RemoteHeads = field(default_factory=RemoteHeads, repr=False)
