"""PostgreSQL's binary COPY data for fixed-width rows, written by NumPy.

A server's converter spent most of its CPU handing COPY one row at a time (a Python call per
row, and a NaN check per row): the rows of the block path are a NumPy table already, and
every field of theirs has a fixed width, so the stream's tuples are structured arrays in the
wire's byte order, between the signature and the trailer.  A tuple is a 16-bit field count,
then per field a 32-bit length and the value, big-endian; NULL is the length -1 and no value.
NaN is stored as NULL on both backends (``value IS NULL`` means NaN), so the rare rows with a
NaN float are written one by one with ``struct``.

The stream is made piece by piece as it is sent (:class:`Stream`): the server takes in one
piece while the next is made, and a chunk's COPY, the server's work above all, is what a
server's conversion waits for.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
# COPY type names (writing.postgres) of fixed width: their big-endian NumPy dtype, and the same
# as a struct format.
FIXED = {"int4": ">i4", "int8": ">i8", "float8": ">f8"}
_STRUCTS = {"int4": struct.Struct(">i"), "int8": struct.Struct(">q"), "float8": struct.Struct(">d")}
_INT4 = (-(2**31), 2**31 - 1)
# Rows per piece of a stream (about 600 kB): enough that NumPy's cost per call is nothing.
PIECE_ROWS = 8192
# The COPY type of each point table's columns, in ``rows.POINT_COLUMNS`` order.  Binary COPY
# needs them up front; taken from the models they cost a server's conversion the models'
# import (50 ms, before its first COPY could begin).  tests/writing/test_pgcopy.py checks them
# against
# the models.
_KEY_TYPES = ("int8", "int8", "int8", "int8", "int4", "float8")
_PAYLOAD_TYPES = {
    "scalars": ("float8",),
    "images": ("int4", "int8", "text", "int4", "int4"),
    "audio": ("int4", "int8", "float8", "int4", "int8", "text", "text"),
    "histograms": ("float8", "float8", "float8", "float8", "float8", "text", "text"),
    "texts": ("int4", "text"),
    "params": ("text", "text", "float8", "text"),
    "tensors": ("text", "text", "int8"),
}
POINT_TYPES = {table: _KEY_TYPES + payload for table, payload in _PAYLOAD_TYPES.items()}


def encodable(table: np.ndarray, types: Sequence[str]) -> bool:
    """Whether every field of ``table`` (in column order) is of a fixed-width type and fits
    it: else the caller writes rows one by one, and the server reports what does not fit."""
    names = table.dtype.names or ()
    if len(names) != len(types) or any(kind not in FIXED for kind in types):
        return False
    for name, kind in zip(names, types, strict=True):
        if kind == "int4" and len(table):
            column = table[name]
            if int(column.min()) < _INT4[0] or int(column.max()) > _INT4[1]:
                return False
    return True


@dataclass(frozen=True)
class Stream:
    """The binary COPY stream of a table's rows, whose fields are the columns in order, of
    the fixed-width ``types`` (see :func:`encodable`)."""

    table: np.ndarray
    types: Sequence[str]

    def pieces(self, rows: int = PIECE_ROWS) -> Iterator[bytes]:
        """The stream in pieces of ``rows`` rows, each made when asked for: the signature
        with the first, the rows with a NaN float and the trailer with the last."""
        import numpy as np

        table, types = self.table, self.types
        names = table.dtype.names or ()
        floats = [name for name, kind in zip(names, types, strict=True) if kind == "float8"]
        nan = np.zeros(len(table), dtype=bool)
        for name in floats:
            nan |= np.isnan(table[name])
        layout: list[tuple[str, str]] = [("fields", ">i2")]
        for index, kind in enumerate(types):
            layout += [(f"length{index}", ">i4"), (f"value{index}", FIXED[kind])]
        widths = [np.dtype(FIXED[kind]).itemsize for kind in types]
        whole = table[~nan] if nan.any() else table
        head = SIGNATURE
        for start in range(0, len(whole), rows):
            part = whole[start : start + rows]
            tuples = np.empty(len(part), dtype=layout)
            tuples["fields"] = len(types)
            for index, (name, width) in enumerate(zip(names, widths, strict=True)):
                tuples[f"length{index}"] = width
                tuples[f"value{index}"] = part[name]
            yield head + tuples.tobytes()
            head = b""
        with_nan = b"".join(_tuple(row, types) for row in table[nan].tolist())
        yield head + with_nan + TRAILER


def _tuple(row: Sequence[Any], types: Sequence[str]) -> bytes:
    """One tuple, a NaN float as NULL."""
    parts = [struct.pack(">h", len(types))]
    for value, kind in zip(row, types, strict=True):
        if kind == "float8" and value != value:
            parts.append(struct.pack(">i", -1))
            continue
        fixed = _STRUCTS[kind]
        parts.append(struct.pack(">i", fixed.size) + fixed.pack(value))
    return b"".join(parts)
