"""What every plugin decoder returns or raises."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

# The blobs of a value that has none: shared, so read-only.
NO_BLOBS: Mapping[str, bytes] = MappingProxyType({})


class DecodeFailure(Exception):
    """A value that its plugin cannot interpret (wrong shape or dtype, broken payload)."""


class Decoded(NamedTuple):
    """Rows for one store table decoded from one Summary.Value (a tuple: one is made per
    value, and a dataclass took twice as long to make)."""

    table: str
    rows: list[tuple[Any, ...]]
    dtype: str | None = None
    blobs: Mapping[str, bytes] = NO_BLOBS  # sha256 hex -> bytes, for blob_id


def blob(data: bytes, blobs: dict[str, bytes]) -> str:
    """Register bytes for content-addressed storage; returns the sha256 to put in blob_id."""
    sha = hashlib.sha256(data).hexdigest()
    blobs[sha] = data
    return sha
