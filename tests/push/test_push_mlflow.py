"""``tbconvert push mlflow`` against a real MLflow, read back with MLflow's own client: every
metric history equals ``v_scalars`` point for point, params equal ``v_params``, tags say
where each run came from, and a second push sends nothing (#39).

The expected values come from the store's views and MLflow's documented behaviour: a
timestamp is the wall time in milliseconds, to the nearest; MLflow's SQL stores keep an
infinity as the largest double, its file store as it is.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from mlflow import MlflowClient
from tensorboardX import SummaryWriter

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.push.mlflow import push_mlflow
from tests.push.conftest import ODD_TAG, W0, write_logdir
from tests.support.eventfiles import (
    append_events,
    simple_value,
    summary_event,
    write_tbx_scalars,
)
from tests.support.snapshots import connect

# The key of ODD_TAG by the documented rule, written out by hand.
ODD_KEY = "loss 20  28  25  29  20  fc "
TARGETS = ("server", "sqlite", "file")


def tracking_uri(
    target: str, mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    if target == "server":
        return mlflow_server
    if target == "sqlite":
        monkeypatch.chdir(tmp_path)  # its artifacts go to ./mlruns
        return f"sqlite:///{tmp_path / 'mlflow.db'}"
    # MLflow 3 takes its file store (in maintenance) only when asked to.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def expected_value(value: float | None, target: str) -> float:
    if value is None:
        return math.nan
    if math.isinf(value) and target != "file":
        return math.copysign(sys.float_info.max, value)
    return value


def comparable(points: list[tuple[int, int, float]]) -> list[tuple[int, int, Any]]:
    return sorted((step, ms, "nan" if math.isnan(v) else v) for step, ms, v in points)


def expected_key(context: str, tag: str) -> str:
    # Plain names here: the rule keeps them, joined by " / " in a context.
    key = ODD_KEY if tag == ODD_TAG else tag
    return key if context == "" else f"{context} / {key}"


def store_histories(store: Path | str, target: str) -> dict[tuple[str, str], list[Any]]:
    found: dict[tuple[str, str], list[tuple[int, int, float]]] = {}
    with closing(connect(store)) as conn:
        for run_path, context, tag, step, wall, value in conn.execute(
            "SELECT run_path, context, tag, step, wall_time, value FROM v_scalars"
        ):
            ms = 0 if wall is None else round(wall * 1000)
            key = (run_path, expected_key(context, tag))
            found.setdefault(key, []).append((step, ms, expected_value(value, target)))
    return {key: comparable(points) for key, points in found.items()}


def mlflow_runs(uri: str, experiment: str = "tbconvert") -> dict[str, Any]:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    return {r.info.run_name: r for r in client.search_runs([found.experiment_id])}


def mlflow_histories(uri: str, experiment: str = "tbconvert") -> dict[tuple[str, str], list[Any]]:
    client = MlflowClient(uri)
    histories = {}
    for name, run in mlflow_runs(uri, experiment).items():
        for key in run.data.metrics:
            points = client.get_metric_history(run.info.run_id, key)
            histories[(name, key)] = comparable([(m.step, m.timestamp, m.value) for m in points])
    return histories


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_every_history_equals_v_scalars_and_a_second_push_sends_nothing(
    target: str,
    mlflow_server: str,
    converted: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = tracking_uri(target, mlflow_server, tmp_path, monkeypatch)
    experiment = f"every-{target}-{tmp_path.name}"
    summary = push_mlflow(converted, uri, experiment)
    expected = store_histories(converted, target)
    assert summary.metrics == sum(len(points) for points in expected.values())
    assert mlflow_histories(uri, experiment) == expected
    assert push_mlflow(converted, uri, experiment).metrics == 0
    assert mlflow_histories(uri, experiment) == expected


@pytest.mark.slow
def test_runs_are_named_and_tagged_by_where_they_came_from_with_their_params(
    mlflow_server: str, converted: Path, tmp_path: Path
) -> None:
    push_mlflow(converted, mlflow_server, "tagged")
    runs = mlflow_runs(mlflow_server, "tagged")
    with closing(sqlite3.connect(converted)) as conn:
        stored = conn.execute("SELECT run_id, run_path, logdir, group_path FROM v_runs").fetchall()
        params = conn.execute("SELECT run_path, key, value FROM v_params").fetchall()
    assert sorted(runs) == sorted(path for _, path, _, _ in stored)
    for run_id, run_path, logdir, group in stored:
        tags = runs[run_path].data.tags
        assert tags["tbconvert.run_id"] == str(run_id)
        assert tags["tbconvert.run_path"] == run_path
        assert tags["tbconvert.logdir"] == tags["tbconvert.source"] == logdir
        assert tags["tbconvert.group"] == group
        assert runs[run_path].info.status == "FINISHED"
    # One hparams session per run: the params are the keys as logged.
    assert {path: runs[path].data.params for path in runs} == {
        path: {key: value for p, key, value in params if p == path} for path in runs
    }
    assert runs["run_1"].data.params == {"lr": "0.2", "opt": "sgd"}


@pytest.mark.slow
def test_a_push_after_a_conversion_sends_only_the_new_points(
    mlflow_server: str, converted: Path, tmp_path: Path
) -> None:
    push_mlflow(converted, mlflow_server, "incremental")
    event_file = next((tmp_path / "logs" / "protos").glob("events.*"))
    append_events(
        event_file,
        [summary_event(step, W0 + step, [simple_value(ODD_TAG, -step)]) for step in (5, 6, 2)],
    )
    # A new file of an existing series too, and a run of its own.
    write_tbx_scalars(
        tmp_path / "logs" / "run_0",
        [("loss", step, W0 + 500 + step, 0.25) for step in range(4)],
        suffix=".more",
    )
    write_tbx_scalars(tmp_path / "logs" / "run_9", [("loss", 0, W0, 1.0)])
    assert convert(tmp_path / "logs", converted, progress=False).exit_code == 0
    summary = push_mlflow(converted, mlflow_server, "incremental")
    assert summary.metrics == 3 + 4 + 1
    assert [run.run_path for run in summary.runs if run.created] == ["run_9"]
    assert mlflow_histories(mlflow_server, "incremental") == store_histories(converted, "server")


def expected_artifacts(store: Path) -> dict[tuple[str, str], bytes]:
    """Every artifact file by the documented paths, from the store's tables."""
    owner = (
        "JOIN series AS s ON s.id = p.series_id JOIN runs AS r ON r.id = s.run_id "
        "JOIN contexts AS c ON c.id = s.context_id"
    )
    found: dict[tuple[str, str], bytes] = {}
    with closing(sqlite3.connect(store)) as conn:
        for table, kind in (("images", "format"), ("audio", "content_type")):
            for (
                run_path,
                context,
                tag,
                step,
                file_id,
                offset,
                index,
                idx,
                form,
                data,
            ) in conn.execute(
                f"SELECT r.run_path, c.name, s.name, p.step, p.file_id, p.record_offset, "
                f"p.value_index, p.idx, p.{kind}, b.data FROM {table} AS p {owner} "
                "JOIN blobs AS b ON b.id = p.blob_id"
            ):
                extension = {"audio/wav": "wav"}.get(form, form.lower())
                name = f"step={step},file={file_id},offset={offset},value={index},idx={idx}"
                path = f"{table}/{expected_key(context, tag)}/{name}.{extension}"
                found[(run_path, path)] = data
        lines: dict[tuple[str, str], list[str]] = {}
        for run_path, context, tag, step, wall, idx, value in conn.execute(
            "SELECT run_path, context, tag, step, wall_time, idx, value FROM v_texts "
            "ORDER BY run_path, context, tag, step, idx"
        ):
            line = {"step": step, "wall_time": wall, "idx": idx, "value": value}
            path = f"texts/{expected_key(context, tag)}/@points.jsonl"
            lines.setdefault((run_path, path), []).append(json.dumps(line))
        for run_path, context, tag, step, wall, count, low, high, buckets in conn.execute(
            "SELECT run_path, context, tag, step, wall_time, count, min, max, buckets "
            "FROM v_histograms ORDER BY run_path, context, tag, step"
        ):
            line = {"step": step, "wall_time": wall, "count": count, "min": low, "max": high}
            line["buckets"] = buckets
            path = f"histograms/{expected_key(context, tag)}/@points.jsonl"
            lines.setdefault((run_path, path), []).append(json.dumps(line))
    for key, found_lines in lines.items():
        found[key] = "".join(line + "\n" for line in found_lines).encode()
    return found


def mlflow_artifacts(uri: str, experiment: str, into: Path) -> dict[tuple[str, str], bytes]:
    client = MlflowClient(uri)
    found = {}
    for name, run in mlflow_runs(uri, experiment).items():
        local = Path(client.download_artifacts(run.info.run_id, "", str(into / name)))
        for path in local.rglob("*"):
            if path.is_file():
                found[(name, path.relative_to(local).as_posix())] = path.read_bytes()
    return found


@pytest.mark.slow
def test_images_audio_texts_and_histograms_come_back_byte_for_byte(
    mlflow_server: str, converted: Path, tmp_path: Path
) -> None:
    summary = push_mlflow(converted, mlflow_server, "artifacts")
    expected = expected_artifacts(converted)
    assert {(path.split("/")[0]) for _, path in expected} == {
        "images",
        "audio",
        "texts",
        "histograms",
    }
    assert sum(run.artifacts for run in summary.runs) == len(expected)
    assert mlflow_artifacts(mlflow_server, "artifacts", tmp_path / "back") == expected
    assert not any(run.artifacts for run in push_mlflow(converted, mlflow_server, "artifacts").runs)
    # A text and an image more: the text's series file is written again, the image added.
    with SummaryWriter(str(tmp_path / "logs" / "run_0"), filename_suffix=".more") as writer:
        writer.add_text("note", "later", 7, walltime=W0 + 7)
        writer.add_image("sample", np.zeros((3, 2, 2), np.uint8), 7, walltime=W0 + 7)
    assert convert(tmp_path / "logs", converted, progress=False).exit_code == 0
    again = push_mlflow(converted, mlflow_server, "artifacts")
    assert [(run.run_path, run.artifacts) for run in again.runs if run.artifacts] == [("run_0", 2)]
    expected = expected_artifacts(converted)
    assert mlflow_artifacts(mlflow_server, "artifacts", tmp_path / "again") == expected


def test_a_store_of_either_backend_is_pushed(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_logdir(tmp_path / "logs", runs=1, steps=5)
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.chdir(tmp_path)  # MLflow's sqlite: store puts its artifacts in ./mlruns
    first = push_mlflow(store, uri)
    assert mlflow_histories(uri) == store_histories(store, "sqlite")
    assert first.metrics > 0 and push_mlflow(store, uri).metrics == 0


def test_a_param_value_over_mlflows_limit_is_cut_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SummaryWriter(str(tmp_path / "logs" / "long")) as writer:
        writer.add_hparams({"note": "n" * 7000, "lr": 0.5}, {"hp/x": 1.0})
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    summary = push_mlflow(store, uri)
    (warning,) = summary.warnings
    assert "'note'" in warning and "7000" in warning and "6000" in warning
    assert mlflow_runs(uri)["long"].data.params == {"note": "n" * 6000, "lr": "0.5"}


def test_the_json_summary_is_alone_on_stdout(
    converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_cli("--store", str(converted), "--tracking-uri", uri, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["metrics"] == sum(len(p) for p in store_histories(converted, "sqlite").values())
    assert sorted(run["run_path"] for run in document["runs"]) == ["protos", "run_0", "run_1"]
    assert "pushed 3 runs (3 new)" in result.stderr


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, ["push", "mlflow", *args])


def one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for word in words:
        assert word in lines[0]


def test_an_unreachable_server_is_one_line(converted: Path) -> None:
    from tests.push.conftest import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    result = run_cli("--store", str(converted), "--tracking-uri", uri)
    one_line_error(result, "cannot reach", uri)


@pytest.mark.slow
def test_a_deleted_experiment_is_one_line(mlflow_server: str, converted: Path) -> None:
    client = MlflowClient(mlflow_server)
    client.delete_experiment(client.create_experiment("gone"))
    result = run_cli(
        "--store", str(converted), "--tracking-uri", mlflow_server, "--experiment", "gone"
    )
    one_line_error(result, "'gone'", "deleted", "restore")


@pytest.mark.slow
def test_a_run_deleted_in_mlflow_between_pushes_is_one_line_and_nothing_is_sent_twice(
    mlflow_server: str, converted: Path
) -> None:
    push_mlflow(converted, mlflow_server, "deleted-run")
    before = mlflow_histories(mlflow_server, "deleted-run")
    MlflowClient(mlflow_server).delete_run(
        mlflow_runs(mlflow_server, "deleted-run")["run_0"].info.run_id
    )
    args = (
        "--store",
        str(converted),
        "--tracking-uri",
        mlflow_server,
        "--experiment",
        "deleted-run",
    )
    one_line_error(run_cli(*args), "run_0", "deleted", "mlflow runs restore")
    MlflowClient(mlflow_server).restore_run(_deleted(mlflow_server))
    assert run_cli(*args).exit_code == 0
    assert mlflow_histories(mlflow_server, "deleted-run") == before


def _deleted(uri: str) -> str:
    from mlflow.entities import ViewType

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("deleted-run")
    assert experiment is not None
    found = client.search_runs(
        [experiment.experiment_id], "attributes.run_name = 'run_0'", ViewType.DELETED_ONLY
    )
    return str(found[0].info.run_id)


def test_without_mlflow_the_error_names_the_extra(
    converted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    result = run_cli("--store", str(converted), "--tracking-uri", "sqlite:///x.db")
    one_line_error(result, "mlflow", "'.[mlflow]'")


@pytest.mark.parametrize("command", [("push",), ("push", "mlflow")])
def test_help(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "Example:" in result.output


def test_a_missing_store_is_one_line_and_creates_nothing_in_mlflow(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_cli("--store", str(tmp_path / "none.db"), "--tracking-uri", uri)
    one_line_error(result, "no store here")
    assert not (tmp_path / "mlflow.db").exists()
