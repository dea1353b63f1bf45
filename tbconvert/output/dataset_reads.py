"""Reading a store's point tables in batches for ``export dataset``: rows as Arrow tables
with the columns of the public views, each with the bucket of its run.

Rows come from the driver's own cursor (``fetchmany`` on SQLite, a server-side cursor on
PostgreSQL), a batch at a time, so memory stays bounded whatever the store's size; the
names of a row's run, context and series are added by array look-ups, not joins, so that
the database only walks one table.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from tbconvert.output.arrow import arrow_column, arrow_schema

# Per point table: its own columns as the view shows them (with their Arrow types), and
# whether they end with the data of a blob.  Tensors also carry their series' plugin.
POINT_TABLES: dict[str, tuple[tuple[tuple[str, str], ...], bool]] = {
    "scalars": ((("step", "int64"), ("wall_time", "float64"), ("value", "float64")), False),
    "texts": (
        (("step", "int64"), ("wall_time", "float64"), ("idx", "int64"), ("value", "string")),
        False,
    ),
    "histograms": (
        (
            ("step", "int64"),
            ("wall_time", "float64"),
            ("count", "float64"),
            ("min", "float64"),
            ("max", "float64"),
            ("buckets", "string"),
        ),
        False,
    ),
    "images": (
        (
            ("step", "int64"),
            ("wall_time", "float64"),
            ("idx", "int64"),
            ("format", "string"),
            ("width", "int64"),
            ("height", "int64"),
        ),
        True,
    ),
    "audio": (
        (("step", "int64"), ("wall_time", "float64"), ("idx", "int64"), ("sample_rate", "float64")),
        True,
    ),
    "tensors": (
        (("step", "int64"), ("wall_time", "float64"), ("dtype", "string"), ("shape", "string")),
        True,
    ),
}
# The whole tables: the view, its order (for the digest), and its columns' Arrow types.
WHOLE_TABLES: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    "runs": (
        "v_runs",
        "run_id",
        (
            ("run_id", "int64"),
            ("logdir", "string"),
            ("run_path", "string"),
            ("group_path", "string"),
            ("name", "string"),
            ("first_wall_time", "float64"),
            ("last_wall_time", "float64"),
            ("source", "string"),
            ("host", "string"),
        ),
    ),
    "params": (
        "v_params",
        "run_id, context, key, value",
        (
            ("run_id", "int64"),
            ("run_path", "string"),
            ("context", "string"),
            ("key", "string"),
            ("value", "string"),
            ("value_num", "float64"),
            ("value_type", "string"),
        ),
    ),
    "series": (
        "v_series",
        "run_id, context, tag, plugin",
        (
            ("run_id", "int64"),
            ("run_path", "string"),
            ("context", "string"),
            ("tag", "string"),
            ("plugin", "string"),
            ("points", "int64"),
            ("first_step", "int64"),
            ("last_step", "int64"),
            ("first_wall_time", "float64"),
            ("last_wall_time", "float64"),
            ("last_value", "float64"),
            ("min_value", "float64"),
            ("max_value", "float64"),
        ),
    ),
}
# Rows per fetch: scalars are small; a blob table's rows may hold megabytes each.
FETCH_ROWS = {"scalars": 16384, "texts": 4096, "histograms": 4096}
BLOB_FETCH_ROWS = 64


def _columns(rows: list[tuple[Any, ...]], blob: bool) -> list[Any]:
    # Rows to columns: NumPy transposes rows of numbers and text twice as fast as zip(*rows);
    # a blob's bytes stay out of it (NumPy could take a buffer for a dimension).
    import numpy as np

    if blob:
        return list(zip(*rows, strict=True))
    grid = np.array(rows, dtype=object)
    return [np.ascontiguousarray(grid[:, column]) for column in range(grid.shape[1])]


def bucket_of(source: str, run_path: str, buckets: int) -> int:
    """The partition of a run: a hash of its logdir's source name and its path (what names a
    run in the store), the same whatever order runs come in."""
    return zlib.crc32(f"{source}\n{run_path}".encode()) % buckets


@dataclass
class SeriesIndex:
    """Every series of the store, looked up by id: its run, context, tag, plugin, bucket."""

    position: Any  # numpy: series id -> row in the arrays below (-1: none)
    bucket: Any  # numpy: series id -> bucket
    names: Any  # pyarrow Table: run_id, run_path, context, tag, plugin (one row per series)
    by_owner: dict[tuple[int, int], list[int]]  # (run_id, context_id) -> series ids


def read_series(conn: Connection, buckets: int) -> SeriesIndex:
    """Index the store's series (one small query)."""
    import numpy as np
    import pyarrow as pa

    found = conn.exec_driver_sql(
        "SELECT s.id, s.run_id, r.run_path, c.name, s.name, s.plugin, s.context_id, r.source "
        "FROM series AS s JOIN runs AS r ON r.id = s.run_id "
        "JOIN contexts AS c ON c.id = s.context_id ORDER BY s.id"
    ).all()
    top = max((row[0] for row in found), default=0) + 1
    position = np.full(top, -1, dtype=np.int64)
    bucket = np.zeros(top, dtype=np.int64)
    by_owner: dict[tuple[int, int], list[int]] = {}
    for index, (series_id, run_id, run_path, _, _, _, context_id, source) in enumerate(found):
        position[series_id] = index
        bucket[series_id] = bucket_of(source, run_path, buckets)
        by_owner.setdefault((run_id, context_id), []).append(series_id)
    columns = list(zip(*found, strict=True)) if found else [()] * 8
    names = pa.table(
        {
            "run_id": arrow_column(columns[1], pa.int64()),
            "run_path": arrow_column(columns[2], pa.string()),
            "context": arrow_column(columns[3], pa.string()),
            "tag": arrow_column(columns[4], pa.string()),
            "plugin": arrow_column(columns[5], pa.string()),
        }
    )
    return SeriesIndex(position, bucket, names, by_owner)


def schema_of(table: str) -> Any:
    """The Arrow schema of a point table's dataset files: the view's columns.  Names are
    dictionary-encoded in memory (a batch holds each run's path once); the files do not store
    the Arrow schema, so that engines read them back as plain strings."""
    import pyarrow as pa

    own, blob = POINT_TABLES[table]
    names = pa.dictionary(pa.int32(), pa.string())
    fields = [("run_id", pa.int64()), ("run_path", names), ("context", names), ("tag", names)]
    if table == "tensors":
        fields.append(("plugin", names))
    fields += [(name, pa.type_for_alias(kind)) for name, kind in own]
    if blob:
        fields.append(("data", pa.binary()))
    return pa.schema(fields)


def _select(table: str, where: str, origin: bool) -> str:
    own, blob = POINT_TABLES[table]
    keys = "p.series_id, p.file_id, p.record_offset" if origin else "p.series_id"
    columns = ", ".join(f"p.{name}" for name, _ in own)
    join = " JOIN blobs AS b ON b.id = p.blob_id" if blob else ""
    data = ", b.data" if blob else ""
    return f"SELECT {keys}, {columns}{data} FROM {table} AS p{join}{where}"


def fetch_batches(
    conn: Connection,
    table: str,
    where: str = "",
    parameters: Sequence[Any] = (),
    origin: bool = True,
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``SELECT series_id, file_id, record_offset, <view columns>`` over a point
    table (``where`` with ``?`` placeholders), a batch at a time, through the driver;
    without ``origin``, without the file and offset (fewer columns are read faster)."""
    sql = _select(table, where, origin)
    raw: Any = conn.connection.driver_connection
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        sql = sql.replace("?", "%s")
        cursor = raw.cursor(name=f"tbconvert_dataset_{table}")  # server-side
    else:
        cursor = raw.cursor()
    size = FETCH_ROWS.get(table, BLOB_FETCH_ROWS)
    try:
        cursor.execute(sql, tuple(parameters))
        while True:
            rows = cursor.fetchmany(size)
            if not rows:
                return
            yield rows
    finally:
        cursor.close()


def to_arrow(
    table: str, rows: list[tuple[Any, ...]], index: SeriesIndex, origin: bool = True
) -> tuple[Any, Any]:
    """A batch as (an Arrow table of the view's columns, and per row: series id, file id,
    record offset as NumPy arrays stacked in one 3 x n array; zeros for the two last
    without ``origin``)."""
    import numpy as np

    columns = _columns(rows, POINT_TABLES[table][1])
    width = 3 if origin else 1
    keys = np.zeros((3, len(rows)), dtype=np.int64)
    for row, values in enumerate(columns[:width]):
        keys[row] = np.asarray(values, dtype=np.int64)
    schema = schema_of(table)
    start = len(schema) - len(columns[width:])
    own = [
        arrow_column(values, schema.field(start + offset).type)
        for offset, values in enumerate(columns[width:])
    ]
    return _with_names(table, keys, own, index), keys


def scalars_to_arrow(batch: Any, index: SeriesIndex, origin: bool = True) -> tuple[Any, Any]:
    """As :func:`to_arrow` for a batch of ``sqlite_arrow.scalars_sql``'s Arrow columns."""
    import numpy as np
    import pyarrow as pa

    width = 3 if origin else 1
    keys = np.zeros((3, batch.num_rows), dtype=np.int64)
    for row in range(width):
        keys[row] = batch.column(row).to_numpy()
    wall_time, wall_null, value, value_null = (batch.column(width + 1 + i) for i in range(4))
    own = [
        batch.column(width),
        pa.array(wall_time.to_numpy(), mask=wall_null.to_numpy().astype(bool)),
        pa.array(value.to_numpy(), mask=value_null.to_numpy().astype(bool)),
    ]
    return _with_names("scalars", keys, own, index), keys


def _with_names(table: str, keys: Any, own: list[Any], index: SeriesIndex) -> Any:
    # The run, context and tag of each row's series by look-ups in the index, before the
    # table's own columns.
    import numpy as np
    import pyarrow as pa

    positions = pa.array(index.position[keys[0]].astype(np.int32), type=pa.int32())
    arrays = [index.names.column("run_id").take(positions)]
    for name in ("run_path", "context", "tag", "plugin")[: 4 if table == "tensors" else 3]:
        dictionary = index.names.column(name).combine_chunks()
        arrays.append(pa.DictionaryArray.from_arrays(positions, dictionary))
    return pa.Table.from_arrays(arrays + own, schema=schema_of(table))


def whole_schema(table: str) -> Any:
    """The Arrow schema of a whole table's files (``WHOLE_TABLES``)."""
    return arrow_schema(WHOLE_TABLES[table][2])


def view_batches(conn: Connection, table: str) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of a whole table's view, in its order, a batch at a time."""
    view, order, types = WHOLE_TABLES[table]
    columns = ", ".join(name for name, _ in types)
    result = conn.exec_driver_sql(f"SELECT {columns} FROM {view} ORDER BY {order}")
    while True:
        rows = result.fetchmany(8192)
        if not rows:
            return
        yield [tuple(row) for row in rows]


class RowsToWrite:
    """Which rows of a batch a run writes: those of a bucket rewritten whole, and a grown
    file's points at or after the offset exported before."""

    def __init__(self, index: SeriesIndex, dirty: set[int], grown: dict[int, int]) -> None:
        """Mark the buckets to rewrite and the offsets the grown files' new points start at."""
        import numpy as np

        self.index = index
        self.dirty = np.zeros(max([*dirty, 0]) + 1, dtype=bool)
        self.dirty[list(dirty)] = True
        self.start = np.full(max([*grown, 0]) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        for file_id, offset in grown.items():
            self.start[file_id] = offset

    def __call__(self, keys: Any) -> tuple[Any, Any]:
        """Per row of a batch (``keys``: series ids, file ids, offsets), whether it is
        written, and its bucket."""
        import numpy as np

        series_ids, file_ids, offsets = keys
        buckets = self.index.bucket[series_ids]
        in_dirty = np.zeros(len(buckets), dtype=bool)
        known = buckets < len(self.dirty)
        in_dirty[known] = self.dirty[buckets[known]]
        start = np.full(len(file_ids), np.iinfo(np.int64).max, dtype=np.int64)
        listed = file_ids < len(self.start)
        start[listed] = self.start[file_ids[listed]]
        return in_dirty | (offsets >= start), buckets
