"""The files of a published bundle and the bytes they may still take (``--max-size``)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Budget:
    """The bytes left of ``--max-size``, and what was left out because it would not fit
    (``left_out``: a kind, ``groups`` or ``media``, to the names of what it lost)."""

    left: int
    left_out: dict[str, list[str]] = field(default_factory=dict)

    def take(self, size: int, kind: str, name: str) -> bool:
        """Spend ``size`` bytes on ``name`` if they fit; else note it as left out."""
        if size > self.left:
            self.left_out.setdefault(kind, []).append(name)
            return False
        self.left -= size
        return True


class BundleWriter:
    """Files under a root on an fsspec file system, counted."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root
        self.files = 0
        self.bytes = 0

    def text(self, name: str, content: str) -> None:
        """Write ``content`` as UTF-8 to ``name`` (a path under the root)."""
        self.write(name, content.encode("utf-8"))

    def copy(self, source: str, name: str) -> None:
        """Copy the local file ``source`` to ``name``."""
        with open(source, "rb") as handle:
            self.write(name, handle.read())

    def write(self, name: str, content: bytes) -> None:
        """Write ``content`` to ``name``."""
        path = posixpath.join(self.root, name)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as handle:
            handle.write(content)
        self.files += 1
        self.bytes += len(content)
