"""One conversion split over several machines (``--shard K/N``, issue #47): N converters, each
with its own K, started together into one PostgreSQL server, give the views of one plain
conversion, row for row (run ids aside: they depend on who committed first).

Two of the recipes of docs/scale-out.md run here: the command line once per shard, as a
Kubernetes indexed Job or a Slurm array runs it, and a map of :func:`tbconvert.convert` over
a process pool, as Dask or Ray would run it.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tbconvert import convert
from tests.support.children import child_env
from tests.support.s3server import S3Server
from tests.support.shard_logdir import write_shard_logdir
from tests.support.snapshots import file_states, query_rows, view_rows, without_run_ids

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 3


def convert_shard(
    logdir: str, store: str, index: int, count: int, storage_options: dict[str, Any] | None = None
) -> tuple[int, int]:
    """One task of the map: shard ``index`` of ``count`` (runs converted, points)."""
    summary = convert(
        logdir, store, source="tb", shard=(index, count), storage_options=storage_options
    )
    return summary.runs, summary.total_points


def map_shards(logdir: str, store: str, storage_options: dict[str, Any] | None = None) -> list:
    """The Dask and Ray recipes' map, over a pool of fresh interpreters (as a cluster's
    workers are, and no fork of a threaded process)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=SHARDS, mp_context=spawn) as pool:
        return list(
            pool.map(
                convert_shard,
                [logdir] * SHARDS,
                [store] * SHARDS,
                range(SHARDS),
                [SHARDS] * SHARDS,
                [storage_options] * SHARDS,
            )
        )


def test_three_shard_processes_at_once_give_one_plain_conversion(pg_server, tmp_path: Path) -> None:
    logs = write_shard_logdir(tmp_path / "logs")
    store = pg_server.new_database("sharded")
    command = [sys.executable, "-m", "tbconvert", "tf", "--logdir", str(logs), "--store", store]
    shards = [["--source", "tb", "--shard", f"{index}/{SHARDS}", "-q"] for index in range(SHARDS)]
    processes = [
        subprocess.Popen(
            command + shard, cwd=ROOT, env=child_env(), stderr=subprocess.PIPE, text=True
        )
        for shard in shards
    ]
    for process in processes:
        _out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    plain = pg_server.new_database("plain")
    convert(logs, plain, source="tb")
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(plain))
    assert file_states(store) == file_states(plain)


def test_a_process_pool_map_over_convert_gives_one_plain_conversion(
    pg_server, tmp_path: Path
) -> None:
    logs = write_shard_logdir(tmp_path / "logs")
    store = pg_server.new_database("mapped")
    done = map_shards(str(logs), store)
    plain = pg_server.new_database("plain_map")
    whole = convert(logs, plain, source="tb")
    assert sum(runs for runs, _points in done) == whole.runs
    assert sum(points for _runs, points in done) == whole.total_points
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(plain))


def test_shards_of_a_url_logdir_at_once_give_one_plain_conversion(
    pg_server, s3: S3Server, tmp_path: Path
) -> None:
    """Every shard of an object-store logdir classifies it whole and keeps the layout's reads
    of its files (``file_heads``) for the next pass: the shards write them one at a time."""
    write_shard_logdir(tmp_path / "logs")
    s3.bucket("sharded")
    url = s3.upload(tmp_path / "logs", "sharded", "tb")
    store = pg_server.new_database("sharded_url")
    map_shards(url, store, s3.storage_options)
    plain = pg_server.new_database("plain_url")
    convert(url, plain, source="tb", storage_options=s3.storage_options)
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(plain))
    heads = "SELECT source, path, size, tags FROM file_heads ORDER BY path"
    assert query_rows(store, heads) == query_rows(plain, heads) != []
    # A second pass of every shard finds everything where the first one left it.
    assert sum(points for _runs, points in map_shards(url, store, s3.storage_options)) == 0
