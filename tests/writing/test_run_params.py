"""``run_params`` (revision 0018): the value a selection reads of each run's param, kept by
the writer while sidecars hide and unhide an event file's keys, files are replaced, go and
move.  The oracle is the rule written again in Python from the params rows
(``snapshots.assert_run_params_exact``) and, for the selection, the values a pandas frame
of ``v_params`` gives."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from tbconvert import convert, open_store
from tests.support.lightning_params import write_session, write_yaml
from tests.support.revisions import down_and_up
from tests.support.snapshots import StoreFactory, assert_run_params_exact, connect, rows


def _kept(store: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    """``run_params`` by (run path, key), after checking it against the rule."""
    with contextlib.closing(connect(store)) as connection:
        assert_run_params_exact(connection)
        return {
            (run_path, key): (value, value_num, value_type)
            for run_path, key, value, value_num, value_type in rows(
                connection,
                "SELECT r.run_path, p.key, p.value, p.value_num, p.value_type "
                "FROM run_params AS p JOIN runs AS r ON r.id = p.run_id",
            )
        }


def _shown(store: str) -> dict[tuple[str, str], float | None]:
    """Each run's ``lr`` as ``v_params`` shows it (one hparams session per run here)."""
    with open_store(store) as opened:
        frame = opened.to_pandas("params")
    chosen = frame[frame["key"] == "lr"]
    return {
        (run, "lr"): num for run, num in zip(chosen["run_path"], chosen["value_num"], strict=True)
    }


def _selected(store: str, where: str) -> list[str]:
    with open_store(store) as opened:
        return sorted(row["run_path"] for row in opened.select_runs(where))


def test_a_sidecar_hides_and_unhides_an_event_file_s_key_across_conversions(
    tmp_path: Path, store: str
) -> None:
    logdir = tmp_path / "logs"
    run = logdir / "run"
    write_session(run, {}, "metrics")
    write_yaml(run, {"lr": 0.1, "seed": 9})
    convert(logdir, store, progress=False)
    assert _kept(store)["run", "lr"] == ("0.1", 0.1, "number")
    assert _selected(store, "lr < 0.2 and seed == 9") == ["run"]

    session = write_session(run, {"lr": 0.5}, "session")  # the event file's key wins
    convert(logdir, store, progress=False)
    assert _kept(store)["run", "lr"][1] == 0.5 == _shown(store)["run", "lr"]
    assert _kept(store)["run", "seed"][1] == 9  # the sidecar's own key stays
    assert _selected(store, "lr < 0.2") == []
    assert _selected(store, "lr > 0.2") == ["run"]

    session.unlink()  # a deleted file keeps its rows (design §7): still the session's
    convert(logdir, store, progress=False)
    assert _kept(store)["run", "lr"][1] == 0.5

    write_yaml(run, {"lr": 0.3, "extra": 2})  # edited: its rows replaced
    write_session(run, {"lr": 0.7}, "again")
    convert(logdir, store, progress=False)
    kept = _kept(store)
    assert kept["run", "extra"][1] == 2 and ("run", "seed") not in kept
    assert _selected(store, "lr == 0.3") == []
    convert(logdir, store, progress=False, full=True)  # every file read again
    assert _kept(store)["run", "extra"] == kept["run", "extra"]


def test_the_rows_follow_a_renamed_run_and_a_replaced_file(tmp_path: Path, store: str) -> None:
    logdir = tmp_path / "logs"
    write_session(logdir / "a", {"lr": 0.01, "opt": "adam"}, "a")
    write_session(logdir / "b", {"lr": 0.02, "opt": "sgd"}, "b")
    convert(logdir, store, progress=False)
    assert _selected(store, 'lr <= 0.01 and opt == "adam"') == ["a"]
    shutil.move(logdir / "a", logdir / "moved")
    convert(logdir, store, progress=False)
    # A new run; the old one keeps the rows of its gone file (design §7), as v_params does.
    assert _kept(store)["moved", "lr"][1] == 0.01 == _shown(store)["a", "lr"]
    assert _selected(store, 'lr <= 0.01 and opt == "adam"') == ["a", "moved"]
    (old,) = (logdir / "b").glob("*tfevents*")
    old.unlink()
    write_session(logdir / "b", {"lr": 0.001}, "b")  # the same name: a replaced file
    convert(logdir, store, progress=False)
    assert _kept(store)["b", "lr"][1] == 0.001
    assert _selected(store, "lr in (0.001, 0.5)") == ["b"]
    assert _selected(store, "0.005 > lr") == ["b"]


def test_revision_0018_fills_the_table_and_its_downgrade_drops_it(
    store: str, tmp_path: Path
) -> None:
    write_session(tmp_path / "logs" / "run", {"lr": 0.5}, "session")
    write_yaml(tmp_path / "logs" / "run", {"lr": 0.1, "seed": 9})
    write_session(tmp_path / "logs" / "other", {"lr": 0.2}, "other")
    convert(tmp_path / "logs", store, progress=False)
    kept = _kept(store)
    assert len(kept) == 3
    assert down_and_up(store, "0017", "run_params") == 3
    assert _kept(store) == kept


# Conditions on numbers, some copied into the param's join (narrowed), some not; each with
# the same condition in Python over a run's values.
NUMERIC_CONDITIONS = {
    "0.05 < lr": lambda lr, layers: lr > 0.05,
    "0.02 <= lr < 0.06": lambda lr, layers: 0.02 <= lr < 0.06,
    "lr in (0.01, 0.03) and layers >= 1": lambda lr, layers: lr in (0.01, 0.03) and layers >= 1,
    "lr == 0.04 and layers == True": lambda lr, layers: lr == 0.04 and layers == 1,
    "not lr < 0.05": lambda lr, layers: not lr < 0.05,
    "lr < 0.03 or layers == 2": lambda lr, layers: lr < 0.03 or layers == 2,
    "lr * 2 > 0.1": lambda lr, layers: lr * 2 > 0.1,
}


def test_conditions_on_numbers_select_what_v_params_says(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """Whether a comparison leads from the index or not, the runs are those the values of
    ``v_params`` (pandas) meet; a sidecar's hidden ``lr`` changes nothing."""
    logdir = tmp_path / "logs"
    for index in range(12):
        run = logdir / f"r{index:02d}"
        write_session(run, {"lr": index / 100, "layers": index % 3}, "s")
        if index % 4 == 0:
            write_yaml(run, {"lr": 0.5})
    store = make_store(tmp_path)
    convert(logdir, store, progress=False)
    with open_store(store) as opened:
        frame = opened.to_pandas("params")
    values = frame.pivot(index="run_path", columns="key", values="value_num")
    for where, condition in NUMERIC_CONDITIONS.items():
        expected = sorted(
            run for run, row in values.iterrows() if condition(row["lr"], row["layers"])
        )
        assert _selected(store, where) == expected, where


def test_a_range_of_a_param_leads_the_plan(tmp_path: Path) -> None:
    """SQLite starts from the index range of the key's values, not from every run, in a
    store as the converter leaves it (no statistics)."""
    from sqlalchemy import text

    from tbconvert.query.expression_sql import Compiler
    from tbconvert.query.expressions import parse_condition

    logdir = tmp_path / "logs"
    write_session(logdir / "r", {"lr": 0.01, "opt": "adam"}, "s")
    store = str(tmp_path / "store.db")
    convert(logdir, store, progress=False)
    compiler = Compiler("sqlite")
    tree = parse_condition(
        'lr < 0.1 and opt == "adam" and last(train_loss, context="") < 1', "--where"
    )
    condition = compiler.condition(tree, "--where")
    compiler.require(tree)
    source, link, run_id = compiler.source()
    with open_store(store) as opened, opened.connect() as conn:
        plan = conn.execute(
            text(f"EXPLAIN QUERY PLAN SELECT {run_id} FROM {source} WHERE {link} AND {condition}"),
            compiler.parameters,
        ).fetchall()
    assert "ix_run_params_key_value_num (key=? AND value_num<?)" in plan[0][3]


def test_several_runs_in_one_transaction(tmp_path: Path, make_store: StoreFactory) -> None:
    """Small files of many runs share a commit group: each run's rows are made."""
    logdir = tmp_path / "logs"
    for index in range(12):
        write_session(logdir / f"r{index:02d}", {"lr": index / 100, "opt": "adam"}, "s")
    store = make_store(tmp_path)
    convert(logdir, store, progress=False)
    assert len(_kept(store)) == 24
    assert _selected(store, "lr >= 0.1") == ["r10", "r11"]
