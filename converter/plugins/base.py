"""What every plugin decoder returns or raises."""

from __future__ import annotations

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
    notes: list[str] = field(default_factory=list)
