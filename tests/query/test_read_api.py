"""The Python read API (design §10): open_store, runs, describe, scalars, params, images, pandas.

Everything is checked against a real store of each backend (SQLite and PostgreSQL):
``sample_logdirs/`` (scalars from every writer) plus a small tensorboardX sweep with hparams,
images, texts and a loss that goes NaN, both converted into one store (built by
``tests/support/sweep.py``, which the output and CLI tests read too).  Expected values come
from what was written, or from the database driver (``sqlite3``, ``psycopg``) on the public
views, never from the API under test.
"""

from __future__ import annotations

import math
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from tensorboardX import SummaryWriter

import tbconvert
from tbconvert import convert
from tbconvert.errors import StoreError, UsageError
from tbconvert.output.export import MissingDependency, hparams_table
from tbconvert.query.store import Store, StoredImage
from tests.support.snapshots import StoreFactory, connect, query_rows
from tests.support.sweep import (
    IMAGE_STEPS,
    SAMPLE_LOGDIRS,
    STEPS,
    SWEEP,
    W0,
    sweep_loss,
    sweep_pixels,
)

# --------------------------------------------------------------------------- open_store


def test_open_store_is_exposed_on_the_package(store_path: str) -> None:
    from tbconvert.query.store import open_store

    assert tbconvert.open_store is open_store
    with tbconvert.open_store(str(store_path)) as opened:
        assert isinstance(opened, Store)


def test_open_store_defaults_to_environment(store_path: str, monkeypatch) -> None:
    monkeypatch.setenv("TBCONVERT_STORE", str(store_path))
    with tbconvert.open_store() as opened:
        assert len(opened.runs()) == 10


# SQLite-only: a missing store is a file that must not appear (a server database is not made).
def test_open_missing_store_never_creates_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as error:
        tbconvert.open_store(tmp_path / "missing.db")
    assert error.value.path == str(tmp_path / "missing.db") and "tbconvert tf" in error.value.hint
    assert list(tmp_path.iterdir()) == []


def test_open_foreign_database_is_refused(tmp_path: Path, make_store: StoreFactory) -> None:
    other = make_store(tmp_path, "other", schema=False)
    with closing(connect(other, read_only=False)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
    with pytest.raises(StoreError, match="not a tbconvert store"):
        tbconvert.open_store(other)


# --------------------------------------------------------------------------- runs


def test_runs_lists_every_run_sorted_with_groups_and_contexts(store: Store) -> None:
    runs = store.runs()
    sample = [run for run in runs if run["logdir"] == str(SAMPLE_LOGDIRS)]
    assert [run["run_path"] for run in sample] == [
        "group_1/run_2",
        "group_1/run_3",
        "keras_style/fit/20261121-110640",
        "keras_style/fit/20261121-113640",
        "run_1",
        "tensorboardx_mnist/lr_0.01",
        "tensorboardx_mnist/lr_0.1",
    ]
    by_path = {run["run_path"]: run for run in runs}
    assert by_path["group_1/run_2"]["contexts"] == ["", "train", "validate"]
    # add_scalars' <main>/<key> sub-writers are contexts of the writer's run.
    assert by_path["tensorboardx_mnist/lr_0.1"]["contexts"] == ["", "test", "train"]
    assert by_path["group_1/run_2"]["group_path"] == "group_1"
    assert by_path["run_1"]["points"] == {"scalars": 735}
    assert by_path["run_1"]["series"] == 3 and by_path["run_1"]["params"] == {}


def test_runs_counts_equal_the_views(store: Store, store_path: str) -> None:
    for run in store.runs():
        for view, table in (
            ("v_scalars", "scalars"),
            ("v_images", "images"),
            ("v_texts", "texts"),
            ("v_params", "params"),
        ):
            (count,) = query_rows(
                store_path, f"SELECT count(*) FROM {view} WHERE run_id = ?", run["run_id"]
            )[0]
            assert run["points"].get(table, 0) == count
        assert run["scalar_points"] == run["points"].get("scalars", 0)


def test_runs_carry_typed_params_per_session(store: Store) -> None:
    run = {r["run_path"]: r for r in store.runs("sweep/*")}["sweep/lr_0.1"]
    ((session, params),) = run["params"].items()
    assert session in run["contexts"] and session != ""
    assert params == {"batch_size": 32.0, "lr": 0.1, "optimizer": "adam"}
    assert run["points"]["images"] == len(IMAGE_STEPS) and run["points"]["texts"] == 1


def test_runs_filter_with_globs(store: Store) -> None:
    assert [r["run_path"] for r in store.runs("sweep/*")] == [f"sweep/{r}" for r in sorted(SWEEP)]
    assert [r["run_path"] for r in store.runs(["run_1", "group_1/*"])] == [
        "group_1/run_2",
        "group_1/run_3",
        "run_1",
    ]
    assert store.runs("nothing*") == []


# --------------------------------------------------------------------------- scalars


def test_scalars_is_a_structured_array_equal_to_the_view(store: Store, store_path: str) -> None:
    curve = store.scalars("run_1", "loss")
    assert curve.dtype == np.dtype([("step", "<i8"), ("wall_time", "<f8"), ("value", "<f8")])
    expected = query_rows(
        store_path,
        "SELECT step, wall_time, value FROM v_scalars WHERE run_path = 'run_1' AND tag = 'loss'",
    )
    assert len(curve) == len(expected) == 350
    assert sorted(expected) == sorted(map(tuple, curve.tolist()))


def test_scalars_in_step_order_keeps_resumed_duplicates(store: Store) -> None:
    steps = store.scalars("run_1", "loss")["step"]
    assert np.all(np.diff(steps) >= 0)
    assert steps[0] == 0 and steps[-1] == 299
    unique, counts = np.unique(steps, return_counts=True)
    assert set(unique[counts == 2]) == set(range(150, 200))


def test_scalars_nan_where_nan_was_logged(store: Store) -> None:
    curve = store.scalars("sweep/lr_1.0", "loss")
    expected = [sweep_loss("lr_1.0", step) for step in range(STEPS)]
    assert curve["step"].tolist() == list(range(STEPS))
    assert np.array_equal(
        curve["value"], np.array(expected, dtype=np.float32).astype(float), equal_nan=True
    )
    assert np.isnan(curve["value"][6:]).all() and not np.isnan(curve["value"][:6]).any()
    assert curve["wall_time"].tolist() == [W0 + step for step in range(STEPS)]


def test_scalars_keep_float64_exactly(store: Store, store_path: str) -> None:
    curve = store.scalars("group_1/run_3", "ema_decay")
    expected = query_rows(
        store_path,
        "SELECT value FROM v_scalars WHERE run_path = "
        "'group_1/run_3' AND tag = 'ema_decay' ORDER BY step",
    )
    assert curve["value"].tolist() == [value for (value,) in expected]
    assert any(value != float(np.float32(value)) for (value,) in expected)


def test_scalars_by_run_id_and_context(store: Store) -> None:
    run_id = {r["run_path"]: r["run_id"] for r in store.runs()}["group_1/run_2"]
    train = store.scalars(run_id, "epoch_loss", context="train")
    validate = store.scalars("group_1/run_2", "epoch_loss", context="validate")
    assert len(train) == len(validate) == 25
    assert not np.array_equal(train["value"], validate["value"])


def test_scalars_ambiguous_context_names_the_choices(store: Store) -> None:
    with pytest.raises(UsageError) as error:
        store.scalars("group_1/run_2", "epoch_loss")
    assert "'train'" in error.value.hint and "'validate'" in error.value.hint


def test_scalars_unknown_tag_or_run_suggests(store: Store) -> None:
    with pytest.raises(UsageError) as error:
        store.scalars("run_1", "los")
    assert "loss" in error.value.hint
    with pytest.raises(UsageError) as error:
        store.scalars("run_11", "loss")
    assert "run_1" in error.value.hint and "tbconvert runs" in error.value.hint


def test_scalars_keep_int64_steps_and_infinities(tmp_path: Path, make_store: StoreFactory) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "big"), flush_secs=3600) as writer:
        writer.add_scalar("x", 1.5, 2**62, walltime=W0)
        writer.add_scalar("x", float("inf"), 2**62 + 1, walltime=W0 + 1)
        writer.add_scalar("x", float("-inf"), 2**62 + 2, walltime=W0 + 2)
    target = make_store(tmp_path, "s")
    convert(logdir, target, progress=False)
    with tbconvert.open_store(target) as opened:
        curve = opened.scalars("big", "x")
    assert curve["step"].tolist() == [2**62, 2**62 + 1, 2**62 + 2]
    assert curve["value"].tolist() == [1.5, math.inf, -math.inf]


# --------------------------------------------------------------------------- params


def test_params_are_typed(store: Store) -> None:
    assert store.params("sweep/lr_0.01") == {"batch_size": 32.0, "lr": 0.01, "optimizer": "sgd"}
    assert store.params("run_1") == {}


def test_params_of_disagreeing_sessions_need_a_context(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "trials"), flush_secs=3600) as writer:
        writer.add_hparams({"lr": 0.1, "flag": True}, {"m": 1.0}, name="a")
        writer.add_hparams({"lr": 0.2, "flag": True}, {"m": 2.0}, name="b")
    target = make_store(tmp_path, "s")
    convert(logdir, target, progress=False)
    with tbconvert.open_store(target) as opened:
        with pytest.raises(UsageError) as error:
            opened.params("trials")
        assert "'a'" in error.value.hint and "'b'" in error.value.hint
        assert opened.params("trials", context="b") == {"flag": True, "lr": 0.2}
        table = hparams_table(opened, metrics=["m"])
    assert [(row["context"], row["lr"], row["flag"], row["m"]) for row in table] == [
        ("a", 0.1, True, 1.0),
        ("b", 0.2, True, 2.0),
    ]


def test_hparams_table_puts_final_metrics_next_to_params(store: Store) -> None:
    table = hparams_table(store, metrics=["accuracy", "hparam/accuracy"], run="sweep/*")
    assert [row["run_path"] for row in table] == [f"sweep/{run}" for run in sorted(SWEEP)]
    for row in table:
        lr, optimizer, final, _ = SWEEP[row["run_path"].split("/")[1]]
        assert (row["lr"], row["optimizer"], row["batch_size"]) == (lr, optimizer, 32.0)
        assert row["accuracy"] == pytest.approx(final) and row["hparam/accuracy"] == pytest.approx(
            final
        )
    explicit = hparams_table(store, metrics=[("", "loss")], run="sweep/lr_1.0")
    assert explicit[0]["loss"] is None  # the last loss is the NaN, stored as NULL
    # The session's own context, whatever its directory is called, is "hparams".
    (session,) = hparams_table(store, metrics=["hparams:hparam/accuracy"], run="sweep/lr_0.1")
    assert session["hparam/accuracy (hparams)"] == pytest.approx(SWEEP["lr_0.1"][2])


# --------------------------------------------------------------------------- images


def test_images_come_back_as_the_pixels_logged(store: Store) -> None:
    images = list(store.images(run="sweep/*", tag="samples"))
    assert len(images) == len(SWEEP) * len(IMAGE_STEPS)
    for image in images:
        assert isinstance(image, StoredImage)
        pixels = sweep_pixels(image.run_path.split("/")[1], image.step)
        assert (image.format, image.width, image.height) == (
            "PNG",
            pixels.shape[1],
            pixels.shape[0],
        )
        decoded = image.open()
        assert decoded.size == (image.width, image.height)
        assert np.array_equal(np.asarray(decoded.convert("RGB")), pixels)


def test_images_filtered_by_step_and_equal_to_the_view(store: Store, store_path: str) -> None:
    images = list(store.images(tag="samples", step=2, run="sweep/lr_0.1"))
    assert [(i.run_path, i.step, i.idx) for i in images] == [("sweep/lr_0.1", 2, 0)]
    ((data,),) = query_rows(
        store_path, "SELECT data FROM v_images WHERE run_path = 'sweep/lr_0.1' AND step = 2"
    )
    assert images[0].data == data and data.startswith(b"\x89PNG")
    assert list(store.images(tag="samples", step=1)) == []


# --------------------------------------------------------------------------- describe


def test_describe_lists_series_ranges_last_values_and_files(store: Store, store_path: str) -> None:
    detail = store.describe("run_1")
    assert detail["run"]["run_path"] == "run_1" and detail["params"] == {}
    loss = next(s for s in detail["series"] if s["tag"] == "loss")
    ((step, value),) = query_rows(
        store_path,
        "SELECT step, value FROM v_last_scalars WHERE run_path = 'run_1' AND tag = 'loss'",
    )
    assert (loss["plugin"], loss["points"], loss["first_step"], loss["last_step"]) == (
        "scalars",
        350,
        0,
        299,
    )
    assert loss["last_value"] == value and step == 299
    assert [f["status"] for f in detail["files"]] == ["ok", "ok"]
    assert all(f["offset_consumed"] == f["size"] for f in detail["files"])


def test_describe_texts_images_and_params(store: Store) -> None:
    detail = store.describe("sweep/lr_1.0")
    by_tag = {s["tag"]: s for s in detail["series"]}
    assert by_tag["notes/text_summary"]["last_value"] == "Diverged at step 6"
    assert by_tag["samples"]["points"] == 2 and by_tag["samples"]["last_step"] == 2
    assert by_tag["loss"]["last_value"] is None  # NaN, stored as NULL
    assert list(detail["params"].values()) == [{"batch_size": 32.0, "lr": 1.0, "optimizer": "adam"}]


def test_describe_unknown_run_is_a_usage_error(store: Store) -> None:
    with pytest.raises(UsageError, match="no run 'sweep/lr_2'"):
        store.describe("sweep/lr_2")


def test_query_returns_dicts(store: Store) -> None:
    rows = store.query(
        "SELECT run_path FROM v_runs WHERE run_path LIKE :p ORDER BY 1", {"p": "sweep/%"}
    )
    assert rows == [{"run_path": f"sweep/{run}"} for run in sorted(SWEEP)]


# --------------------------------------------------------------------------- pandas


def test_to_pandas_scalars_long_format(store: Store) -> None:
    pytest.importorskip("pandas")
    frame = store.to_pandas("scalars", run="sweep/*", tag="loss")
    assert list(frame.columns) == [
        "run_id",
        "run_path",
        "context",
        "tag",
        "step",
        "wall_time",
        "value",
    ]
    assert len(frame) == len(SWEEP) * STEPS
    assert str(frame["step"].dtype) == "int64" and str(frame["value"].dtype) == "float64"
    assert frame["value"].isna().sum() == STEPS - 6


def test_to_pandas_hparams_and_runs(store: Store) -> None:
    pytest.importorskip("pandas")
    wide = store.to_pandas("hparams", metrics=["accuracy"])
    assert set(wide.columns) >= {"run_path", "context", "lr", "optimizer", "batch_size", "accuracy"}
    best = wide.sort_values("accuracy", ascending=False).iloc[0]
    assert best["run_path"] == "sweep/lr_0.1"
    runs = store.to_pandas("runs")
    assert len(runs) == 10 and "scalar_points" in runs.columns
    texts = store.to_pandas("texts", tag="notes")
    assert sorted(texts["value"]) == ["Diverged at step 6", "converged fine", "converged fine"]
    assert len(store.to_pandas("params", tag="lr")) == len(SWEEP)


def test_to_pandas_without_pandas_names_the_extra(store: Store, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingDependency) as error:
        store.to_pandas("scalars")
    assert "pip install '.[pandas]'" in str(error.value)
    assert isinstance(error.value, ImportError)


def test_to_pandas_unknown_kind(store: Store) -> None:
    pytest.importorskip("pandas")
    with pytest.raises(UsageError, match="unknown kind"):
        store.to_pandas("nonsense")


def test_params_nan_agrees_with_itself(tmp_path: Path, make_store: StoreFactory) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "trials"), flush_secs=3600) as writer:
        writer.add_hparams({"dropout": math.nan, "lr": 0.1}, {"m": 1.0}, name="a")
        writer.add_hparams({"dropout": math.nan, "lr": 0.1}, {"m": 2.0}, name="b")
    target = make_store(tmp_path, "s")
    convert(logdir, target, progress=False)
    with tbconvert.open_store(target) as opened:
        params = opened.params("trials")
    assert math.isnan(params["dropout"]) and params["lr"] == 0.1


def test_show_last_value_agrees_with_v_last_scalars_whatever_order_files_came_in(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    # Two files of one run end at the same step; the store meets "b" first, so file ids run
    # against path order.  The last point is the one v_last_scalars picks (path order), in
    # the read API too, as in a clean conversion.
    from tests.support.eventfiles import simple_value, summary_event, write_events

    run = tmp_path / "logs" / "run"
    write_events(run / "events.out.tfevents.b", [summary_event(5, 2.0, [simple_value("x", 2.0)])])
    store = make_store(tmp_path)
    convert(tmp_path / "logs", store, progress=False)
    write_events(run / "events.out.tfevents.a", [summary_event(5, 1.0, [simple_value("x", 1.0)])])
    convert(tmp_path / "logs", store, progress=False)
    with tbconvert.open_store(store) as opened:
        (series,) = opened.describe("run")["series"]
        (last,) = opened.query("SELECT value FROM v_last_scalars")
    assert series["last_value"] == last["value"] == 2.0
