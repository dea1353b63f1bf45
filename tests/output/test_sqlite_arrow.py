"""The speed path of ``export dataset`` on SQLite (``output/sqlite_arrow``: ADBC's SQLite
driver in a child process) against the general path (Python's ``sqlite3``) and the store's
``v_scalars`` read with plain SQL: the same rows, the same columns, the same batches' keys."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from tbconvert import convert, open_store
from tbconvert.output import sqlite_arrow
from tbconvert.output.dataset import export_dataset
from tbconvert.output.dataset_reads import fetch_batches, read_series, scalars_to_arrow, to_arrow
from tests.support.eventfiles import simple_value, summary_event, write_events

pytest.importorskip("adbc_driver_sqlite")
pa = pytest.importorskip("pyarrow")
pa_dataset = pytest.importorskip("pyarrow.dataset")

W0 = 1_795_400_000.0
VALUES = (0.5, math.nan, math.inf, -math.inf, -0.0, 1e-300, 3.25)


def write_run(logdir: Path, run: str, steps: range, name: str = "events.out.tfevents.1.h") -> None:
    events = [
        summary_event(
            step,
            W0 + step,
            [simple_value("loss", VALUES[step % len(VALUES)]), simple_value("acc", step / 7)],
        )
        for step in steps
    ]
    write_events(logdir / run / name, events)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    for number, run in enumerate(("sweep/a", "sweep/b", "solo", "deep/x/y")):
        write_run(logdir, run, range(number, 40 + 9 * number))
    path = tmp_path / "store.db"
    assert convert(logdir, path, progress=False).exit_code == 0
    return path


def read_back(target: Path) -> list[tuple[object, ...]]:
    columns = ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"]
    table = pa_dataset.dataset(target / "scalars", partitioning="hive").to_table(columns=columns)
    return sorted(tuple(row.values()) for row in table.to_pylist())


def test_the_child_reader_writes_the_rows_of_the_general_path_and_of_the_view(
    store: Path, tmp_path: Path
) -> None:
    with open_store(store) as opened:
        export_dataset(opened, str(tmp_path / "fast"), buckets=4, arrow_scan_from=0)
        export_dataset(opened, str(tmp_path / "plain"), buckets=4, arrow_scan_from=10**18)
    with sqlite3.connect(store) as conn:
        view = conn.execute(
            "SELECT run_id, run_path, context, tag, step, wall_time, value FROM v_scalars"
        ).fetchall()
    fast, plain = read_back(tmp_path / "fast"), read_back(tmp_path / "plain")
    assert len(fast) == len(view) > 300
    assert fast == plain == sorted(view)
    assert any(row[6] is None for row in fast) and any(row[6] == math.inf for row in fast)
    assert sorted(p.name for p in (tmp_path / "fast" / "scalars").iterdir()) == sorted(
        p.name for p in (tmp_path / "plain" / "scalars").iterdir()
    )


@pytest.mark.parametrize("origin", [False, True])
def test_the_child_reader_gives_the_batches_keys_of_the_general_path(
    store: Path, origin: bool
) -> None:
    with open_store(store) as opened, opened.snapshot(), opened.connect() as conn:
        index = read_series(conn, 4)
        general = [
            to_arrow("scalars", rows, index, origin)
            for rows in fetch_batches(conn, "scalars", origin=origin)
        ]
        state = sqlite_arrow.digest(conn.exec_driver_sql(sqlite_arrow.FINGERPRINT).all())
        batches = sqlite_arrow.scalar_batches(str(store), state, origin)
        assert batches is not None
        fast = [scalars_to_arrow(batch, index, origin) for batch in batches]
    numpy = pytest.importorskip("numpy")
    assert pa.concat_tables([t for t, _ in fast]).equals(pa.concat_tables([t for t, _ in general]))
    fast_keys = numpy.concatenate([keys for _, keys in fast], axis=1)
    general_keys = numpy.concatenate([keys for _, keys in general], axis=1)
    assert (fast_keys == general_keys).all()
    assert bool(fast_keys[2].any()) == origin  # record offsets, only when asked for


def test_a_store_changed_since_the_snapshot_is_read_by_the_general_path(
    store: Path, tmp_path: Path
) -> None:
    with sqlite3.connect(store) as conn:
        before = sqlite_arrow.digest(conn.execute(sqlite_arrow.FINGERPRINT).fetchall())
    write_run(tmp_path / "logs", "late", range(5), name="events.out.tfevents.2.h")
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    assert sqlite_arrow.scalar_batches(str(store), before, False) is None
