"""Runs as their writers meant them (design §3), end to end: sweeps written the usual way
convert to one run per training run with their hyper-parameters next to their metrics,
sidecar params join their runs, and a store written under Aim's rules is re-classified."""

from __future__ import annotations

import json
from collections.abc import Collection
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tbconvert import convert, open_store
from tbconvert.cli import cli
from tbconvert.reading import layouts
from tests.support.layouts import (
    WRITERS,
    catboost,
    guild,
    lightning,
    pytorch_sweep,
    ray_tune,
    tensorboardx_sweep,
)
from tests.support.snapshots import (
    StoreFactory,
    connect,
    rows,
    view_rows,
    views_without_gone,
    without_run_ids,
)

# The writers' last loss: 1 / (step + 1) at step 2, through float32.
LAST_LOSS = float(np.float32(1 / 3))


@pytest.mark.parametrize("writer", ["tensorboardx", "pytorch"])
def test_a_sweep_of_n_runs_is_n_runs_with_hparams_next_to_the_last_loss(
    tmp_path: Path, store: str, writer: str
) -> None:
    """add_scalar + add_scalars + add_hparams, N runs: N runs, a context per add_scalars key,
    no orphan warning, and ``tbconvert hparams --metric loss`` has each run's params next to
    its last loss."""
    logdir = tmp_path / "sweep"
    expected = (tensorboardx_sweep if writer == "tensorboardx" else pytorch_sweep)(logdir, runs=4)
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", store])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    with open_store(store) as opened:
        runs = {run["run_path"]: set(run["contexts"]) for run in opened.runs()}
    assert runs == expected
    table = CliRunner().invoke(
        cli, ["hparams", "--store", store, "--metric", "loss", "--format", "json"]
    )
    assert table.exit_code == 0, table.output
    sessions = json.loads(table.stdout)
    assert {session["run_path"] for session in sessions} == set(expected)
    for session in sessions:
        assert session["loss"] == pytest.approx(LAST_LOSS)
        assert session["lr"] is not None


def test_lightning_s_hparams_yaml_becomes_params_of_its_version(tmp_path: Path, store: str) -> None:
    """Keys only hparams.yaml holds (``layers``) join the event file's params, typed as they
    are, in a series named after the file (its source)."""
    lightning(tmp_path)
    summary = convert(tmp_path, store, progress=False)
    assert summary.warnings == [] and summary.exit_code == 0
    with open_store(store) as opened:
        for n in range(3):
            assert opened.params(f"lightning_logs/version_{n}") == {
                "dropout": pytest.approx(0.1 * n),
                "layers": 2.0,
            }
    with closing(connect(store)) as conn:
        sources = rows(
            conn,
            "SELECT DISTINCT s.tag FROM v_series AS s WHERE s.plugin = 'hparams' ORDER BY 1",
        )
    assert ("hparams.yaml",) in sources


def test_ray_tune_s_params_json_is_flattened_with_slashes(tmp_path: Path, store: str) -> None:
    ray_tune(tmp_path, trials=1)
    (trial,) = (tmp_path / "ray_results" / "train_fn").iterdir()
    (trial / "params.json").write_text(
        json.dumps({"lr": 0.01, "model": {"layers": 3, "act": "relu"}, "tags": ["a", 1]}),
        encoding="utf-8",
    )
    convert(tmp_path, store, progress=False)
    with open_store(store) as opened:
        assert opened.params(f"ray_results/train_fn/{trial.name}") == {
            "lr": 0.01,
            "model/act": "relu",
            "model/layers": 3.0,
            "tags": ["a", 1.0],
        }


def test_a_sidecar_that_cannot_be_parsed_is_a_warning_until_it_is_fixed(
    tmp_path: Path, store: str
) -> None:
    lightning(tmp_path, versions=1)
    sidecar = tmp_path / "lightning_logs" / "version_0" / "hparams.yaml"
    sidecar.write_text("dropout: [unclosed\n", encoding="utf-8")
    summary = convert(tmp_path, store, progress=False)
    assert summary.exit_code == 0
    (warning,) = summary.warnings
    assert warning.startswith(
        "lightning_logs/version_0/hparams.yaml: Lightning params not read (invalid YAML"
    )
    with open_store(store) as opened:
        assert opened.params("lightning_logs/version_0") == {"dropout": 0.0}  # the event file's
    sidecar.write_text("dropout: 0.0\nbatch: 64\n", encoding="utf-8")
    convert(tmp_path, store, progress=False)
    sidecar.write_text("dropout: 0.0\nbatch: 128\n", encoding="utf-8")
    convert(tmp_path, store, progress=False)
    with open_store(store) as opened:
        assert opened.params("lightning_logs/version_0") == {"dropout": 0.0, "batch": 128.0}
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT count(*) FROM v_params WHERE key = 'batch'") == [(1,)]
    # YAML is read safely: a tag that would build a Python object is refused, not run.
    sidecar.write_text("x: !!python/object/apply:os.system ['false']\n", encoding="utf-8")
    summary = convert(tmp_path, store, progress=False)
    assert "Lightning params not read" in summary.warnings[0]


def test_a_store_written_with_aim_s_rules_is_reclassified_by_the_next_plain_run(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """Aim's depth rule made each ``<main>`` of add_scalars a run of its own (and the
    writer's file an orphan): a plain run moves the files into one run per training run,
    says how many runs went, and leaves the store a clean conversion would make."""
    logdir = tmp_path / "logs"
    tensorboardx_sweep(logdir, runs=2)
    store, clean = make_store(tmp_path, "old"), make_store(tmp_path, "clean")
    before = convert(logdir, store, progress=False, layout="aim")
    assert before.runs > 2
    after = convert(logdir, store, progress=False)
    assert after.runs_merged == before.runs - 2 and after.files_moved > 0
    convert(logdir, clean, progress=False)
    assert without_run_ids(views_without_gone(store)) == without_run_ids(view_rows(clean))
    again = convert(logdir, store, progress=False)
    assert again.runs_merged == 0 and again.files_read == 0


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_writer_s_layout_converts_from_two_levels_above(
    tmp_path: Path, make_store: StoreFactory, writer: str
) -> None:
    """The same files give the same runs (paths differ by the prefix) and the same points."""
    inner = tmp_path / "a" / "b"
    WRITERS[writer](inner)
    near, far = make_store(tmp_path, "near"), make_store(tmp_path, "far")
    convert(inner, near, progress=False)
    convert(tmp_path, far, progress=False)
    query = "SELECT run_path, context, tag, step, value FROM v_scalars ORDER BY 1, 2, 3, 4"
    with closing(connect(near)) as a, closing(connect(far)) as b:
        moved = [("a/b" if row[0] == "." else f"a/b/{row[0]}", *row[1:]) for row in rows(a, query)]
        assert moved == rows(b, query)


def test_catboost_s_points_are_tensorboard_s_in_contexts_learn_and_test(
    tmp_path: Path, store: str
) -> None:
    """CatBoost's bare files (no file-version record) read as TensorBoard's own reader reads
    each directory, into one run per ``train_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    expected = catboost(tmp_path)
    summary = convert(tmp_path, store, progress=False)
    assert summary.exit_code == 0 and summary.warnings == []
    oracle = []
    for run, contexts in expected.items():
        for context in contexts:
            accumulator = EventAccumulator(str(tmp_path / run / context), {"scalars": 0})
            accumulator.Reload()
            for tag in accumulator.Tags()["scalars"]:
                oracle += [(run, context, tag, e.step, e.value) for e in accumulator.Scalars(tag)]
    with closing(connect(store)) as conn:
        got = rows(conn, "SELECT run_path, context, tag, step, value FROM v_scalars")
    assert sorted(got) == sorted(oracle) and len(oracle) == 2 * 3 * (2 + 3)


def _old_hparams_contexts(names: Collection[str]) -> dict[str, str]:
    return {name: name for name in names}


# The rules of the previous version, each put back by one patch (add_hparams sessions named
# by their directories, no CatBoost rule, no Guild rule), how many files change place and how
# many of the runs those rules made go: the 3 runs' sessions change context only; CatBoost's
# 2 + 3 runs ``learn``, ``test``, ``test1`` of one file each go; the 2 ``<run>/.guild`` runs
# go (their ``<run>``, which held the script's files as orphans, stays).
_PREVIOUS_RULES = {
    "add_hparams": (tensorboardx_sweep, "session_contexts", _old_hparams_contexts, 3, 0),
    "catboost": (catboost, "_CATBOOST_EVENTS", "no file is named so", 5, 5),
    "guild": (guild, "_GUILD", "no directory is named so", 2, 2),
}


@pytest.mark.parametrize("writer", sorted(_PREVIOUS_RULES))
def test_a_store_of_the_previous_rules_is_reclassified_by_the_next_plain_run(
    tmp_path: Path, make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A store written before these rules (sessions in contexts named by their times,
    CatBoost's ``learn`` and ``test`` two runs, Guild's ``.guild`` a run of its own) becomes,
    after one plain run, what a clean conversion makes."""
    build, name, old, moved, merged = _PREVIOUS_RULES[writer]
    logdir = tmp_path / "logs"
    expected = build(logdir)
    store, clean = make_store(tmp_path, "old"), make_store(tmp_path, "clean")
    with monkeypatch.context() as patch:
        patch.setattr(layouts, name, old)
        convert(logdir, store, progress=False)
    with open_store(store) as opened:
        assert {run["run_path"]: set(run["contexts"]) for run in opened.runs()} != expected
    after = convert(logdir, store, progress=False)
    assert (after.files_moved, after.runs_merged) == (moved, merged)
    with open_store(store) as opened:
        assert {run["run_path"]: set(run["contexts"]) for run in opened.runs()} == expected
    convert(logdir, clean, progress=False)
    assert without_run_ids(views_without_gone(store)) == without_run_ids(view_rows(clean))


def test_a_reclassified_file_is_moved_without_being_read_again(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = tmp_path / "logs"
    tensorboardx_sweep(logdir, runs=2)
    with monkeypatch.context() as patch:
        patch.setattr(layouts, "session_contexts", _old_hparams_contexts)
        convert(logdir, store, progress=False)
    after = convert(logdir, store, progress=False)
    assert after.files_moved == 2 and after.files_read == 0 and after.bytes_read == 0
