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

from tbconvert import convert
from tests.support.children import child_env
from tests.support.shard_logdir import write_shard_logdir
from tests.support.snapshots import file_states, view_rows, without_run_ids

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 3


def convert_shard(logdir: str, store: str, index: int, count: int) -> tuple[int, int]:
    """One task of the map: shard ``index`` of ``count`` (runs converted, points)."""
    summary = convert(logdir, store, source="tb", shard=(index, count))
    return summary.runs, summary.total_points


def test_three_shard_processes_at_once_give_one_plain_conversion(pg_server, tmp_path: Path) -> None:
    logs = write_shard_logdir(tmp_path / "logs")
    store = pg_server.new_database("sharded")
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tbconvert",
                "tf",
                "--logdir",
                str(logs),
                "--store",
                store,
                "--source",
                "tb",
                "--shard",
                f"{index}/{SHARDS}",
                "-q",
            ],
            cwd=ROOT,
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(SHARDS)
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
    # Fresh interpreters, as a cluster's workers are (and no fork of a threaded process).
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=SHARDS, mp_context=spawn) as pool:
        done = list(
            pool.map(
                convert_shard,
                [str(logs)] * SHARDS,
                [store] * SHARDS,
                range(SHARDS),
                [SHARDS] * SHARDS,
            )
        )
    plain = pg_server.new_database("plain_map")
    whole = convert(logs, plain, source="tb")
    assert sum(runs for runs, _points in done) == whole.runs
    assert sum(points for _runs, points in done) == whole.total_points
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(plain))
