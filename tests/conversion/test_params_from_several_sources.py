"""One rule for params from several sources (design §6, #44).

Lightning versions written as Lightning writes them (``tests.support.lightning_params``),
converted, and compared with independent oracles (TensorBoard's reader, ``yaml.safe_load``):
one row per key, the event file's where both hold it, whatever order the files came in, and
nothing from a file's modification time.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import closing
from pathlib import Path
from typing import Any

from tbconvert import convert, open_store
from tbconvert.push.source import chosen_runs
from tbconvert.reading.layouts import PARAMS_SIDECARS
from tbconvert.store.params_rule import PARAMS_SIDECAR_SERIES
from tests.support.lightning_params import (
    HPARAMS,
    VERSION,
    YAML_ONLY,
    check_version,
    lightning_version,
    params_rows,
    same,
    write_session,
    write_yaml,
)
from tests.support.snapshots import (
    StoreFactory,
    connect,
    rows,
    view_rows,
    views_without_gone,
    without_run_ids,
)


def test_a_lightning_version_has_one_row_per_key_the_event_file_s_where_both_hold_it(
    tmp_path: Path, store: str
) -> None:
    version = lightning_version(tmp_path / "logs")
    convert(tmp_path / "logs", store, progress=False)
    check_version(store, version)
    found = {row[0]: row for row in params_rows(store)}
    # What the issue saw: the sidecar's floats and nulls in place of what TensorBoard shows.
    assert found["config/InputCh"][1:] == ("[0]", None, "string")
    assert found["config/norm"][1:] == ("None", None, "string")
    assert found["batch_size"][1:] == ("32.0", 32.0, "number")
    assert found["data/folds"][1:] == ("[1,2,3]", None, "json")
    assert found["seed"][1:] == ("7", 7.0, "integer")
    assert found["nothing"][1:] == ("null", None, "json")
    with open_store(store) as opened:
        typed = opened.params(VERSION)
    assert same(typed["data/folds"], [1, 2, 3]) and same(typed["seed"], 7)
    assert same(typed["data/splits"], [0.8, 0.2]) and typed["config/norm"] == "None"
    with open_store(store) as opened:
        frame = opened.to_pandas("params")
    long_rows = sorted(
        (key, value, None if num != num else num, kind)
        for key, value, num, kind in frame[["key", "value", "value_num", "value_type"]].itertuples(
            index=False
        )
    )
    assert long_rows == params_rows(store)  # the long format shows what v_params shows


def test_push_sends_the_value_v_params_shows(tmp_path: Path, store: str) -> None:
    lightning_version(tmp_path / "logs")
    convert(tmp_path / "logs", store, progress=False)
    with open_store(store, upgrade=True) as opened, opened.connect() as conn:
        (run,) = chosen_runs(conn)
    shown = {(key, value) for key, value, _num, _type in params_rows(store)}
    assert {(key, value) for key, value in run.params[""].items()} == shown


def test_the_sidecar_names_are_the_readers(tmp_path: Path) -> None:
    assert set(PARAMS_SIDECAR_SERIES) == set(PARAMS_SIDECARS)


def _touch_all(root: Path, seconds: float) -> None:
    for path in root.rglob("*"):
        os.utime(path, (seconds, seconds))


def test_files_times_change_nothing_in_the_store(tmp_path: Path, make_store: StoreFactory) -> None:
    """A copy without times, an upload or a touch: equal views, fresh or re-run."""
    logdir = tmp_path / "logs"
    lightning_version(logdir)
    first, second = make_store(tmp_path, "first"), make_store(tmp_path, "second")
    _touch_all(logdir, 1_600_000_000)
    convert(logdir, first, progress=False)
    _touch_all(logdir, 1_700_000_000.5)
    convert(logdir, second, progress=False)
    assert without_run_ids(view_rows(first)) == without_run_ids(view_rows(second))
    convert(logdir, first, progress=False)  # touched since: the sidecar is read again
    assert without_run_ids(view_rows(first)) == without_run_ids(view_rows(second))
    with closing(connect(first)) as conn:
        times = rows(conn, "SELECT first_wall_time FROM v_series WHERE tag = 'hparams.yaml'")
    assert times == [(None,)]


def _clean(tmp_path: Path, make_store: StoreFactory, logdir: Path, name: str) -> Any:
    clean = make_store(tmp_path, name)
    convert(logdir, clean, progress=False)
    return without_run_ids(view_rows(clean))


def test_the_rule_holds_whatever_order_the_files_come_and_go_in(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """Sidecar first and the session later; the session's file gone; the sidecar changed:
    each time the store equals a clean conversion of the logdir as it is (without the rows
    of deleted files, the history design §7 keeps)."""
    logdir = tmp_path / "logs"
    version = logdir / VERSION
    store = make_store(tmp_path, "incremental")
    write_session(version, {}, "metrics")
    write_yaml(version, {**HPARAMS, **YAML_ONLY})
    convert(logdir, store, progress=False)
    check_version(store, version)  # the sidecar's alone, typed as YAML
    assert ("batch_size", "32", 32.0, "integer") in params_rows(store)

    session = write_session(version, HPARAMS, "session")
    convert(logdir, store, progress=False)
    check_version(store, version)
    assert without_run_ids(view_rows(store)) == _clean(tmp_path, make_store, logdir, "c1")

    session.unlink()
    convert(logdir, store, progress=False)
    clean = _clean(tmp_path, make_store, logdir, "c2")
    assert without_run_ids(views_without_gone(store)) == clean
    write_session(version, {"lr": 0.5, "seed": 8}, "again")
    write_yaml(version, {"lr": 0.1, "seed": 9, "extra": [1, 2.5]})
    convert(logdir, store, progress=False)
    clean = _clean(tmp_path, make_store, logdir, "c3")
    assert without_run_ids(views_without_gone(store)) == clean
    found = {row[2]: row[3:] for row in clean["v_params"]}
    assert found["seed"] == ("8.0", 8.0, "number")  # the event file's, not the YAML's 9
    assert found["extra"] == ("[1,2.5]", None, "json")
    assert found["lr"] == ("0.5", 0.5, "number")


def test_copied_logdir_converts_to_the_same_params(tmp_path: Path, store: str) -> None:
    """A copy without its times (``cp`` without ``-p``) at another path: the same params."""
    lightning_version(tmp_path / "logs")
    shutil.copytree(tmp_path / "logs", tmp_path / "copy", copy_function=shutil.copyfile)
    convert(tmp_path / "logs", store, progress=False)
    convert(tmp_path / "copy", store, progress=False)
    with closing(connect(store)) as conn:
        by_logdir = rows(
            conn,
            "SELECT r.logdir, p.key, p.value, p.value_num, p.value_type FROM v_params AS p "
            "JOIN v_runs AS r ON r.run_id = p.run_id ORDER BY 1, 2",
        )
    halves = {}
    for logdir, *rest in by_logdir:
        halves.setdefault(logdir, []).append(tuple(rest))
    original, copy = halves.values()
    assert original == copy and len(original) == len({row[0] for row in original})


def test_ray_tune_s_params_json_keeps_its_json_types_beside_the_session(
    tmp_path: Path, store: str
) -> None:
    """params.json (oracle: ``json.loads``) adds the keys the session lacks, with their JSON
    types; where a run has both sidecars, hparams.yaml's key shows before params.json's."""
    trial = tmp_path / "ray" / "train_fn" / "trial_0"
    write_session(trial, {"lr": 0.1, "layers": 3})
    written = {"lr": 0.2, "layers": 4, "model": {"act": "relu", "sizes": [64, 32]}, "x": None}
    (trial / "params.json").write_text(json.dumps(written), encoding="utf-8")
    write_yaml(trial, {"x": 1, "only_yaml": [1.5]})
    convert(tmp_path / "ray", store, progress=False)
    found = {row[0]: row[1:] for row in params_rows(store, "train_fn/trial_0")}
    assert found == {
        "lr": ("0.1", 0.1, "number"),
        "layers": ("3.0", 3.0, "number"),
        "model/act": ("relu", None, "string"),
        "model/sizes": ("[64,32]", None, "json"),
        "x": ("1", 1.0, "integer"),
        "only_yaml": ("[1.5]", None, "json"),
    }
