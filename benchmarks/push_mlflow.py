"""A logdir into MLflow (#39): the common recipe against ``tbconvert tf`` + ``push mlflow``.

    .venv/bin/python benchmarks/push_mlflow.py                 # 200k scalar events, 4 runs
    .venv/bin/python benchmarks/push_mlflow.py --events 40000  # a quick look

Both contenders send every scalar point of the same generated logdir (``generate.py``: TF1
and TF2 runs, the TF2 ones with train/ and validation/ contexts, a few images) into a fresh
local MLflow tracking server backed by SQLite (``mlflow server --backend-store-uri
sqlite:///...``, its default 4 workers), one server per contender, started the same way:

* the recipe people share: TensorBoard's ``EventAccumulator`` with every size_guidance 0
  (nothing sampled away) per event directory, then ``MlflowClient.log_batch`` per run in
  batches of 1,000 metrics, one run after another;
* ``tbconvert tf`` into a fresh store, then ``tbconvert push mlflow`` (which also uploads the
  images as artifacts).

Each is timed wall-clock in a fresh subprocess, from start to exit; then every MLflow
history is counted to check that each sent every point.  Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

TARGET = 3.0
BATCH = 1000


def recipe(logdir: str, uri: str, event_dirs: list[str]) -> None:
    """The common recipe, as a subprocess runs it (``--recipe``)."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    guidance = {kind: 0 for kind in (ea.SCALARS, ea.TENSORS, ea.IMAGES, ea.HISTOGRAMS)}
    client = MlflowClient(uri)
    experiment = client.create_experiment("recipe")
    reading = 0.0
    for rel in event_dirs:
        started = time.perf_counter()
        accumulator = ea.EventAccumulator(os.path.join(logdir, rel), size_guidance=guidance)
        accumulator.Reload()
        metrics = []
        tags = accumulator.Tags()
        for tag in tags[ea.SCALARS]:
            metrics += [
                Metric(tag, e.value, int(e.wall_time * 1000), e.step)
                for e in accumulator.Scalars(tag)
            ]
        for tag in tags[ea.TENSORS]:
            for e in accumulator.Tensors(tag):
                array = tensor_util.make_ndarray(e.tensor_proto)
                if array.ndim == 0 and array.dtype.kind == "f":
                    metrics.append(Metric(tag, float(array), int(e.wall_time * 1000), e.step))
        reading += time.perf_counter() - started
        run = client.create_run(experiment, run_name=rel).info.run_id
        for start in range(0, len(metrics), BATCH):
            client.log_batch(run, metrics=metrics[start : start + BATCH])
        client.set_terminated(run)
    print(f"{reading:.3f}")


def start_server(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{root / 'backend.db'}"),
            *("--artifacts-destination", str(root / "artifacts")),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return process, url
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("mlflow server did not start")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return time.perf_counter() - started, done.stdout


def points_in(uri: str, experiment: str) -> int:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    total = 0
    for run in client.search_runs([found.experiment_id]):
        for key in run.data.metrics:
            total += len(client.get_metric_history(run.info.run_id, key))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--recipe", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.recipe:
        recipe(args.recipe[0], args.recipe[1], args.recipe[2:])
        return 0
    dataset = generate.ensure_scalars(generate.Params(events=args.events, runs=4, images=4))
    logdir, dirs = str(dataset.logdir), dataset.manifest["event_dirs"]
    results: dict[str, tuple[float, int]] = {}
    parts: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="push-bench-") as folder:
        for name in ("recipe", "tbconvert"):
            root = Path(folder) / name
            root.mkdir()
            server, url = start_server(root)
            try:
                if name == "recipe":
                    command = [sys.executable, __file__, "--recipe", logdir, url, *dirs]
                    seconds, said = timed(command)
                    parts["of the recipe: EventAccumulator reading"] = float(said.split()[-1])
                    experiment = "recipe"
                else:
                    store = str(root / "store.db")
                    tbconvert = [sys.executable, "-m", "tbconvert"]
                    converting, _ = timed([*tbconvert, "tf", "--logdir", logdir, "--store", store])
                    push = ["push", "mlflow", "--store", store, "--tracking-uri", url, "-q"]
                    pushing, _ = timed([*tbconvert, *push])
                    parts["of tbconvert: tbconvert tf"] = converting
                    parts["of tbconvert: tbconvert push mlflow"] = pushing
                    seconds = converting + pushing
                    experiment = "tbconvert"
                results[name] = (seconds, points_in(url, experiment))
            finally:
                stop_server(server)
            shutil.rmtree(root, ignore_errors=True)
    events = dataset.manifest.get("scalar_events", args.events)
    print(f"MLflow push, {events:,} scalar events, {len(dirs)} event directories")
    print(f"{'contender':<44} {'seconds':>8} {'points/s':>10} {'in MLflow':>10}")
    for name, label in (
        ("recipe", "EventAccumulator + log_batch (1,000 a call)"),
        ("tbconvert", "tbconvert tf + tbconvert push mlflow"),
    ):
        seconds, points = results[name]
        print(f"{label:<44} {seconds:>8.1f} {points / seconds:>10,.0f} {points:>10,}")
    for label, seconds in parts.items():
        print(f"  {label:<42} {seconds:>8.1f}")
    ratio = results["recipe"][0] / results["tbconvert"][0]
    print(f"tbconvert / recipe: {ratio:.2f}x (target >= {TARGET:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
