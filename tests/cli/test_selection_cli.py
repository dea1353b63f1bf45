"""``--where``, ``--top N --by`` and ``--column`` on the commands, and ``tbconvert check``'s exit
codes (SPEC §2: 4 when not met), through click's runner and a real process, on SQLite and
PostgreSQL.  What the runs logged is ``tests/support/selection_store.RUNS``."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tbconvert.cli import cli
from tests.support.selection_store import build_selection_store
from tests.support.snapshots import StoreFactory

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_selection_store(tmp_path_factory.mktemp("selection_cli"), make_store)


def invoke(*arguments: str) -> Result:
    return CliRunner().invoke(cli, list(arguments))


def test_runs_where_top_by_and_columns(store: str) -> None:
    result = invoke(
        "runs",
        "--store",
        store,
        "--where",
        'opt in ["adam", "sgd"] and count(loss) > 0',
        "--top",
        "2",
        "--by=-min(loss)",
        "--column",
        "best=min(loss)",
        "--column",
        "at=argmin(loss)",
        "--json",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    # a/r2's loss is all NaN: no min, so last by --by; a/r0 0.25 < a/r1 1.0.
    assert [(row["run_path"], row["values"]) for row in rows] == [
        ("a/r0", {"best": 0.25, "at": 5}),
        ("a/r1", {"best": 1.0, "at": 2}),
    ]


def test_runs_table_shows_the_columns(store: str) -> None:
    result = invoke("runs", "--store", store, "--run", "b/*", "--column", "n=count(loss)")
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split()[-1] == "n"
    # b/r3 and b/r6 resumed: their current points
    assert [line.split()[-1] for line in lines] == ["9", "4", "-", "3"]


def test_hparams_takes_the_selection_and_its_columns(store: str) -> None:
    result = invoke(
        "hparams",
        "--store",
        store,
        "--where",
        "flag == True",
        "--by",
        "layers",
        "--column",
        'v=max(acc, context="val")',
        "--format",
        "csv",
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(row["run_path"], row["v"]) for row in rows] == [
        ("b/r5", "0.5"),
        ("a/r0", "0.75"),
        ("a/r2", "0.75"),
    ]


def test_export_takes_only_the_chosen_runs(store: str) -> None:
    where = 'opt == "rms"'
    result = invoke("export", "scalars", "--store", store, "--where", where, "--tag", "loss")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert {row["run_path"] for row in rows} == {"b/r3"}
    assert len(rows) == 9  # the last attempt's points, as --resumed current reads them


def test_an_empty_selection_exports_nothing(store: str) -> None:
    result = invoke("export", "scalars", "--store", store, "--where", "lr > 100")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["run_id,run_path,context,tag,step,wall_time,value"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["runs", "--where", "mni(loss) < 1"], "--where: column 1: unknown function 'mni'"),
        (["runs", "--by", "-mni(loss)"], "--by: column 2: unknown function 'mni'"),
        (["runs", "--top", "2"], "--top N needs --by EXPR"),
        (["runs", "--column", "best"], "--column 'best': expected NAME=EXPR"),
        (["hparams", "--where", "lr <"], "--where: column 5: unexpected end of expression"),
        (["export", "dataset", "-o", "x", "--top", "1"], "export dataset takes the whole store"),
        (["check", "--where", "max(acc) > 0"], "--where: column 1: max(acc): run 'a/r0'"),
    ],
)
def test_a_bad_selection_is_one_line_and_exit_2(
    store: str, arguments: list[str], message: str
) -> None:
    result = invoke(*arguments, "--store", store)
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: {message}"), last


@pytest.mark.parametrize(
    ("arguments", "code", "failing"),
    [
        (["--where", "lr < 0.05"], 4, ["a/r2", "b/r3", "b/r4", "b/r6"]),
        (["--where", "lr < 0.05", "--any"], 0, ["a/r2", "b/r3", "b/r4", "b/r6"]),
        (["--where", "lr < 5", "--run", "a/*"], 0, []),
        (["--where", "last(loss) < 2", "--run", "b/*", "--all"], 4, ["b/r4", "b/r5"]),
        (["--where", "lr < 5", "--run", "nothing/*"], 4, []),
    ],
)
def test_check_exit_codes(store: str, arguments: list[str], code: int, failing: list[str]) -> None:
    result = invoke("check", "--store", store, *arguments, "--json")
    assert result.exit_code == code, result.output
    report = json.loads(result.stdout)
    assert report["failing"] == failing
    assert report["met"] is (code == 0)
    plain = invoke("check", "--store", store, *arguments)
    assert plain.exit_code == code
    assert plain.stdout == ""
    assert plain.stderr.startswith("met:" if code == 0 else "not met:")
    if code:
        assert [line.split()[-1] for line in plain.stderr.splitlines()[1:]] == failing


def test_check_exit_codes_in_a_process(store: str) -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    codes = []
    for where in ("lr < 5 or count(loss) >= 0", "lr < 0.05", "lr <"):
        done = subprocess.run(
            [sys.executable, "-m", "tbconvert", "check", "--store", store, "--where", where],
            capture_output=True,
            text=True,
            env=environment,
            check=False,
        )
        codes.append(done.returncode)
    assert codes == [0, 4, 2]


def test_push_mlflow_sends_only_the_chosen_runs(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    arguments = ["--store", store, "--tracking-uri", uri, "--json"]
    result = invoke("push", "mlflow", *arguments, "--top", "2", "--by", "lr")
    assert result.exit_code == 0, result.output
    pushed = sorted(run["run_path"] for run in json.loads(result.stdout)["runs"])
    assert pushed == ["a/r2", "b/r3"]  # the highest lr: 1.0 and 0.1


def test_publish_takes_only_the_chosen_runs(store: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = invoke("publish", "--store", store, "--where", 'opt == "rms"', "-o", str(site), "-q")
    assert result.exit_code == 0, result.output
    text = (site / "data" / "overview.js").read_text()
    document = json.loads(text.removeprefix("TBV.published = ").removesuffix(";"))
    assert [run["run"] for run in document["overview"]["runs"]] == ["b/r3"]


def test_a_chosen_run_is_that_run_not_its_namesake_in_another_logdir(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    from tensorboardX import SummaryWriter

    from tbconvert import convert

    store = make_store(tmp_path, "namesakes")
    # The same run path, with a glob's special characters, in two logdirs of one store.
    for logdir, lr in (("first", 0.01), ("second", 0.5)):
        with SummaryWriter(str(tmp_path / logdir / "run[1]")) as writer:
            for step in range(3):
                writer.add_scalar("loss", lr * (step + 1), step)
            writer.add_hparams({"lr": lr}, {"hparam/loss": lr})
        assert convert(tmp_path / logdir, store, progress=False).exit_code == 0
    runs = json.loads(invoke("runs", "--store", store, "--json").stdout)
    assert [run["run_path"] for run in runs] == ["run[1]", "run[1]"]
    (chosen,) = json.loads(invoke("runs", "--store", store, "--where", "lr < 0.1", "--json").stdout)
    result = invoke("export", "scalars", "--store", store, "--where", "lr < 0.1", "--tag", "loss")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert {int(row["run_id"]) for row in rows} == {chosen["run_id"]}
    assert [float(row["value"]) for row in rows] == pytest.approx([0.01, 0.02, 0.03])


def test_a_chosen_run_keeps_its_id_through_a_copy_and_its_text_is_its_escaped_path() -> None:
    import copy
    import pickle
    from fnmatch import fnmatchcase

    from tbconvert.filters import ChosenRun, run_matches

    chosen = ChosenRun("a/run[1]*", 7)
    for copied in (pickle.loads(pickle.dumps(chosen)), copy.deepcopy(chosen)):
        assert (copied.run_id, copied.run_path) == (7, "a/run[1]*")
        assert run_matches(7, "elsewhere", (copied,))
        assert not run_matches(8, "a/run[1]*", (copied,))
    assert fnmatchcase("a/run[1]*", chosen)
    assert not fnmatchcase("a/run1x", chosen)
