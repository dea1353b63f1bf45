"""``tbconvert runs``, ``show``, ``export`` and ``datasette-metadata``, and tbconvert.output.export.

The commands are thin layers over the read API, so these tests check what the layer adds:
data on stdout only, ``-o FILE``, formats, globs, exit codes, and exact values in CSV and JSON
lines (floats round-trip, NaN and infinities survive), on a SQLite and a PostgreSQL store.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from tensorboardX import SummaryWriter

import tbconvert
from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.output import export
from tests.support.snapshots import StoreFactory, query_rows
from tests.support.sweep import STEPS, SWEEP, build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("export"), make_store)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


# --------------------------------------------------------------------------- runs


def test_runs_text_lists_runs_with_counts_and_params(store_path: str) -> None:
    result = invoke("runs", "--store", str(store_path))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    # Two logdirs (sample_logdirs and the sweep) were converted: each run names its source.
    header = ["id", "run", "source", "group", "contexts", "series", "points", "params"]
    assert lines[0].split() == header
    by_run = {line.split()[1]: line.split() for line in lines[1:]}
    ids = dict(query_rows(store_path, "SELECT run_path, run_id FROM v_runs"))
    assert {run: int(cells[0]) for run, cells in by_run.items()} == ids
    line = " ".join(by_run["sweep/lr_0.1"])
    assert "lr=0.1" in line and "optimizer=adam" in line and "images 2" in line
    assert by_run["sweep/lr_0.1"][2].endswith("logs")
    assert by_run["run_1"][2].endswith("sample_logdirs")
    assert "scalars 735" in " ".join(by_run["run_1"])


def test_runs_json_and_run_filter(store_path: str) -> None:
    result = invoke("runs", "--store", str(store_path), "--json", "--run", "sweep/*")
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [run["run_path"] for run in runs] == [f"sweep/{run}" for run in sorted(SWEEP)]
    assert all(run["group_path"] == "sweep" and len(run["contexts"]) == 2 for run in runs)
    assert [next(iter(run["params"].values()))["lr"] for run in runs] == [0.01, 0.1, 1.0]


def test_runs_of_an_empty_store(tmp_path: Path, make_store: StoreFactory) -> None:
    store = make_store(tmp_path, "empty")
    assert invoke("db", "upgrade", "--store", store).exit_code == 0
    result = invoke("runs", "--store", store)
    assert result.exit_code == 0 and result.stdout.strip() == "no runs in this store"
    assert json.loads(invoke("runs", "--store", store, "--json").stdout) == []


# --------------------------------------------------------------------------- show


def test_show_text_has_series_per_plugin_params_and_files(store_path: str) -> None:
    result = invoke("show", "sweep/lr_1.0", "--store", str(store_path))
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    for heading in (
        "scalars (3 series)",
        "images (1 series)",
        "text (1 series)",
        "params (1 session)",
        "files (2)",
    ):
        assert heading in text
    loss = next(line for line in text.splitlines() if " loss " in line)
    assert loss.split()[-4:-1] == [str(STEPS), "0..9", "NaN"]  # then its sparkline
    assert "Diverged at step 6" in text and "lr=1" in text
    assert text.count(" ok") == 2


def test_show_json_equals_the_api(store_path: str) -> None:
    result = invoke("show", "group_1/run_2", "--store", str(store_path), "--json")
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    with tbconvert.open_store(store_path) as opened:
        assert shown == json.loads(export.dumps(opened.describe("group_1/run_2")))
    assert {s["context"] for s in shown["series"]} == {"", "train", "validate"}
    assert len(shown["files"]) == 6


def test_show_by_id(store_path: str) -> None:
    ((run_id,),) = query_rows(store_path, "SELECT run_id FROM v_runs WHERE run_path = 'run_1'")
    result = invoke("show", str(run_id), "--store", str(store_path), "--json")
    assert json.loads(result.stdout)["run"]["run_path"] == "run_1"


def test_show_unknown_run_is_a_usage_error_with_a_suggestion(store_path: str) -> None:
    result = invoke("show", "group_1/run_4", "--store", str(store_path))
    assert result.exit_code == 2
    assert "no run 'group_1/run_4'" in result.stderr and "group_1/run_2" in result.stderr
    assert result.stdout == ""


# SQLite-only: "no store here" is a missing file, and the directory must stay empty.
def test_read_commands_without_a_store_exit_1(tmp_path: Path) -> None:
    for command in (["runs"], ["show", "x"], ["export", "scalars"], ["datasette-metadata"]):
        result = invoke(*command, "--store", str(tmp_path / "none.db"))
        assert result.exit_code == 1, command
        assert "no store here" in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- export


def test_export_scalars_csv_on_stdout_equals_the_view(store_path: str) -> None:
    result = invoke(
        "export", "scalars", "--store", str(store_path), "--run", "run_1", "--resumed", "all"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    rows = csv_rows(result.stdout)
    assert list(rows[0]) == list(export.COLUMNS["scalars"])
    expected = query_rows(
        store_path,
        "SELECT run_id, run_path, context, tag, step, wall_time, "
        "value FROM v_scalars WHERE run_path = 'run_1'",
    )
    got = [
        (
            int(r["run_id"]),
            r["run_path"],
            r["context"],
            r["tag"],
            int(r["step"]),
            float(r["wall_time"]),
            float(r["value"]),
        )
        for r in rows
    ]
    assert sorted(got) == sorted(expected)  # floats round-trip exactly through CSV text
    order = [(r["context"], r["tag"], int(r["step"])) for r in rows]
    assert order == sorted(order)


def test_export_globs_on_run_tag_and_context(store_path: str) -> None:
    result = invoke(
        "export",
        "scalars",
        "--store",
        str(store_path),
        "--run",
        "group_1/*",
        "--tag",
        "epoch_*",
        "--tag",
        "learning_rate",
        "--context",
        "train",
    )
    rows = csv_rows(result.stdout)
    assert {(r["run_path"], r["context"], r["tag"]) for r in rows} == {
        ("group_1/run_2", "train", "epoch_accuracy"),
        ("group_1/run_2", "train", "epoch_loss"),
        ("group_1/run_2", "train", "epoch_learning_rate"),
    }
    assert len(rows) == 75


def test_export_nan_is_nan_in_csv_and_a_json_null(store_path: str) -> None:
    as_csv = csv_rows(
        invoke(
            "export",
            "scalars",
            "--store",
            str(store_path),
            "--run",
            "sweep/lr_1.0",
            "--tag",
            "loss",
        ).stdout
    )
    assert [r["value"] == "NaN" for r in as_csv] == [step >= 6 for step in range(STEPS)]
    lines = invoke(
        "export",
        "scalars",
        "--store",
        str(store_path),
        "--run",
        "sweep/lr_1.0",
        "--tag",
        "loss",
        "--format",
        "jsonl",
    ).stdout.splitlines()
    values = [json.loads(line)["value"] for line in lines]
    assert values[6:] == [None] * 4 and all(v is not None for v in values[:6])


def test_export_infinities(tmp_path: Path, make_store: StoreFactory) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(str(logdir / "run"), flush_secs=3600) as writer:
        for step, value in enumerate([1.0, math.inf, -math.inf, math.nan]):
            writer.add_scalar("x", value, step)
    store = make_store(tmp_path, "s")
    convert(logdir, store, progress=False)
    lines = invoke("export", "scalars", "--store", store, "--format", "jsonl").stdout
    values = [json.loads(line, parse_constant=_reject)["value"] for line in lines.splitlines()]
    assert values[:3] == [1.0, math.inf, -math.inf] and values[3] is None
    cells = [r["value"] for r in csv_rows(invoke("export", "scalars", "--store", store).stdout)]
    assert cells == ["1.0", "inf", "-inf", "NaN"]


def _reject(constant: str) -> Any:
    raise AssertionError(f"not strict JSON: {constant}")


def test_export_to_a_file_infers_jsonl(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "params.jsonl"
    result = invoke("export", "params", "--store", str(store_path), "-o", str(target))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "" and f"9 rows written to {target}" in result.stderr
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert list(rows[0]) == list(export.COLUMNS["params"])
    lr = sorted(row["value_num"] for row in rows if row["key"] == "lr")
    assert lr == sorted(lr_ for lr_, *_ in SWEEP.values())
    assert [p.name for p in tmp_path.iterdir()] == ["params.jsonl"]


def test_export_params_tag_filters_keys(store_path: str) -> None:
    rows = csv_rows(invoke("export", "params", "--store", str(store_path), "--tag", "opt*").stdout)
    assert sorted(r["value"] for r in rows) == ["adam", "adam", "sgd"]
    assert {r["value_type"] for r in rows} == {"string"}


def test_export_texts_match_without_the_text_summary_suffix(store_path: str) -> None:
    rows = csv_rows(invoke("export", "texts", "--store", str(store_path), "--tag", "notes").stdout)
    assert [(r["run_path"], r["tag"], r["value"]) for r in rows] == [
        ("sweep/lr_0.01", "notes/text_summary", "converged fine"),
        ("sweep/lr_0.1", "notes/text_summary", "converged fine"),
        ("sweep/lr_1.0", "notes/text_summary", "Diverged at step 6"),
    ]


def test_export_nothing_matches_gives_the_header_only(store_path: str) -> None:
    result = invoke("export", "scalars", "--store", str(store_path), "--tag", "nothing")
    assert result.exit_code == 0 and result.stdout == ",".join(export.COLUMNS["scalars"]) + "\n"


def test_export_usage_errors_exit_2(store_path: str) -> None:
    assert invoke("export", "histograms", "--store", str(store_path)).exit_code == 2
    assert invoke("export", "scalars", "--format", "xml", "--store", str(store_path)).exit_code == 2


def test_export_into_a_missing_directory_exit_1(store_path: str, tmp_path: Path) -> None:
    result = invoke(
        "export", "scalars", "--store", str(store_path), "-o", str(tmp_path / "no" / "out.csv")
    )
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "out.csv" in result.stderr


def test_failed_export_leaves_no_file(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"

    def broken() -> Any:
        yield (1, "run", "", "x", 0, 0.0, 1.0)
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError), export.open_output(str(target)) as out:
        export.write_rows(export.COLUMNS["scalars"], broken(), out)
    assert list(tmp_path.iterdir()) == []


def test_export_to_a_closed_pipe_is_quiet(store_path: str) -> None:
    command = [sys.executable, "-m", "tbconvert", "export", "scalars", "--store", str(store_path)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"}
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        header = process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read()
        assert process.wait() == 0
    assert header.startswith(b"run_id,run_path") and stderr == b""


# --------------------------------------------------------------------------- library


def test_dumps_is_strict_json() -> None:
    document = {"a": [1.5, math.nan, math.inf, -math.inf], "b": "Infinity", "c": None}
    text = export.dumps(document)
    assert json.loads(text, parse_constant=_reject) == {
        "a": [1.5, None, math.inf, -math.inf],
        "b": "Infinity",
        "c": None,
    }
    assert export.dumps({"x": 1}) == '{"x": 1}'


def test_format_for() -> None:
    assert export.format_for("-", None) == "csv"
    assert export.format_for("a.JSONL", None) == "jsonl"
    assert export.format_for("a.ndjson", None) == "jsonl"
    assert export.format_for("a.jsonl", "csv") == "csv"


def test_export_function_returns_the_row_count(store_path: str, tmp_path: Path) -> None:
    with tbconvert.open_store(store_path) as opened:
        count = export.export(
            opened, "scalars", str(tmp_path / "loss.csv"), tag="loss", resumed="all"
        )
    (expected,) = query_rows(store_path, "SELECT count(*) FROM v_scalars WHERE tag = 'loss'")[0]
    assert count == expected
    assert len((tmp_path / "loss.csv").read_text().splitlines()) == expected + 1


# --------------------------------------------------------------------------- datasette


# SQLite-only: datasette serves SQLite files (the command refuses a server store).
@pytest.mark.parametrize("make_store", ["sqlite"], indirect=True)
def test_datasette_metadata_command(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "metadata.json"
    result = invoke("datasette-metadata", "--store", str(store_path), "-o", str(target))
    assert result.exit_code == 0, result.stderr
    document = json.loads(target.read_text())
    database = document["databases"][Path(store_path).stem]
    assert {"learning_curve", "search_texts"} <= set(database["queries"])
    assert database["tables"]["runs"]["label_column"] == "run_path"
    stdout = invoke("datasette-metadata", "--store", str(store_path)).stdout
    assert json.loads(stdout) == document


# The other half of the SQLite-only test above: a server store is refused, and nothing written.
@pytest.mark.parametrize("make_store", ["postgresql"], indirect=True)
def test_datasette_metadata_refuses_a_server_store(store_path: str, tmp_path: Path) -> None:
    result = invoke(
        "datasette-metadata", "--store", store_path, "-o", str(tmp_path / "metadata.json")
    )
    assert result.exit_code == 2
    assert "datasette serves SQLite files only" in result.stderr and result.stdout == ""
    assert list(tmp_path.iterdir()) == []
