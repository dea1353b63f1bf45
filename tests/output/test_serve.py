"""``tbconvert serve``: datasette over HTTP with our metadata, in a real subprocess.

The server is started on a free port, asked for its home page, a view and a canned query
(the SQL cookbook with forms), and stopped with SIGINT, as Ctrl-C would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert.cli import cli
from tests.support.snapshots import StoreFactory
from tests.support.sweep import build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_store(tmp_path_factory.mktemp("serve"), StoreFactory("sqlite", None))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200, url
        return str(response.read().decode("utf-8"))


def wait_for(url: str, process: subprocess.Popen[str], seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return get(url)
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_serve_over_http(store_path: str) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "tbconvert",
        "serve",
        "--store",
        store_path,
        "--port",
        str(port),
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/datasette"  # the viewer is at /
    try:
        home = wait_for(f"{base}/", process)
        assert "TensorBoard runs" in home  # the metadata's title
        runs = json.loads(get(f"{base}/runs/v_runs.json?_shape=objects"))
        assert "sweep/lr_0.1" in {row["run_path"] for row in runs["rows"]}
        page = get(f"{base}/runs/v_runs")
        assert "One row per run" in page  # the view's description
        canned = json.loads(
            get(f"{base}/runs/learning_curve.json?_shape=objects&run_path=run_1&context=&tag=loss")
        )
        assert len(canned["rows"]) == 350
        # No facet suggestions (a GROUP BY per column of a point view, per page): they time
        # out on a big store, and datasette 0.65 then answers 400 instead of the page.
        settings = json.loads(get(f"{base}/-/settings.json"))
        assert settings["suggest_facets"] is False  # datasette's default is True
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert stdout == ""  # data only on stdout, and serving prints none
    assert f"{base}/runs" in stderr and stderr.count("\n") <= 3


def test_serve_refuses_a_missing_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 1 and "tbconvert tf" in result.stderr


def test_serve_without_datasette_names_the_extra(store_path: str, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "datasette.app", None)
    result = CliRunner().invoke(cli, ["serve", "--store", store_path, "--port", str(free_port())])
    assert result.exit_code == 1
    assert "pip install '.[serve]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
