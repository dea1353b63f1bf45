"""What the read API returns: series references, stored images, typed params."""

from __future__ import annotations

import io
import json
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from PIL import Image


class Connectable(Protocol):
    """A store to read: its name for messages, and read connections (one snapshot each)."""

    display: str

    def connect(self) -> AbstractContextManager[Connection]:
        """A read connection, with driver errors turned into StoreError."""


@dataclass(frozen=True)
class SeriesRef:
    """One series: the points of one tag and plugin in one (run, context)."""

    id: int
    run_id: int
    run_path: str
    context: str
    tag: str
    plugin: str


@dataclass(frozen=True)
class StoredImage:
    """One stored image and where it was logged; its bytes are read only when asked for."""

    run_id: int
    run_path: str
    context: str
    tag: str
    step: int
    wall_time: float | None
    idx: int
    format: str | None
    width: int | None
    height: int | None
    blob_id: int
    store: Connectable = field(repr=False, compare=False)

    @property
    def data(self) -> bytes:
        """The encoded bytes exactly as logged (PNG, GIF, JPEG...)."""
        with self.store.connect() as conn:
            return bytes(
                conn.execute(
                    text("SELECT data FROM blobs WHERE id = :id"), {"id": self.blob_id}
                ).scalar_one()
            )

    def open(self) -> Image.Image:
        """Decode the image with Pillow (lazily: pixels are decoded when first used)."""
        from PIL import Image

        return Image.open(io.BytesIO(self.data))


def typed_param(value: str | None, value_num: float | None, value_type: str) -> Any:
    """A ``v_params`` value as Python: float, int, bool, str, or parsed JSON."""
    if value is None:
        return None
    if value_type == "integer":
        return int(value)
    if value_type == "number":
        return value_num if value_num is not None else float(value)
    if value_type == "bool":
        return value == "true"
    return json.loads(value) if value_type == "json" else value
