"""A real MLflow tracking server for the push tests, and logdirs to push.

The server (``mlflow_server``) is started once per session on 127.0.0.1 with a SQLite backend
and a local artifact root, waited for until ``/health`` answers, and killed with its process
group.  ``write_logdir`` writes real event files with tensorboardX and with tensorboard's own
protos (a tag tensorboardX would rewrite); ``golden_store`` converts the demo logdir or the
committed ``sample_logdirs/``.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboardX import SummaryWriter

from tbconvert import convert
from tests.support.eventfiles import simple_value, summary_event, write_events

CHECKOUT = Path(__file__).resolve().parents[2]
GOLDEN = ("demo", "samples")

W0 = 1_795_400_000.0
# The tag tensorboardX would rewrite: written with tensorboard's protos instead.
ODD_TAG = "loss (%) ü"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of an MLflow tracking server that lives for the session."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (root / "server.log").open("wb")
    # No background job runner: it starts a consumer process per core.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{root / 'backend.db'}"),
            *("--artifacts-destination", str(root / "artifacts")),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("mlflow server did not answer within 120 s")
                time.sleep(0.3)
        yield url
    finally:
        # Killed, not asked to stop: its store is thrown away, and a graceful shutdown of
        # uvicorn takes seconds.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    """A store of :func:`write_logdir`'s logdir (two runs and the protos run)."""
    write_logdir(tmp_path / "logs")
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    return store


def write_logdir(logdir: Path, runs: int = 2, steps: int = 12) -> None:
    """``runs`` tensorboardX runs with every plugin MLflow takes: scalars (NaN and
    infinities, a resumed step, contexts through add_scalars), hparams, images, audio, text
    and histograms; and a run of tensorboard protos with a tag tensorboardX would rewrite."""
    for index in range(runs):
        with SummaryWriter(str(logdir / f"run_{index}"), flush_secs=3600) as writer:
            for step in range(steps):
                wall = W0 + 10 * index + step
                loss = [math.nan, math.inf, -math.inf][step % 3] if step in (4, 5, 6) else 0.5
                writer.add_scalar("loss", loss / (step + 1), step, walltime=wall)
                writer.add_scalars(
                    "acc", {"train": step / steps, "val": index + step / 10}, step, walltime=wall
                )
            writer.add_scalar("loss", 9.0, 3, walltime=W0 + 99)  # a resumed run logs step 3 again
            writer.add_image("sample", np.full((3, 4, 4), 40 * index, np.uint8), 0, walltime=W0)
            writer.add_text("note", f"run {index}", 2, walltime=W0)
            writer.add_histogram("w", np.arange(20.0) + index, 5, walltime=W0)
            writer.add_hparams({"lr": 0.1 * (index + 1), "opt": "sgd"}, {"hp/acc": 0.5})
    # tensorboardX's add_audio needs soundfile: a WAV clip in a Summary.Audio by hand.
    clip = Summary.Audio(encoded_audio_string=wav(), sample_rate=8000.0, content_type="audio/wav")
    write_events(
        logdir / "protos" / "events.out.tfevents.1.host",
        [summary_event(step, W0 + step, [simple_value(ODD_TAG, step * 1.5)]) for step in range(5)]
        + [summary_event(1, W0 + 1, [Summary.Value(tag="clip", audio=clip)])],
    )


def wav() -> bytes:
    """A short mono 16-bit WAV."""
    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(np.arange(-400, 400, 10, dtype="<i2").tobytes())
    return out.getvalue()


def golden_store(kind: str, folder: Path) -> Path:
    """A store under ``folder`` of the demo logdir (``kind`` ``"demo"``, written by
    ``sample_logdirs/make_demo.py``) or of ``sample_logdirs/`` without its scripts
    (``"samples"``)."""
    logdir = folder / kind
    if kind == "demo":
        script = CHECKOUT / "sample_logdirs" / "make_demo.py"
        subprocess.run([sys.executable, str(script), str(logdir)], check=True, timeout=120)
    else:
        sources = shutil.ignore_patterns("*.py", "*.md")
        shutil.copytree(CHECKOUT / "sample_logdirs", logdir, ignore=sources)
    store = folder / f"{kind}.db"
    assert convert(logdir, store, progress=False).exit_code in (0, 3)
    return store
