"""Writing a dataset's Parquet files: per table, one writer per partition, fed in batches.

Files are written under the dataset's temporary directory, with the names they take once the
manifest commits them.  A partition's rows are buffered up to a row group; all partitions'
buffers together are held under a budget (the largest is flushed first), so memory stays
bounded however many partitions a table has.  A file is closed and the next one begun when
it reaches ``max_bytes`` of data, which keeps files at tens to hundreds of MB.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from tbconvert.output.dataset_manifest import TEMPORARY, DatasetFiles

ROW_GROUP_BYTES = 6 << 20
BUFFER_BUDGET_BYTES = 24 << 20
FILE_BYTES = 256 << 20


@dataclass
class _Open:
    writer: Any
    handle: Any
    name: str
    bytes: int = 0


@dataclass
class TableWriter:
    """The new files of one table, per partition (``""``: the table is not partitioned)."""

    files: DatasetFiles
    table: str
    schema: Any
    generation: int
    max_bytes: int = FILE_BYTES
    written: dict[str, list[str]] = field(default_factory=dict)
    rows: int = 0
    _buffers: dict[str, list[Any]] = field(default_factory=dict)
    _buffered: dict[str, int] = field(default_factory=dict)
    _open: dict[str, _Open] = field(default_factory=dict)

    def add(self, partition: str, batch: Any) -> None:
        """Queue a batch (an Arrow table of the schema's columns) for a partition."""
        if not batch.num_rows:
            return
        self._buffers.setdefault(partition, []).append(batch)
        self._buffered[partition] = self._buffered.get(partition, 0) + batch.nbytes
        self.rows += batch.num_rows
        if self._buffered[partition] >= ROW_GROUP_BYTES:
            self._flush(partition)
        while sum(self._buffered.values()) > BUFFER_BUDGET_BYTES:
            self._flush(max(self._buffered, key=self._buffered.__getitem__))

    def close(self) -> dict[str, list[str]]:
        """Write what is buffered and close every file; returns the new files' names (as
        they will be once moved into place) per partition."""
        for partition in list(self._buffers):
            self._flush(partition)
        for partition in list(self._open):
            self._close(partition)
        return self.written

    def empty(self, partition: str) -> list[str]:
        """Write one file without rows (engines fail on a table with no file at all)."""
        self._begin(partition)
        self._close(partition)
        return self.written[partition]

    def abort(self) -> None:
        """Close the open files, written or not (they stay in the temporary directory)."""
        for opened in self._open.values():
            opened.writer.close()
            opened.handle.close()
        self._open.clear()

    def _flush(self, partition: str) -> None:
        import pyarrow as pa

        batches = self._buffers.pop(partition, [])
        size = self._buffered.pop(partition, 0)
        if not batches:
            return
        opened = self._open.get(partition) or self._begin(partition)
        opened.writer.write_table(pa.concat_tables(batches))
        opened.bytes += size
        if opened.bytes >= self.max_bytes:
            self._close(partition)

    def _begin(self, partition: str) -> _Open:
        import pyarrow.parquet as pq

        names = self.written.setdefault(partition, [])
        name = posixpath.join(
            self.table, partition, f"part-{self.generation:06d}-{len(names):04d}.parquet"
        )
        where = self.files.path(TEMPORARY, name)
        self.files.fs.makedirs(posixpath.dirname(where), exist_ok=True)
        handle = self.files.fs.open(where, "wb")
        writer = pq.ParquetWriter(handle, self.schema, compression="zstd", store_schema=False)
        names.append(name)
        opened = self._open[partition] = _Open(writer, handle, name)
        return opened

    def _close(self, partition: str) -> None:
        opened = self._open.pop(partition)
        opened.writer.close()
        opened.handle.close()


def partition_name(bucket: int) -> str:
    """A bucket's directory, ``bucket=NN``."""
    return f"bucket={bucket:02d}"


def bucket_number(partition: str) -> int:
    """The bucket of a partition's directory name."""
    return int(partition.partition("=")[2])


def route(writer: TableWriter, batch: Any, wanted: Any, buckets: Any) -> None:
    """The ``wanted`` rows of a batch to their buckets' files, each bucket's in their order."""
    import numpy as np

    chosen = np.flatnonzero(wanted)
    if not len(chosen):
        return
    order = chosen[np.argsort(buckets[chosen], kind="stable")]
    ordered = buckets[order]
    edges = np.flatnonzero(np.diff(ordered)) + 1
    for part in np.split(np.arange(len(order)), edges):
        writer.add(partition_name(int(ordered[part[0]])), _own_names(batch.take(order[part])))


def _own_names(piece: Any) -> Any:
    # A piece's dictionaries cut to the names its rows use: a batch's dictionaries hold every
    # series of the store, and the Parquet writer writes a column's whole dictionary into
    # each row group (and a piece's size counts it), which bloated the files and shrank their
    # row groups as the store's series grew (docs/scale.md).
    import numpy as np
    import pyarrow as pa

    columns = []
    for column in piece.columns:
        if not pa.types.is_dictionary(column.type) or not column.num_chunks:
            columns.append(column)
            continue
        # A dictionary of a sixteenth of the piece's rows or fewer adds little to its row
        # group, and cutting it costs a sort of the piece's indices.
        if len(column.chunk(0).dictionary) * 16 < len(piece):
            columns.append(column)
            continue
        array = column.combine_chunks()
        used, inverse = np.unique(array.indices.to_numpy(), return_inverse=True)
        indices = pa.array(inverse.astype(np.int32), type=array.type.index_type)
        columns.append(pa.DictionaryArray.from_arrays(indices, array.dictionary.take(used)))
    return pa.Table.from_arrays(columns, schema=piece.schema)
