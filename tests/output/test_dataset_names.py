"""The names in a dataset's files: each row group's dictionary of run paths, contexts and tags
holds the names of its own rows, not every series of the store, read back by pyarrow's
Parquet reader (a store of many series would otherwise write all their names into every
row group, which bloats the files and shrinks their row groups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbconvert import convert, open_store
from tbconvert.output.dataset import export_dataset
from tests.support.eventfiles import simple_value, summary_event, write_events

pq = pytest.importorskip("pyarrow.parquet")

RUNS = 60


def test_each_row_group_holds_the_names_of_its_own_series(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for number in range(RUNS):
        events = [
            summary_event(step, 1e9 + step, [simple_value(f"tag{number % 7}", step / (number + 1))])
            for step in range(20)
        ]
        write_events(logdir / f"sweep/run{number:03d}" / "events.out.tfevents.1.h", events)
    store = tmp_path / "store.db"
    assert convert(logdir, store, progress=False).exit_code == 0
    with open_store(store) as opened:
        export_dataset(opened, str(tmp_path / "dataset"), buckets=4, progress=False)
    files = sorted((tmp_path / "dataset" / "scalars").glob("bucket=*/*.parquet"))
    assert len(files) > 1
    rows = 0
    for path in files:
        parquet = pq.ParquetFile(path, read_dictionary=["run_path", "tag"])
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=["run_path", "tag"])
            rows += table.num_rows
            for name in ("run_path", "tag"):
                column = table.column(name)
                own = len(set(column.to_pylist()))
                for chunk in column.chunks:
                    assert len(chunk.dictionary) <= own < RUNS, (path.name, name)
    assert rows == RUNS * 20
