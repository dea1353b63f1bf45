"""``tbconvert push aim`` into a fresh Aim repo, read back through Aim's own SDK (``aim.Repo``,
``Run.metrics()``): every metric equals ``v_scalars_current`` (step, value, wall time; NaN
kept), params equal ``v_params`` (typed), each run says where it came from, and a second push
sends nothing (#48).

Aim keeps one point per step, so the expected histories are the store's current points
(a resumed series' last attempt); where a step is written twice in one attempt, the expected
point is the one the test wrote last.
"""

from __future__ import annotations

import gc
import json
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tbconvert import convert
from tbconvert.cli import cli
from tests.push.conftest import GOLDEN, ODD_TAG, W0, free_port, golden_store
from tests.support.eventfiles import append_events, simple_value, summary_event

aim = pytest.importorskip("aim")

from aim.storage.context import Context  # noqa: E402  (after the skip)

from tbconvert.push.aim import push_aim  # noqa: E402  (after the skip: it needs aim)

ROOT = Context({})  # the run directory's own context
History = dict[tuple[str, str, str], list[tuple[int, Any, Any]]]


def comparable(step: int, value: float | None, wall: float | None) -> tuple[int, Any, Any]:
    def nan_kept(number: float | None) -> Any:
        return "nan" if number is None or math.isnan(number) else float(number)

    return int(step), nan_kept(value), nan_kept(wall)


def store_histories(store: Path) -> History:
    """``v_scalars_current`` by (run, context, tag), in step order."""
    found: History = {}
    with closing(sqlite3.connect(store)) as conn:
        for run_path, context, tag, step, wall, value in conn.execute(
            "SELECT run_path, context, tag, step, wall_time, value FROM v_scalars_current"
        ):
            found.setdefault((run_path, context, tag), []).append(comparable(step, value, wall))
    return {key: sorted(points) for key, points in found.items()}


def aim_runs(repo: Path) -> dict[str, Any]:
    """Aim's runs by the run path their ``tbconvert`` param names (each once)."""
    runs: dict[str, Any] = {}
    for run in aim.Repo(str(repo)).iter_runs():
        path = run["tbconvert"]["run_path"]
        assert path not in runs, f"two Aim runs of {path}"
        runs[path] = run
    return runs


def aim_histories(repo: Path) -> History:
    """Every metric of every Aim run, as Aim's SDK reads it."""
    found: History = {}
    for path, run in aim_runs(repo).items():
        for metric in run.metrics():
            context = metric.context.to_dict()
            assert set(context) <= {"subset"}
            steps, (values, _, times) = metric.data.numpy()
            key = (path, context.get("subset", ""), metric.name)
            found[key] = sorted(map(comparable, steps, values, times))
    return found


def typed(value: str | None, number: float | None, kind: str) -> Any:
    """A ``v_params`` row as its Python value, by the column's documented types."""
    if kind == "integer":
        return int(number)  # type: ignore[arg-type]
    if kind == "number":
        return number
    if kind == "bool":
        return value == "true"
    if kind == "json":
        return json.loads(value or "null")
    return value


def store_params(store: Path) -> dict[str, dict[str, dict[str, Any]]]:
    found: dict[str, dict[str, dict[str, Any]]] = {}
    with closing(sqlite3.connect(store)) as conn:
        rows = conn.execute(
            "SELECT run_path, context, key, value, value_num, value_type FROM v_params"
        ).fetchall()
    for run_path, context, key, value, number, kind in rows:
        found.setdefault(run_path, {}).setdefault(context, {})[key] = typed(value, number, kind)
    return found


def test_every_metric_reads_back_as_v_scalars_current_and_a_second_push_sends_nothing(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    summary = push_aim(converted, str(repo))
    expected = store_histories(converted)
    assert summary.metrics == sum(len(points) for points in expected.values())
    # run_0 and run_1 each log "loss" 0..11, then step 3 again: the 9 points of the first
    # attempt from step 3 on are left out.
    assert [run.not_sent for run in summary.runs] == [0, 9, 9]
    assert aim_histories(repo) == expected
    assert ("protos", "", ODD_TAG) in expected
    assert {context for _, context, _ in expected} > {""}  # add_scalars' contexts too
    again = push_aim(converted, str(repo))
    assert (again.metrics, sum(run.artifacts for run in again.runs)) == (0, 0)
    assert sum(run.params for run in again.runs) == 0
    assert aim_histories(repo) == expected


def test_params_are_typed_and_each_run_says_where_it_came_from(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    push_aim(converted, str(repo))
    runs = aim_runs(repo)
    params = store_params(converted)
    with closing(sqlite3.connect(converted)) as conn:
        stored = conn.execute("SELECT run_id, run_path, logdir, group_path FROM v_runs").fetchall()
    assert sorted(runs) == sorted(path for _, path, _, _ in stored)
    for run_id, run_path, logdir, group in stored:
        origin = runs[run_path]["tbconvert"]
        assert (origin["run_id"], origin["run_path"]) == (run_id, run_path)
        assert origin["source"] == origin["logdir"] == logdir
        assert origin["group"] == group
        assert runs[run_path].name == run_path
        sessions = params.get(run_path, {})
        assert len(sessions) <= 1  # tensorboardX: one hparams session per run
        if sessions:
            assert runs[run_path]["hparams"] == next(iter(sessions.values()))
    assert runs["run_1"]["hparams"] == {"lr": 0.2, "opt": "sgd"}
    assert isinstance(runs["run_1"]["hparams"]["lr"], float)


def test_images_texts_histograms_and_audio_become_aims_objects(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    push_aim(converted, str(repo))
    run = aim_runs(repo)["run_1"]
    [image] = run.get_image_sequence("sample", ROOT).values.values_list()
    pixels = np.asarray(image.to_pil_image())
    assert pixels.shape[:2] == (4, 4) and int(pixels.max()) == 40  # the 40 * 1 tensorboardX wrote
    text_steps, (texts, *_) = run.get_text_sequence("note/text_summary", ROOT).data.numpy()
    assert list(text_steps) == [2] and texts[0].data == "run 1"
    [histogram] = run.get_distribution_sequence("w", ROOT).values.values_list()
    assert sum(histogram.weights) == 20  # the 20 samples of np.arange(20.0) + 1
    [clip] = aim_runs(repo)["protos"].get_audio_sequence("clip", ROOT).values.values_list()
    assert clip.get().read()[:4] == b"RIFF"


def test_a_push_after_a_conversion_sends_only_the_new_points(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    push_aim(converted, str(repo))
    event_file = next((tmp_path / "logs" / "protos").glob("events.*"))
    append_events(
        event_file,
        [summary_event(step, W0 + 50 + step, [simple_value(ODD_TAG, -step)]) for step in (5, 6)],
    )
    assert convert(tmp_path / "logs", converted, progress=False).exit_code == 0
    summary = push_aim(converted, str(repo))
    assert summary.metrics == 2
    assert aim_histories(repo) == store_histories(converted)


def test_a_series_that_goes_back_loses_its_later_steps_in_aim(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    push_aim(converted, str(repo))
    event_file = next((tmp_path / "logs" / "protos").glob("events.*"))
    # A resumed writer goes back to step 2: steps 2..4 of the first attempt are gone.
    append_events(event_file, [summary_event(2, W0 + 80, [simple_value(ODD_TAG, 7.0)])])
    assert convert(tmp_path / "logs", converted, progress=False).exit_code == 0
    summary = push_aim(converted, str(repo))
    assert (summary.metrics, summary.removed) == (1, 2)
    expected = store_histories(converted)
    assert expected[("protos", "", ODD_TAG)] == [(0, 0.0, W0), (1, 1.5, W0 + 1), (2, 7.0, W0 + 80)]
    assert aim_histories(repo) == expected


def test_a_step_written_twice_in_one_attempt_goes_as_its_last_point(tmp_path: Path) -> None:
    from tests.support.eventfiles import write_events

    write_events(
        tmp_path / "logs" / "twice" / "events.out.tfevents.1.host",
        [
            summary_event(step, W0 + index, [simple_value("loss", value)])
            for index, (step, value) in enumerate([(0, 1.0), (1, 2.0), (1, 3.0), (2, math.nan)])
        ],
    )
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    summary = push_aim(store, str(tmp_path / "aim"))
    assert (summary.metrics, summary.runs[0].not_sent) == (3, 1)
    assert aim_histories(tmp_path / "aim") == {
        ("twice", "", "loss"): [(0, 1.0, W0), (1, 3.0, W0 + 2), (2, "nan", W0 + 3)]
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", GOLDEN)
def test_the_demo_and_sample_logdirs_read_back_as_v_scalars_current_and_v_params(
    kind: str, tmp_path: Path
) -> None:
    store = golden_store(kind, tmp_path)
    push_aim(store, str(tmp_path / "aim"))
    expected = store_histories(store)
    assert expected and aim_histories(tmp_path / "aim") == expected
    runs, params = aim_runs(tmp_path / "aim"), store_params(store)
    assert sorted(runs) == sorted(expected_runs(store))
    for run_path, sessions in params.items():
        assert len(sessions) == 1  # one hparams session per run
        assert runs[run_path]["hparams"] == next(iter(sessions.values())), run_path
    assert bool(params) == (kind == "demo")  # the samples log no hparams
    assert push_aim(store, str(tmp_path / "aim")).metrics == 0


def expected_runs(store: Path) -> list[str]:
    with closing(sqlite3.connect(store)) as conn:
        return [path for (path,) in conn.execute("SELECT run_path FROM v_runs")]


def test_the_command_prints_a_summary_and_json(converted: Path, tmp_path: Path) -> None:
    repo = tmp_path / "aim"
    args = ["push", "aim", "--store", str(converted), "--repo", str(repo)]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["metrics"] == sum(len(p) for p in store_histories(converted).values())
    assert data["repo"] == str(repo)
    assert "into the Aim repo" in result.stderr and "not sent" in result.stderr
    result = CliRunner().invoke(cli, [*args, "--run", "run_0", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["metrics"] == 0
    assert [run["run_path"] for run in json.loads(result.stdout)["runs"]] == ["run_0"]


def test_a_dry_run_counts_what_a_push_sends_and_opens_no_repo(
    converted: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "aim"
    planned = push_aim(converted, str(repo), dry_run=True)
    assert not repo.exists()
    assert planned.metrics == sum(len(p) for p in store_histories(converted).values())
    result = CliRunner().invoke(
        cli, ["push", "aim", "--store", str(converted), "--repo", str(repo), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "would push" in result.stderr and not repo.exists()
    assert push_aim(converted, str(repo)).metrics == planned.metrics
    assert push_aim(converted, str(repo), dry_run=True).metrics == 0


AIM_CLI = "import sys; from aim.cli.cli import cli_entry_point; sys.exit(cli_entry_point())"


@pytest.fixture
def aim_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An Aim server on 127.0.0.1 over a fresh repo: its address and its directory."""
    repo = tmp_path / "served"
    aim.Repo.from_path(str(repo), init=True)
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    command = [sys.executable, "-c", AIM_CLI, "server", "--repo", str(repo)]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "aim server did not listen within 120 s"
                time.sleep(0.3)
        yield f"aim://127.0.0.1:{port}", repo
    finally:
        # Aim's remote objects release their server-side resources when collected.
        gc.collect()
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.mark.slow
def test_an_aim_server_gets_the_same_runs_and_finds_them_again(
    converted: Path, aim_server: tuple[str, Path]
) -> None:
    address, served = aim_server
    summary = push_aim(converted, address)
    expected = store_histories(converted)
    assert summary.metrics == sum(len(points) for points in expected.values())
    with closing(sqlite3.connect(converted)) as conn:
        # Forget the runs pushed: the push must find them again by their tbconvert param.
        conn.execute("DELETE FROM push_runs")
        conn.commit()
    again = push_aim(converted, address)
    assert (again.metrics, [run.created for run in again.runs]) == (0, [False] * 3)
    # Read the server's own directory through Aim's SDK, once indexed as `aim up` would.
    from aim.sdk.index_manager import RepoIndexManager

    opened = aim.Repo.from_path(str(served))
    for run_hash in opened.list_all_runs():
        RepoIndexManager.get_index_manager(opened).index(run_hash)
    assert aim_histories(served) == expected


@given(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_points_are_encoded_as_aims_own_encoder_encodes_them(value: float, step: int) -> None:
    from aim.storage import encoding

    from tbconvert.push import aim_metrics

    assert aim_metrics._FLOAT + aim_metrics._PACK_FLOAT(value) == encoding.encode(value)
    assert aim_metrics._INT + aim_metrics._PACK_INT(step) == encoding.encode(step)
