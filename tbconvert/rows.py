"""The contract between the decoders and the store: what a row is, and how rows travel.

A point row is a tuple of the table's columns in :data:`POINT_COLUMNS` order: the key columns
``(series_id, step, file_id, record_offset, value_index, wall_time)``, which say where the value
came from, then the plugin's payload columns (:data:`PAYLOAD_COLUMNS`).  Decoders name series
by *local* numbers, in the order they announce them as :class:`SeriesDefinition` s, and put
file id 0 in every row; the writer maps both to store ids with :func:`remap_to_store_ids`.

Rows travel in two containers: one file's rows of one table (:class:`FileRows`: tuples, and
the scalars of the NumPy block path still packed, 40 bytes a row between processes and no
tuple built before the driver needs it), and a group's, several files' (:class:`RowBatch`).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

KEY_COLUMNS = ("series_id", "step", "file_id", "record_offset", "value_index", "wall_time")
# A ``blob_id`` column arrives holding the sha256 of the bytes (see ``plugins.base.blob``) and
# is swapped for the blob's store id at insert time.
PAYLOAD_COLUMNS: dict[str, tuple[str, ...]] = {
    "scalars": ("value",),
    "images": ("idx", "blob_id", "format", "width", "height"),
    "audio": (
        "idx",
        "blob_id",
        "sample_rate",
        "num_channels",
        "length_frames",
        "content_type",
        "label",
    ),
    "histograms": ("count", "min", "max", "sum", "sum_squares", "buckets", "raw_buckets"),
    "texts": ("idx", "value"),
    "params": ("key", "value", "value_num", "value_type"),
    "tensors": ("dtype", "shape", "blob_id"),
}
POINT_COLUMNS = {table: KEY_COLUMNS + payload for table, payload in PAYLOAD_COLUMNS.items()}
POINT_TABLES = tuple(POINT_COLUMNS)

# One point row, columns in POINT_COLUMNS[table] order.
Row = tuple[Any, ...]


class SeriesDefinition(NamedTuple):
    """A series as a decoder announces it: its local number and the columns ``series``
    stores, taken from the tag's first metadata."""

    local: int
    tag: str
    plugin: str
    dtype: str | None
    display_name: str | None
    description: str | None
    plugin_content: bytes | None


class TagMetadata(NamedTuple):
    """What the store remembers of a tag's first metadata (the columns of ``series``), for
    files that resume past it: TF1 writers send metadata only once per tag."""

    plugin: str
    display_name: str | None
    description: str | None
    plugin_content: bytes | None


# A scalars row: struct makes the tuples straight from packed rows, faster than zip().
_ROW = struct.Struct("<qqqqqdd")
# A block path row as packed: (series_id, step, record_offset, wall_time, value).  The file id
# is the same for a whole chunk and the value index is 0: SQLite binds two parameters fewer a
# row (executemany ~8% faster) and workers send 40 bytes a row instead of 56.
PACKED_ROW = struct.Struct("<qqqdd")
_PACKED_FIELDS = ("series", "step", "offset", "wall_time", "value")


@functools.cache
def packed_dtype() -> np.dtype[Any]:
    """The NumPy dtype of one packed row (``PACKED_ROW``)."""
    import numpy as np

    return np.dtype(
        [
            ("series", "<i8"),
            ("step", "<i8"),
            ("offset", "<i8"),
            ("wall_time", "<f8"),
            ("value", "<f8"),
        ]
    )


def pack_rows(
    series: np.ndarray,
    step: np.ndarray,
    offset: np.ndarray,
    wall_time: np.ndarray,
    value: np.ndarray,
) -> bytes:
    """Scalars rows of the block path packed, for :class:`FileRows`."""
    import numpy as np

    table = np.empty(len(series), dtype=packed_dtype())
    table["series"], table["step"], table["offset"] = series, step, offset
    table["wall_time"], table["value"] = wall_time, value
    return table.tobytes()


def join_packed(parts: Sequence[tuple[bytes, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Packed parts of several files, each with its file's id, joined as one array of packed
    rows (``packed_dtype``) and each row's file id."""
    import numpy as np

    rows = np.frombuffer(b"".join(packed for packed, _ in parts), dtype=packed_dtype())
    files = np.repeat(
        np.array([file_id for _, file_id in parts], dtype=np.int64),
        [len(packed) // PACKED_ROW.size for packed, _ in parts],
    )
    return rows, files


def packed_columns(packed: bytes | np.ndarray) -> tuple[np.ndarray, ...]:
    """Packed rows (their bytes, or an array of ``packed_dtype``) as NumPy columns in key
    order: series, step, record offset, value index (always 0), wall time, value."""
    import numpy as np

    table = np.frombuffer(packed, dtype=packed_dtype()) if isinstance(packed, bytes) else packed
    zeros = np.zeros(len(table), dtype=np.int64)
    return (
        table["series"],
        table["step"],
        table["offset"],
        zeros,
        table["wall_time"],
        table["value"],
    )


class FileRows:
    """One file's rows of one table, in record order: row tuples, and (scalars) stretches of
    packed rows from the block path.

    Decoded, the rows name series by local numbers and file 0; :meth:`with_store_ids` gives
    them the store's ids: packed parts are rewritten at once by NumPy, tuples are mapped only
    as they are consumed (a group holds thousands of files' rows until it commits, and
    mapped copies held that long cost the garbage collector more than the mapping itself).
    Iterating makes the row tuples one at a time, so no list of them is built; packed parts
    are what workers send to the writer (bytes pickle cheaply).  Iterable any number of
    times.  A writer takes :meth:`general_rows` and the narrower :meth:`packed_rows` instead.
    """

    __slots__ = ("_count", "_ids", "_parts", "file_id")

    def __init__(
        self,
        parts: list[list[Row] | bytes],
        count: int,
        file_id: int = 0,
        series_ids: Sequence[int] | None = None,
    ) -> None:
        """Args: row tuples and packed parts in record order, their total, the file id, and
        the store id of each local series number when the tuples are still to be mapped."""
        self._parts = parts
        self._count = count
        self.file_id = file_id
        self._ids = series_ids

    @classmethod
    def of(cls, rows: list[Row], file_id: int = 0) -> FileRows:
        """Row tuples as they are."""
        return cls([rows] if rows else [], len(rows), file_id)

    @classmethod
    def merge(cls, tuples: list[Row], packed: Sequence[tuple[int, bytes]]) -> FileRows:
        """The general path's row tuples with packed parts, each ``(position, bytes)``
        belonging before the tuple at ``position``."""
        parts: list[list[Row] | bytes] = []
        done = 0
        for position, table in packed:
            if position > done:
                parts.append(tuples[done:position])
            parts.append(table)
            done = position
        if done < len(tuples):
            parts.append(tuples[done:])
        count = len(tuples) + sum(len(table) for _, table in packed) // PACKED_ROW.size
        return cls(parts, count)

    def with_store_ids(self, series_ids: Sequence[int], file_id: int) -> FileRows:
        """The same rows in store ids: local series numbers through ``series_ids`` (a list
        that may only grow) and the file id set."""
        import numpy as np

        lookup = np.asarray(series_ids, dtype=np.int64)
        parts: list[list[Row] | bytes] = []
        for part in self._parts:
            if isinstance(part, list):
                parts.append(part)
                continue
            # Rewritten in a copy of the bytes through a view of its series column: a third
            # of the cost of copying the table, assigning the field and packing it again, for
            # a sweep's file of a few hundred rows.
            rewritten = bytearray(part)
            series = np.frombuffer(rewritten, dtype=packed_dtype())["series"]
            series[:] = lookup[series]
            parts.append(bytes(rewritten))
        return FileRows(parts, self._count, file_id, series_ids)

    def files(self) -> list[FileRows]:
        """The rows of each file: this one (as :meth:`RowBatch.files`)."""
        return [self]

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Row]:
        return chain.from_iterable(
            self._tuples(part) if isinstance(part, list) else self._whole_rows(part)
            for part in self._parts
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileRows) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable parts, like a list

    def __repr__(self) -> str:
        return f"FileRows({list(self)!r})"

    def parts(self) -> list[list[Row] | bytes]:
        """Row tuples (as decoded: see :meth:`tuple_parts`) and packed parts (see
        :func:`packed_columns`), in record order."""
        return self._parts

    def tuple_parts(self) -> list[tuple[list[Row], Sequence[int] | None]]:
        """Each list of row tuples with the store ids its series numbers map to (None: the
        tuples hold store ids, or are as decoded)."""
        return [(part, self._ids) for part in self._parts if isinstance(part, list)]

    def general_rows(self) -> Iterator[Row]:
        """The rows the general path made (whole rows), in record order."""
        return chain.from_iterable(
            self._tuples(part) for part in self._parts if isinstance(part, list)
        )

    def packed_count(self) -> int:
        """How many rows :meth:`packed_rows` yields."""
        return sum(len(part) for part in self._parts if isinstance(part, bytes)) // PACKED_ROW.size

    def packed_rows(self) -> Iterator[Row]:
        """The other rows in key order (see :func:`in_key_order`), as ``(series_id, step,
        record_offset, wall_time, value)``."""
        return PACKED_ROW.iter_unpack(in_key_order(self._packed()).tobytes())

    def packed_table(self) -> np.ndarray:
        """The other rows in key order, whole, as one NumPy table (fields in column order)."""
        return in_key_order(_with_file(self._packed(), self.file_id, value_index=True))

    def _tuples(self, part: list[Row]) -> Iterable[Row]:
        ids, file_id = self._ids, self.file_id
        if ids is None:
            return part
        return ((ids[row[0]], row[1], file_id, *row[3:]) for row in part)

    def _packed(self) -> np.ndarray:
        import numpy as np

        packed = b"".join(part for part in self._parts if isinstance(part, bytes))
        return np.frombuffer(packed, dtype=packed_dtype())

    def _whole_rows(self, part: bytes) -> Iterator[Row]:
        import numpy as np

        rows = np.frombuffer(part, dtype=packed_dtype())
        return _ROW.iter_unpack(_with_file(rows, self.file_id, value_index=True).tobytes())


class RowBatch:
    """The rows of one table read from several files, inserted together: a group's (issue
    #14).  Iterable any number of times and sized, like the rows of one file."""

    __slots__ = ("_count", "parts")

    def __init__(self, parts: Sequence[FileRows] = ()) -> None:
        """Args: each file's rows, in the order they were read."""
        self.parts: list[FileRows] = list(parts)
        self._count = sum(len(part) for part in self.parts)

    def add(self, rows: FileRows) -> None:
        """Append one file's rows."""
        self.parts.append(rows)
        self._count += len(rows)

    def files(self) -> list[FileRows]:
        """The rows of each file, in the order they were read."""
        return self.parts

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Row]:
        return chain.from_iterable(self.parts)

    def general_rows(self) -> Iterator[Row]:
        """The rows made as tuples (whole rows), of every file."""
        return chain.from_iterable(part.general_rows() for part in self.parts)

    def packed_count(self) -> int:
        """How many rows :meth:`packed_rows` yields."""
        return sum(part.packed_count() for part in self.parts)

    def packed_rows(self) -> Iterator[Row]:
        """The other rows in key order (see :func:`in_key_order`), as ``(series_id, step,
        file_id, record_offset, wall_time, value)``: unlike one file's, they do not share a
        file id."""
        # One widening for the whole group, not one per file: a sweep's files are small.
        widened = in_key_order(_with_file(*join_packed(self._packed_parts())))
        return _BATCH_ROW.iter_unpack(widened.tobytes())

    def packed_table(self) -> np.ndarray:
        """The other rows in key order, whole, as one NumPy table (fields in column order)."""
        return in_key_order(_with_file(*join_packed(self._packed_parts()), value_index=True))

    def _packed_parts(self) -> list[tuple[bytes, int]]:
        return [
            (packed, part.file_id)
            for part in self.parts
            for packed in part.parts()
            if isinstance(packed, bytes)
        ]


_BATCH_ROW = struct.Struct("<qqqqdd")


def in_key_order(table: np.ndarray) -> np.ndarray:
    """Rows (packed, or widened with their file ids) sorted as the point tables' key:
    series, step, file, record offset.  A writer logs every series at each step, so rows in
    record order go to as many places in the key as there are series; in key order each
    lands next to the one before, which SQLite inserts 1.7x faster (1M rows of 40 series:
    1.85 s against 1.05 s), for a sort costing a few milliseconds a chunk."""
    import numpy as np

    names = table.dtype.names or ()
    keys = [table[name] for name in ("offset", "file", "step", "series") if name in names]
    # Rows taken as opaque records: NumPy gathers a structured array field by field, a
    # tenth as fast (3.4 ms against 0.2 ms for a chunk of 50,000 rows).
    records = table.view(np.dtype((np.void, table.dtype.itemsize)))
    return np.take(records, np.lexsort(keys)).view(table.dtype)


def _with_file(
    rows: np.ndarray, file_id: int | np.ndarray, value_index: bool = False
) -> np.ndarray:
    """Packed rows (``packed_dtype``) widened with their file id (one for all, or one each),
    and a value index of 0 if asked (``_ROW``; else ``_BATCH_ROW``)."""
    import numpy as np

    keys = ("series", "step", "file", "offset", "index")[: 5 if value_index else 4]
    table = np.zeros(
        len(rows), dtype=[(name, "<i8") for name in keys] + [("wall_time", "<f8"), ("value", "<f8")]
    )
    for name in _PACKED_FIELDS:
        table[name] = rows[name]
    table["file"] = file_id
    return table


# What the store inserts at once: one file's rows, or a group's.
InsertRows = FileRows | RowBatch


def remap_to_store_ids(rows: FileRows, series_ids: Sequence[int], file_id: int) -> FileRows:
    """A table's rows as decoded (local series numbers, file id 0) in the store's ids."""
    return rows.with_store_ids(series_ids, file_id)
