"""``export dataset``: the store as a partitioned, incremental Parquet dataset.

The oracle is the store's public views read with plain SQL through the database driver
(``tests/support/snapshots``), compared with what pyarrow's dataset reader (and DuckDB and
Polars where installed) reads from the directory: never what the export code says it wrote.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from tensorboardX import SummaryWriter

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tbconvert.output.dataset import DatasetSummary, bucket_count, export_dataset
from tests.support.eventfiles import append_events, scalar_events, write_events
from tests.support.snapshots import StoreFactory, query_rows

pa_dataset = pytest.importorskip("pyarrow.dataset")

COOKBOOK = Path(__file__).resolve().parents[2] / "docs" / "cookbook.md"

W0 = 1_795_400_000.0
RUNS = ("sweep/a", "sweep/b", "sweep/c", "solo")
# Each table's view and its columns, as SPEC §6 lists them.
VIEWS = {
    "scalars": ("v_scalars", "run_id, run_path, context, tag, step, wall_time, value"),
    "params": ("v_params", "run_id, run_path, context, key, value, value_num, value_type"),
    "runs": (
        "v_runs",
        "run_id, logdir, run_path, group_path, name, first_wall_time, last_wall_time, source, host",
    ),
    "texts": ("v_texts", "run_id, run_path, context, tag, step, wall_time, idx, value"),
    "histograms": (
        "v_histograms",
        "run_id, run_path, context, tag, step, wall_time, count, min, max, buckets",
    ),
    "images": (
        "v_images",
        "run_id, run_path, context, tag, step, wall_time, idx, format, width, height, data",
    ),
    "tensors": (
        "v_tensors",
        "run_id, run_path, context, tag, plugin, step, wall_time, dtype, shape, data",
    ),
}


def write_logdir(logdir: Path, start: int = 0, steps: int = 15) -> None:
    """tensorboardX runs with scalars (one NaN), a histogram, an image, a text and, on the
    first pass, add_hparams; a later ``start`` writes new files into the same runs."""
    for number, run in enumerate(RUNS):
        suffix = f".part{start}"
        with SummaryWriter(str(logdir / run), flush_secs=3600, filename_suffix=suffix) as writer:
            for step in range(start, start + steps):
                wall_time = W0 + step
                writer.add_scalar("loss", 1.0 / (1 + step + number), step, walltime=wall_time)
                accuracy = math.nan if step == 3 else step / 100
                writer.add_scalar("accuracy", accuracy, step, walltime=wall_time)
            writer.add_histogram("weights", np.arange(10.0) + number, start, walltime=W0 + start)
            pixels = np.full((2, 3, 3), 10 * number + start, dtype=np.uint8)
            writer.add_image("sample", pixels, start, walltime=W0 + start, dataformats="HWC")
            writer.add_text("note", f"{run} from {start}", start, walltime=W0 + start)
            if start == 0:
                writer.add_hparams({"lr": 0.1 * (number + 1), "opt": "sgd"}, {"hparam/acc": 0.5})


def converted(logdir: Path, store: str) -> None:
    summary = convert(logdir, store, progress=False)
    assert summary.exit_code == 0, summary.problems


def canonical(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def sorted_rows(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(canonical(v) for v in row) for row in rows), key=repr)


def store_rows(store: str, table: str) -> list[tuple[Any, ...]]:
    view, columns = VIEWS[table]
    return sorted_rows(query_rows(store, f"SELECT {columns} FROM {view}"))


def arrow_rows(target: Path | str, table: str, filesystem: Any = None) -> list[tuple[Any, ...]]:
    names = [c.strip() for c in VIEWS[table][1].split(",")]
    where = f"{target}/{table}"
    found = pa_dataset.dataset(where, format="parquet", partitioning="hive", filesystem=filesystem)
    columns = found.to_table(columns=names).to_pydict()
    return sorted_rows(zip(*(columns[name] for name in names), strict=True))


def assert_engines_equal_store(store: str, target: Path) -> None:
    for table in VIEWS:
        assert arrow_rows(target, table) == store_rows(store, table), table


def listing(target: Path) -> dict[str, int]:
    """Every file under the dataset with its modification time."""
    return {
        str(path.relative_to(target)): path.stat().st_mtime_ns
        for path in target.rglob("*")
        if path.is_file()
    }


def data_files(target: Path) -> set[str]:
    return {p for p in listing(target) if p.endswith(".parquet")}


def export(store: str, target: Path | str, **options: Any) -> DatasetSummary:
    with open_store(store) as opened:
        return export_dataset(opened, str(target), progress=False, **options)


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    write_logdir(tmp_path / "logs")
    return tmp_path / "logs"


@pytest.fixture
def filled(make_store: StoreFactory, tmp_path: Path, logdir: Path) -> str:
    store = make_store(tmp_path)
    converted(logdir, store)
    return store


def test_engines_read_every_view_from_the_dataset(filled: str, tmp_path: Path) -> None:
    target = tmp_path / "dataset"
    summary = export(filled, target, buckets=4)
    assert summary.rows["scalars"] == len(store_rows(filled, "scalars"))
    assert_engines_equal_store(filled, target)
    # A logged NaN is NULL, as in v_scalars.
    assert any(row[-1] is None for row in arrow_rows(target, "scalars"))
    buckets = {p.name for p in (target / "scalars").iterdir()}
    assert buckets <= {f"bucket={n:02d}" for n in range(4)} and len(buckets) > 1


def test_a_run_is_in_one_bucket_whatever_the_run_order(filled: str, tmp_path: Path) -> None:
    export(filled, tmp_path / "d", buckets=8)
    found = pa_dataset.dataset(tmp_path / "d" / "scalars", partitioning="hive").to_table()
    by_run: dict[str, set[int]] = {}
    pairs = zip(found["run_path"].to_pylist(), found["bucket"].to_pylist(), strict=True)
    for run_path, bucket in pairs:
        by_run.setdefault(run_path, set()).add(bucket)
    assert all(len(buckets) == 1 for buckets in by_run.values())
    assert set(by_run) == set(RUNS)


def test_a_small_store_gets_one_bucket(filled: str, tmp_path: Path) -> None:
    export(filled, tmp_path / "d")
    assert [p.name for p in (tmp_path / "d" / "scalars").iterdir()] == ["bucket=00"]


@pytest.mark.parametrize(
    ("points", "buckets"),
    [(0, 1), (16_000_000, 1), (16_000_001, 2), (20_000_000, 2), (100_000_000, 8), (10**13, 256)],
)
def test_a_bucket_per_16m_points_in_a_power_of_two(points: int, buckets: int) -> None:
    assert bucket_count(points) == buckets


def test_duckdb_reads_the_dataset_as_the_views(filled: str, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    export(filled, tmp_path / "d", buckets=4)
    for table in ("scalars", "params", "runs"):
        columns = VIEWS[table][1]
        found = duckdb.sql(
            f"SELECT {columns} FROM read_parquet('{tmp_path}/d/{table}/**/*.parquet', "
            "hive_partitioning=true)"
        ).fetchall()
        assert sorted_rows(found) == store_rows(filled, table), table


def test_polars_reads_the_dataset_as_the_views(filled: str, tmp_path: Path) -> None:
    polars = pytest.importorskip("polars")
    export(filled, tmp_path / "d", buckets=4)
    for table in ("scalars", "params", "runs"):
        names = [c.strip() for c in VIEWS[table][1].split(",")]
        frame = polars.scan_parquet(f"{tmp_path}/d/{table}/**/*.parquet").select(names).collect()
        assert sorted_rows(frame.rows()) == store_rows(filled, table), table


def test_pandas_reads_the_scalars_as_the_view(filled: str, tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    export(filled, tmp_path / "d", buckets=2)
    frame = pandas.read_parquet(tmp_path / "d" / "scalars")
    names = [c.strip() for c in VIEWS["scalars"][1].split(",")]
    rows = [tuple(None if v != v else v for v in row) for row in frame[names].itertuples(False)]
    assert sorted_rows(rows) == store_rows(filled, "scalars")


def test_nothing_new_writes_nothing(filled: str, tmp_path: Path) -> None:
    target = tmp_path / "d"
    export(filled, target, buckets=4)
    before = listing(target)
    again = export(filled, target)
    assert not again.changed
    assert listing(target) == before


def test_a_grown_logdir_adds_only_new_files(filled: str, tmp_path: Path, logdir: Path) -> None:
    target = tmp_path / "d"
    export(filled, target, buckets=4)
    first = listing(target)
    # New files in every run, and one file grown in place.
    write_logdir(logdir, start=15, steps=5)
    grown = sorted((logdir / "solo").glob("events.out.tfevents.*.part0"))[0]
    append_events(grown, scalar_events("loss", range(100, 104), base=W0 + 100))
    converted(logdir, filled)
    summary = export(filled, target)
    assert summary.changed and not summary.rewritten_buckets
    now = listing(target)
    kept = {name: mtime for name, mtime in first.items() if name.endswith(".parquet")}
    old_points = {n for n in kept if not n.startswith(("runs/", "params/", "series/"))}
    assert {n: now[n] for n in old_points} == {n: kept[n] for n in old_points}
    assert_engines_equal_store(filled, target)


def test_a_replaced_event_file_is_never_read_twice(
    filled: str, tmp_path: Path, logdir: Path
) -> None:
    target = tmp_path / "d"
    export(filled, target, buckets=4)
    replaced = sorted((logdir / "sweep" / "b").glob("events.out.tfevents.*"))[0]
    write_events(replaced, scalar_events("loss", range(3), base=W0 + 500))
    converted(logdir, filled)
    before = data_files(target)
    summary = export(filled, target)
    assert summary.files_deleted and summary.rewritten_buckets
    assert_engines_equal_store(filled, target)
    assert before - data_files(target)  # the replaced bucket's old files are gone


def test_every_file_on_disk_is_in_the_manifest(filled: str, tmp_path: Path, logdir: Path) -> None:
    import json

    target = tmp_path / "d"
    export(filled, target, buckets=2)
    write_events(
        sorted((logdir / "solo").glob("events.*"))[0], scalar_events("x", range(2), base=W0)
    )
    converted(logdir, filled)
    export(filled, target)
    manifest = json.loads((target / "_tbconvert_manifest.json").read_text())
    listed = {n for parts in manifest["tables"].values() for ns in parts.values() for n in ns}
    assert data_files(target) == listed
    assert manifest["pending"] == {}
    assert not (target / "_tbconvert_tmp").exists()


def killed_at(point: int) -> Any:
    """A step hook that ends the process at its ``point``-th call, as kill -9 would."""
    calls = [0]

    def step(_name: str) -> None:
        calls[0] += 1
        if calls[0] == point:
            os._exit(9)

    return step


@pytest.mark.slow
def test_a_killed_export_is_completed_by_the_next(
    filled: str, tmp_path: Path, logdir: Path
) -> None:
    target = tmp_path / "base"
    export(filled, target, buckets=4)
    old = {table: arrow_rows(target, table) for table in VIEWS}
    write_logdir(logdir, start=15, steps=3)
    write_events(
        sorted((logdir / "sweep" / "a").glob("events.*"))[0],
        scalar_events("loss", range(2), base=W0 + 900),
    )
    converted(logdir, filled)
    steps: list[str] = []
    export(filled, shutil.copytree(target, tmp_path / "count"), step=steps.append)
    assert "committed" in steps and "deleted" in steps and "moved" in steps
    for point in range(1, len(steps) + 1):
        copy = shutil.copytree(target, tmp_path / f"killed{point}")
        pid = os.fork()
        if pid == 0:  # the child: killed at its point-th step, as kill -9 would
            try:
                export(filled, copy, step=killed_at(point))
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 9, point
        manifest = (copy / "_tbconvert_manifest.json").read_text()
        if '"pending": {}' in manifest:  # committed and finished, or not committed at all
            seen = {table: arrow_rows(copy, table) for table in VIEWS}
            assert seen == old or seen == {t: store_rows(filled, t) for t in VIEWS}, point
        export(filled, copy)
        assert_engines_equal_store(filled, copy)
        assert not (copy / "_tbconvert_tmp").exists()


def test_the_dataset_goes_to_an_object_store(filled: str, s3: Any) -> None:
    import fsspec
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    bucket = s3.bucket(f"dataset-{abs(hash(filled)) % 10**8}")
    url = f"s3://{bucket}/lake/tb"
    export(filled, url, buckets=2, storage_options=s3.storage_options)
    fs = fsspec.filesystem("s3", **s3.storage_options)
    filesystem = PyFileSystem(FSSpecHandler(fs))
    for table in ("scalars", "params", "runs", "images"):
        found = arrow_rows(f"{bucket}/lake/tb", table, filesystem)
        assert found == store_rows(filled, table), table
    assert not export(filled, url, storage_options=s3.storage_options).changed


def test_the_command_writes_and_summarises(filled: str, tmp_path: Path) -> None:
    target = tmp_path / "d"
    result = CliRunner().invoke(cli, ["export", "dataset", "--store", filled, "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert "rows in" in result.stderr and result.stdout == ""
    assert_engines_equal_store(filled, target)
    again = CliRunner().invoke(cli, ["export", "dataset", "--store", filled, "-o", str(target)])
    assert again.exit_code == 0 and "nothing written" in again.stderr


def test_the_command_refuses_stdout_and_other_buckets(filled: str, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["export", "dataset", "--store", filled]).exit_code == 2
    target = str(tmp_path / "d")
    assert runner.invoke(cli, ["export", "dataset", "--store", filled, "-o", target]).exit_code == 0
    other = runner.invoke(
        cli, ["export", "dataset", "--store", filled, "-o", target, "--buckets", "7"]
    )
    assert other.exit_code == 2 and "buckets" in other.stderr


def cookbook_blocks() -> list[str]:
    """The Python blocks of the cookbook's section on the dataset."""
    body = COOKBOOK.read_text(encoding="utf-8").split("## The Parquet dataset", 1)[1]
    return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


def test_the_cookbook_has_four_readers() -> None:
    assert len(cookbook_blocks()) == 4


@pytest.mark.parametrize("number", range(4))
def test_the_cookbook_reads_the_dataset(number: int, filled: str, tmp_path: Path) -> None:
    block = cookbook_blocks()[number]
    for module in ("duckdb", "polars"):
        if f"import {module}" in block:
            pytest.importorskip(module)
    export(filled, tmp_path / "d", buckets=2)
    namespace: dict[str, Any] = {"DATASET": str(tmp_path / "d")}
    exec(block, namespace)
    losses = query_rows(filled, "SELECT run_path FROM v_scalars WHERE tag = 'loss'")
    found = {
        0: lambda: len(namespace["curves"]) == len(losses),
        1: lambda: [row[0] for row in namespace["rows"]] == sorted({r[0] for r in losses}),
        2: lambda: sum(namespace["counts"]["points"]) == len(store_rows(filled, "scalars")),
        3: lambda: namespace["runs"].num_rows == len(store_rows(filled, "runs")),
    }[number]()
    assert found
