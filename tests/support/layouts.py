"""Logdirs laid out as the common writers lay them out, written with real writers.

tensorboardX's ``SummaryWriter`` writes its own layout for real.  The other writers' layouts
(PyTorch, Lightning, Keras, the TF2 hparams API, Hugging Face Trainer, Ultralytics,
detectron2, Ray Tune, CatBoost, Guild AI) are written the way those libraries write them,
without the libraries: tensorboardX's ``FileWriter`` (which PyTorch's ``SummaryWriter``
mirrors record for record) or tensorboard's own protos for TF2 encodings and CatBoost, at
the paths each library uses, with the sidecar files each puts beside its event files.

Each builder writes under a directory and returns what a user means by it: run path
(relative to that directory) -> the contexts of that run.
"""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import summary_v2 as hp

from tests.support.eventfiles import (
    event_file_name,
    summary_event,
    tf2_scalar,
    write_events,
)

Expected = dict[str, set[str]]
WALL = 1_790_000_000.0


def _file_writer(directory: Path) -> object:
    from tensorboardX import FileWriter

    directory.mkdir(parents=True, exist_ok=True)
    return FileWriter(str(directory), flush_secs=3600)


def _hparams_session(
    directory: Path, hparams: dict[str, object], metrics: dict[str, float]
) -> None:
    """What ``add_hparams`` writes (tensorboardX and PyTorch alike): experiment, session
    start and end in one file of their own directory, then each metric as a scalar."""
    from tensorboardX.summary import hparams as hparams_summaries
    from tensorboardX.summary import scalar

    writer = _file_writer(directory)
    for summary in hparams_summaries(hparams, metrics):
        writer.add_summary(summary)  # type: ignore[attr-defined]
    for key, value in metrics.items():
        writer.add_summary(scalar(key, value), 0)  # type: ignore[attr-defined]
    writer.close()  # type: ignore[attr-defined]


def tensorboardx_sweep(root: Path, runs: int = 3, steps: int = 3) -> Expected:
    """A sweep written with tensorboardX's ``SummaryWriter`` for real: ``add_scalar``,
    ``add_scalars('acc', {'train', 'val'})``, ``add_text`` and ``add_hparams`` per run."""
    from tensorboardX import SummaryWriter

    expected: Expected = {}
    for n in range(runs):
        name = f"lr{10 ** -(n + 1)}_bs32_sgd"
        with SummaryWriter(logdir=str(root / name), flush_secs=3600) as writer:
            for step in range(steps):
                writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=WALL + step)
                writer.add_scalars(
                    "acc", {"train": 0.5 + step / 10, "val": 0.4 + step / 10}, step, WALL + step
                )
            writer.add_text("note", f"run {n}", 0, walltime=WALL)
            writer.add_hparams(
                {"lr": 10 ** -(n + 1), "bs": 32, "opt": "sgd"}, {"hparam/final_acc": 0.9}
            )
        # add_hparams wrote its session into <run>/<time.time()>/: context ``hparams``.
        expected[name] = {"", "train", "val", "hparams"}
    return expected


def pytorch_sweep(root: Path, runs: int = 3, steps: int = 3) -> Expected:
    """PyTorch's layout: the run's own file, ``add_scalars`` sub-writers in
    ``<run>/<main_tag>_<key>/`` (slashes of the main tag made ``_``), ``add_hparams`` in
    ``<run>/<time.time()>/``."""
    from tensorboardX.summary import scalar

    expected: Expected = {}
    for n in range(runs):
        run = root / f"run{n}"
        main = _file_writer(run)
        for step in range(steps):
            main.add_summary(scalar("loss", 1.0 / (step + 1)), step)  # type: ignore[attr-defined]
        main.close()  # type: ignore[attr-defined]
        for key in ("train", "val"):
            sub = _file_writer(run / f"metrics_acc_{key}")
            for step in range(steps):
                sub.add_summary(scalar("metrics/acc", 0.5), step)  # type: ignore[attr-defined]
            sub.close()  # type: ignore[attr-defined]
        session = f"{1_790_000_000 + n}.{123456 + n}"
        _hparams_session(run / session, {"lr": 0.1 * (n + 1)}, {"hparam/acc": 0.9})
        expected[f"run{n}"] = {"", "train", "val", "hparams"}
    return expected


def lightning(root: Path, versions: int = 3) -> Expected:
    """Lightning's TensorBoardLogger: ``<save_dir>/lightning_logs/version_N/`` holding one
    event file (metrics and the hparams session) and ``hparams.yaml``."""
    from tensorboardX.summary import hparams as hparams_summaries
    from tensorboardX.summary import scalar

    expected: Expected = {}
    for n in range(versions):
        version = root / "lightning_logs" / f"version_{n}"
        writer = _file_writer(version)
        for summary in hparams_summaries({"dropout": 0.1 * n}, {"hp_metric": -1}):
            writer.add_summary(summary)  # type: ignore[attr-defined]
        for step in range(3):
            writer.add_summary(scalar("train_loss", 1.0 / (step + 1)), step)  # type: ignore[attr-defined]
        writer.close()  # type: ignore[attr-defined]
        (version / "hparams.yaml").write_text(f"dropout: {0.1 * n}\nlayers: 2\n", encoding="utf-8")
        expected[f"lightning_logs/version_{n}"] = {""}
    return expected


def _tf2_file(directory: Path, tags: list[str], wall: float = WALL) -> None:
    events = [
        summary_event(step, wall + step, [tf2_scalar(tag, 0.5) for tag in tags])
        for step in range(3)
    ]
    write_events(directory / event_file_name(wall), events)


def keras(root: Path) -> Expected:
    """Keras' TensorBoard callback: ``logs/fit/<timestamp>/train`` and ``.../validation``."""
    run = "logs/fit/20261126-080214"
    for context in ("train", "validation"):
        _tf2_file(root / run / context, ["epoch_loss", "epoch_accuracy"])
    return {run: {"train", "validation"}}


def tf2_hparams(root: Path, trials: int = 3) -> Expected:
    """The TF2 hparams API tutorial: the experiment in ``logs/hparam_tuning/``, one trial
    directory ``run-N`` each (its session start, then its metrics)."""
    tuning = root / "logs" / "hparam_tuning"
    config = hp.hparams_config_pb(hparams=[hp.HParam("units")], metrics=[hp.Metric("accuracy")])
    write_events(tuning / event_file_name(WALL), [summary_event(0, WALL, config.value)])
    expected: Expected = {"logs/hparam_tuning": {""}}  # the experiment: a file of no trial
    for n in range(trials):
        trial = tuning / f"run-{n}"
        session = hp.hparams_pb({"units": 16 * (n + 1)}, trial_id=f"run-{n}")
        events = [
            summary_event(0, WALL, session.value),
            summary_event(1, WALL + 1, [tf2_scalar("accuracy", 0.8)]),
        ]
        write_events(trial / event_file_name(WALL), events)
        expected[f"logs/hparam_tuning/run-{n}"] = {""}
    return expected


def hf_trainer(root: Path) -> Expected:
    """Hugging Face Trainer: ``output/runs/<Mon DD_HH-MM-SS>_<host>/`` holding the run's file
    and an ``add_hparams`` session with no metrics."""
    from tensorboardX.summary import scalar, text

    run = "output/runs/Nov26_08-02-14_gpu-host"
    writer = _file_writer(root / run)
    writer.add_summary(text("args", "{}"), 0)  # type: ignore[attr-defined]
    for step in range(3):
        writer.add_summary(scalar("train/loss", 1.0 / (step + 1)), step)  # type: ignore[attr-defined]
    writer.close()  # type: ignore[attr-defined]
    session = "1795000000.5"
    _hparams_session(root / run / session, {"learning_rate": 5e-5}, {})
    return {run: {"", "hparams"}}


def ultralytics(root: Path) -> Expected:
    """Ultralytics YOLOv8: ``runs/detect/train``, ``train2`` (each with ``args.yaml``)."""
    expected: Expected = {}
    for name in ("train", "train2"):
        run = root / "runs" / "detect" / name
        _tf2_file(run, ["train/box_loss"])
        (run / "args.yaml").write_text("task: detect\nepochs: 3\n", encoding="utf-8")
        expected[f"runs/detect/{name}"] = {""}
    return expected


def detectron2(root: Path) -> Expected:
    """detectron2: the output directory holds the event file, metrics.json, config.yaml."""
    _tf2_file(root / "output", ["total_loss"])
    (root / "output" / "metrics.json").write_text('{"iteration": 0}\n', encoding="utf-8")
    return {"output": {""}}


def ray_tune(root: Path, trials: int = 2) -> Expected:
    """Ray Tune: ``ray_results/<experiment>/<trial>/`` with the event file, params.json and
    result.json."""
    expected: Expected = {}
    for n in range(trials):
        trial = f"ray_results/train_fn/train_fn_0000{n}_{n}_lr={0.1 * (n + 1):.1f}"
        _tf2_file(root / trial, ["ray/tune/mean_loss"])
        (root / trial / "params.json").write_text(
            json.dumps({"lr": 0.1 * (n + 1)}), encoding="utf-8"
        )
        (root / trial / "result.json").write_text("{}\n", encoding="utf-8")
        expected[trial] = {""}
    return expected


def catboost_fit(train_dir: Path, iterations: int = 3, tests: int = 1) -> None:
    """One CatBoost fit into ``train_dir`` as CatBoost's C++ logger writes it: a bare
    ``events.out.tfevents`` in ``learn/`` and in ``test/`` (``test1/``... for more eval sets),
    no file-version record, one event per metric and iteration (tag and node name the
    metric, step the iteration, wall time in whole seconds), and beside them the error and
    time tables and ``catboost_training.json``."""
    metrics = ("Logloss", "AUC")
    tokens = ["learn", *(f"test{n}" if n else "test" for n in range(tests))]
    for token in tokens:
        events = [
            summary_event(step, float(int(WALL) + step), [catboost_value(metric, 0.5 / (step + 1))])
            for step in range(iterations)
            for metric in metrics
        ]
        write_events(train_dir / token / "events.out.tfevents", events, file_version=False)
    header = "iter\t" + "\t".join(metrics)
    table = "".join(f"{step}\t0.5\t0.5\n" for step in range(iterations))
    (train_dir / "learn_error.tsv").write_text(f"{header}\n{table}", encoding="utf-8")
    (train_dir / "test_error.tsv").write_text(f"{header}\n{table}", encoding="utf-8")
    (train_dir / "time_left.tsv").write_text("iter\tPassed\tRemaining\n", encoding="utf-8")
    meta = {"meta": {"learn_sets": tokens[:1], "test_sets": tokens[1:], "name": "experiment"}}
    (train_dir / "catboost_training.json").write_text(json.dumps(meta), encoding="utf-8")
    (train_dir / "tmp").mkdir(exist_ok=True)


def catboost_value(metric: str, value: float) -> Summary.Value:
    """CatBoost's ``AddScalar``: ``simple_value`` with the tag as node name too."""
    return Summary.Value(tag=metric, node_name=metric, simple_value=value)


def catboost(root: Path) -> Expected:
    """CatBoost's default ``train_dir``, ``catboost_info/``, and a fit with another
    ``train_dir`` and two eval sets: one run each, contexts ``learn`` and ``test``..."""
    catboost_fit(root / "catboost_info")
    catboost_fit(root / "models" / "depth6", tests=2)
    return {"catboost_info": {"learn", "test"}, "models/depth6": {"learn", "test", "test1"}}


def guild(root: Path, runs: int = 2) -> Expected:
    """Guild AI's runs: ``runs/<id>/`` holds what the script wrote (here its own event file)
    and ``.guild/`` Guild's records (``attrs/``, ``output``) and the scalars Guild read from
    the output, written by tensorboardX into ``.guild/``."""
    from tensorboardX.summary import scalar

    expected: Expected = {}
    for n in range(runs):
        run = root / "runs" / f"{n:032x}"
        script = _file_writer(run)
        script.add_summary(scalar("loss", 0.5), 0)  # type: ignore[attr-defined]
        script.close()  # type: ignore[attr-defined]
        scalars = _file_writer(run / ".guild")
        scalars.add_summary(scalar("loss", 0.5), 0)  # type: ignore[attr-defined]
        scalars.close()  # type: ignore[attr-defined]
        (run / ".guild" / "attrs").mkdir()
        (run / ".guild" / "attrs" / "flags").write_text("lr: 0.1\n", encoding="utf-8")
        (run / ".guild" / "output").write_text("loss: 0.5\n", encoding="utf-8")
        expected[f"runs/{n:032x}"] = {"", "guild"}
    return expected


WRITERS = {
    "tensorboardx": tensorboardx_sweep,
    "pytorch": pytorch_sweep,
    "lightning": lightning,
    "keras": keras,
    "tf2_hparams": tf2_hparams,
    "hf_trainer": hf_trainer,
    "ultralytics": ultralytics,
    "detectron2": detectron2,
    "ray_tune": ray_tune,
    "catboost": catboost,
    "guild": guild,
}
