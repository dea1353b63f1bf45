"""The decoder's buffer: rows decoded and not yet handed over to the writer."""

from __future__ import annotations

from collections import defaultdict

from tbconvert.rows import FileRows, Row


class RowBuffer:
    """Rows decoded and not yet handed over, per table, with the blobs they point to.

    The general path appends tuples to :meth:`scalars` (the hot loop binds that list once);
    the block path adds packed runs, each placed before the next tuple appended.
    """

    def __init__(self) -> None:
        """Start empty."""
        self._tables: defaultdict[str, list[Row]] = defaultdict(list)
        self._packed: list[tuple[int, bytes]] = []
        self._packed_count = 0
        self.blobs: dict[str, bytes] = {}

    def table(self, name: str) -> list[Row]:
        """The list of tuples of one table, to append to."""
        return self._tables[name]

    def scalar_tuples(self) -> int:
        """Scalar rows appended as tuples so far."""
        return len(self._tables["scalars"])

    def scalar_offsets(self, start: int) -> list[int]:
        """The record offsets of the scalar tuples from ``start`` on."""
        return [row[3] for row in self._tables["scalars"][start:]]

    def add_packed(self, packed: bytes, count: int, position: int | None = None) -> None:
        """Add ``count`` packed scalars rows before the scalar tuple at ``position``
        (default: after the tuples appended so far); positions never go back."""
        at = len(self._tables["scalars"]) if position is None else position
        self._packed.append((at, packed))
        self._packed_count += count

    def pending(self) -> int:
        """Rows held."""
        return sum(len(rows) for rows in self._tables.values()) + self._packed_count

    def take(self) -> tuple[dict[str, FileRows], dict[str, bytes]]:
        """Hand over every non-empty table's rows and the blobs; start afresh."""
        taken = {name: FileRows.of(rows) for name, rows in self._tables.items() if rows}
        if self._packed:
            taken["scalars"] = FileRows.merge(self._tables["scalars"], self._packed)
        blobs = self.blobs
        self._tables, self._packed, self._packed_count, self.blobs = defaultdict(list), [], 0, {}
        return taken, blobs
