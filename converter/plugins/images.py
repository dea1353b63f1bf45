"""Placeholder: being written."""

from __future__ import annotations

from typing import Any

from converter.plugins.base import Decoded, DecodeFailure


def decode(value: Any, metadata: Any) -> Decoded:
    """Not implemented yet."""
    raise DecodeFailure("not implemented")
