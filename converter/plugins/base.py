"""What every plugin decoder returns or raises."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


class DecodeFailure(Exception):
    """A value that its plugin cannot interpret (wrong shape or dtype, broken payload)."""


@dataclass(frozen=True)
class Decoded:
    """Rows for one store table decoded from one Summary.Value."""

    table: str
    rows: list[tuple[Any, ...]]
    dtype: str | None = None
    blobs: dict[str, bytes] = field(default_factory=dict)  # sha256 hex -> bytes, for blob_id


def blob(data: bytes, blobs: dict[str, bytes]) -> str:
    """Register bytes for content-addressed storage; returns the sha256 to put in blob_id."""
    sha = hashlib.sha256(data).hexdigest()
    blobs[sha] = data
    return sha
