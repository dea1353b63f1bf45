"""``tbconvert tf --shard K/N`` (issue #47): N converters, each with its own K, convert a
logdir once together.

The shards of a logdir, one after the other into one store, give the views of one plain
conversion; a run's shard depends on its path alone (not on the listing, the other runs or
the machine); a shard reads, settles and takes over only its own runs: it never marks another
shard's files gone, and a re-run reads only its own new bytes.  The concurrent runs into one
PostgreSQL server are in ``tests/store/test_sharded_store.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tbconvert import convert, watch
from tbconvert.cli import cli
from tbconvert.conversion.options import ConvertOptions
from tbconvert.errors import UsageError
from tbconvert.filters import Shard, shard_of
from tbconvert.reading import discovery
from tests.support.eventfiles import append_events, scalar_events
from tests.support.layouts import WALL
from tests.support.shard_logdir import write_plain_run, write_shard_logdir
from tests.support.snapshots import file_states, query_rows, view_rows, without_run_ids

SHARDS = 3


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return write_shard_logdir(tmp_path / "logs")


def owner(run_path: str, count: int = SHARDS) -> int:
    """The shard of a run, computed here from the documented rule (docs/scale-out.md): the
    first 8 bytes of the SHA-256 of the run path, big-endian, modulo N."""
    return int(hashlib.sha256(run_path.encode()).hexdigest()[:16], 16) % count


def runs_of(store: Path | str) -> list[str]:
    return [row[0] for row in query_rows(str(store), "SELECT run_path FROM v_runs ORDER BY 1")]


def test_the_shards_one_after_another_give_one_plain_conversion(logs: Path, tmp_path: Path) -> None:
    sharded, plain = tmp_path / "sharded.db", tmp_path / "plain.db"
    taken = []
    for index in range(SHARDS):
        summary = convert(logs, sharded, shard=(index, SHARDS))
        assert summary.exit_code == 0 and summary.shard == f"{index}/{SHARDS}"
        taken.append(summary.runs)
        assert summary.runs_in_logdir == 21
    whole = convert(logs, plain)
    assert sum(taken) == whole.runs and all(taken)  # every shard had work, none twice
    assert without_run_ids(view_rows(sharded)) == without_run_ids(view_rows(plain))
    assert file_states(sharded) == file_states(plain)


def test_a_shard_converts_only_the_runs_whose_path_hashes_to_it(logs: Path, tmp_path: Path) -> None:
    everything = [run.run_path for run in discovery.classify(str(logs)).runs]
    # Orphans are runs of their directory: "." for the logdir's root, the group for its own.
    assert {".", "group", "sweep/lr0.1_bs32_sgd", "torch/run0", "images"} <= set(everything)
    for index in range(SHARDS):
        store = tmp_path / f"shard{index}.db"
        convert(logs, store, shard=Shard(index, SHARDS))
        assert runs_of(store) == sorted(run for run in everything if owner(run) == index)


def test_contexts_and_sidecar_params_go_with_their_run(logs: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain.db"
    convert(logs, plain)
    per_run = (
        "SELECT run_path, {what} FROM {view} ORDER BY 1, 2",
        [("context", "v_scalars"), ("key || '=' || value", "v_params")],
    )
    for index in range(SHARDS):
        store = tmp_path / f"shard{index}.db"
        convert(logs, store, shard=(index, SHARDS))
        for what, view in per_run[1]:
            sql = per_run[0].format(what=what, view=view)
            expected = [row for row in query_rows(str(plain), sql) if owner(row[0]) == index]
            assert query_rows(str(store), sql) == expected


@given(
    names=st.lists(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
        min_size=1,
        max_size=40,
        unique=True,
    ),
    count=st.integers(min_value=1, max_value=9),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_every_run_falls_to_exactly_one_shard_whatever_the_listing(
    names: list[str], count: int, seed: int
) -> None:
    def classification(run_paths: list[str]) -> discovery.Classification:
        runs = tuple(
            discovery.RunSource(
                path, "", (discovery.EventFileSource(f"/l/{path}/e", f"{path}/e", path, ""),)
            )
            for path in run_paths
        )
        return discovery.Classification("/l", False, runs, (), (), ())

    def split(run_paths: list[str]) -> list[set[str]]:
        whole = classification(run_paths)
        return [
            {run.run_path for run in discovery.select_shard(whole, Shard(k, count)).runs}
            for k in range(count)
        ]

    shards = split(names)
    assert sum(len(shard) for shard in shards) == len(names)
    assert set().union(*shards) == set(names)
    for index, shard in enumerate(shards):
        assert all(owner(name, count) == index for name in shard)
    # Listed in another order, or with more runs beside them: no run changes shard.
    shuffled = random.Random(seed).sample(names, len(names))
    assert split(shuffled) == shards
    grown = split([*shuffled, *(f"{name}/more" for name in names)])
    assert [shard & set(names) for shard in grown] == shards


@pytest.mark.parametrize("count", [2, 3, 4, 8, 16])
def test_the_split_is_balanced_over_a_sweep(count: int) -> None:
    runs = [f"sweep/lr{lr}_seed{seed}" for lr in range(50) for seed in range(40)]
    sizes = [0] * count
    for run in runs:
        sizes[shard_of(run, count)] += 1
    # As balanced as a uniform random split: within 4 standard deviations of its binomial.
    mean = len(runs) / count
    deviation = math.sqrt(len(runs) * (1 / count) * (1 - 1 / count))
    assert max(abs(size - mean) for size in sizes) < 4 * deviation


def test_the_hash_is_pinned() -> None:
    # The same on every machine, Python and version: a stored run never changes shard.
    assert [shard_of(run, 7) for run in (".", "run_a", "sweep/lr0.1", "données/é")] == [
        owner(run, 7) for run in (".", "run_a", "sweep/lr0.1", "données/é")
    ]
    assert Shard(0, 1).owns("anything") and str(Shard(2, 5)) == "2/5"


def test_a_shard_never_marks_another_shards_files_gone(logs: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    convert(logs, store)
    before, states = view_rows(store), file_states(store)
    for index in range(SHARDS):
        summary = convert(logs, store, shard=(index, SHARDS))
        assert (summary.files_read, summary.files_gone) == (0, 0)
    assert view_rows(store) == before and file_states(store) == states

    # A run deleted: only its own shard marks its file gone.
    deleted = "group/exp3"
    shutil.rmtree(logs / deleted)
    others = [index for index in range(SHARDS) if index != owner(deleted)]
    for index in others:
        assert convert(logs, store, shard=(index, SHARDS)).files_gone == 0
    assert file_states(store) == states
    assert convert(logs, store, shard=(owner(deleted), SHARDS)).files_gone == 1
    gone = {path for path, state in file_states(store).items() if state[0] == "gone"}
    assert gone == {f"{deleted}/events.out.tfevents.1.a"}


def test_a_rerun_of_one_shard_reads_only_its_new_bytes(logs: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    for index in range(SHARDS):
        convert(logs, store, shard=(index, SHARDS))
    mine, theirs = "group/exp4", "group/exp1"
    assert owner(mine) == 0 and owner(theirs) != 0
    grown = logs / mine / "events.out.tfevents.1.a"
    size = grown.stat().st_size
    append_events(grown, scalar_events("loss", range(14, 30), base=WALL))
    append_events(logs / theirs / "events.out.tfevents.1.a", scalar_events("loss", range(11, 20)))
    new_run = next(f"new/run{n}" for n in range(100) if owner(f"new/run{n}") == 0)
    added = write_plain_run(logs, new_run, steps=5)
    before = {
        run: query_rows(str(store), "SELECT * FROM v_scalars WHERE run_path = ?", run)
        for run in runs_of(store)
    }

    summary = convert(logs, store, shard=(0, SHARDS))
    assert summary.files_read == 2
    assert summary.bytes_read == grown.stat().st_size - size + added.stat().st_size
    assert summary.total_points == 16 + 5
    for run, rows in before.items():
        if run != mine:
            assert query_rows(str(store), "SELECT * FROM v_scalars WHERE run_path = ?", run) == rows

    for index in range(1, SHARDS):
        convert(logs, store, shard=(index, SHARDS))
    plain = tmp_path / "plain.db"
    convert(logs, plain)
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(plain))


def test_shards_take_over_only_their_runs_of_a_nested_source(logs: Path, tmp_path: Path) -> None:
    """``logs/sweep`` converted on its own first, a file and a run of it deleted since: each
    shard of ``logs`` takes over the files of its own runs only (and marks the deleted ones
    gone), and together they do what one plain conversion of ``logs`` does."""
    stores = tmp_path / "sharded.db", tmp_path / "plain.db"
    for store in stores:
        convert(logs / "sweep", store)
    shutil.rmtree(logs / "sweep" / "lr0.1_bs32_sgd" / "acc" / "train")
    shutil.rmtree(logs / "sweep" / "lr0.0001_bs32_sgd")  # a whole run, of shard 2
    inner = str((logs / "sweep").resolve())
    held = "SELECT DISTINCT r.run_path FROM runs AS r JOIN event_files AS f ON f.run_id = r.id "
    held += "WHERE r.source = ? ORDER BY 1"
    sweep_runs = [row[0] for row in query_rows(str(stores[0]), held, inner)]
    convert(logs, stores[0], shard=(0, SHARDS))
    left = [row[0] for row in query_rows(str(stores[0]), held, inner)]
    assert left == [run for run in sweep_runs if owner(f"sweep/{run}") != 0]
    assert 0 < len(left) < len(sweep_runs)
    for index in range(1, SHARDS):
        convert(logs, stores[0], shard=(index, SHARDS))
    assert query_rows(str(stores[0]), held, inner) == []
    convert(logs, stores[1])
    assert without_run_ids(view_rows(stores[0])) == without_run_ids(view_rows(stores[1]))
    assert file_states(stores[0]) == file_states(stores[1])


def test_a_dry_run_plans_only_the_shards_runs(logs: Path, tmp_path: Path) -> None:
    summary = convert(logs, tmp_path / "none.db", shard=(1, SHARDS), dry_run=True)
    planned = {entry["run_path"] for entry in summary.plan}
    assert planned and all(owner(run) == 1 for run in planned)
    assert summary.runs == len(planned) and summary.runs_in_logdir == 21
    assert not (tmp_path / "none.db").exists()


def test_watch_keeps_to_its_shard(logs: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    total = watch(logs, store, interval=0, passes=2, shard=(2, SHARDS))
    assert total.passes == 2 and total.shard == "2/3"
    assert runs_of(store) and all(owner(run) == 2 for run in runs_of(store))


def test_the_command_line_says_which_shard_ran(logs: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store.db")
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logs), "--store", store, "--shard", "1/3", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    runs = len(runs_of(store))
    assert summary["shard"] == {"index": 1, "count": 3, "runs": runs, "runs_in_logdir": 21}
    assert summary["runs"]["total"] == runs
    assert f"shard 1/3: {runs} of the logdir's 21 runs" in result.stderr
    logged = query_rows(store, "SELECT options FROM conversions")
    assert json.loads(logged[0][0])["shard"] == "1/3"


@pytest.mark.parametrize("value", ["3/3", "0/0", "-1/3", "1", "a/b", "1/3/4"])
def test_a_bad_shard_is_a_one_line_usage_error(logs: Path, tmp_path: Path, value: str) -> None:
    store = tmp_path / "store.db"
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logs), "--store", str(store), "--shard", value]
    )
    assert result.exit_code == 2
    assert "--shard" in result.stderr and "K/N" in result.stderr
    assert "Traceback" not in result.stderr and not store.exists()


@pytest.mark.parametrize("value", [(3, 3), (0, 0), (-1, 2), "2/1", (1,), (0.5, 2), "x"])
def test_the_library_refuses_a_bad_shard_before_any_work(tmp_path: Path, value: object) -> None:
    with pytest.raises(UsageError, match="shard"):
        convert(tmp_path / "missing", tmp_path / "s.db", shard=value)
    assert not (tmp_path / "s.db").exists()
    assert ConvertOptions().with_keywords(shard="1/2").shard == Shard(1, 2)
