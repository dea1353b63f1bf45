"""``export scalars|params|texts -o FILE.parquet``: written a batch at a time, row for row.

The oracle is the rows handed to the writer, read back with pyarrow.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from tbconvert.output.export import PARQUET_BATCH_ROWS, PARQUET_TYPES, write_parquet


def test_a_long_parquet_export_is_written_in_batches_exactly(tmp_path: Path) -> None:
    count = 2 * PARQUET_BATCH_ROWS + 7
    rows = [
        (i % 5, f"run{i % 3}", "", "loss", i, 1e9 + i, None if i % 11 == 0 else i / 3)
        for i in range(count)
    ]
    target = tmp_path / "x.parquet"
    columns = ("run_id", "run_path", "context", "tag", "step", "wall_time", "value")
    assert write_parquet(columns, iter(rows), str(target), PARQUET_TYPES["scalars"]) == count
    table = pq.read_table(target)
    assert table.num_rows == count and table.column_names == list(columns)
    assert list(zip(*(table[name].to_pylist() for name in columns), strict=True)) == rows


def test_an_empty_parquet_export_has_the_columns(tmp_path: Path) -> None:
    columns = ("run_id", "run_path", "context", "key", "value", "value_num", "value_type")
    target = tmp_path / "none.parquet"
    assert write_parquet(columns, iter(()), str(target), PARQUET_TYPES["params"]) == 0
    assert pq.read_table(target).column_names == list(columns)
