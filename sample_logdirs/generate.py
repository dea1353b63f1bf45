"""Write the sample logdirs that ``make demo`` converts (run from anywhere; no TensorFlow).

    python sample_logdirs/generate.py

Every event file is real: tensorboardX's own ``SummaryWriter`` for the torch/tensorboardX
style (``simple_value``), and hand-built ``tensorboard.compat.proto`` Events framed by
tensorboard's ``RecordWriter`` for what tensorboardX cannot write (TF2 / Keras rank-0 tensors,
TF1 ``merge_all`` events, torch ``new_style`` and ``double_precision``).  See
``tests/support/eventfiles.py`` for the builders.

Output is deterministic: fixed seeds, fixed wall times, and for tensorboardX (which takes its
file name and its ``file_version`` wall time from ``time.time()`` and ``socket.gethostname()``)
a fixed clock and host name patched into ``tensorboardX.event_file_writer`` while writing.
Running the script twice gives byte-identical files.

Layout (see README.md for what the classifier makes of it): the logdir root *is* Aim's
documented example tree (``reference/aim_convert_tf.md`` §3.1), plus two more groups,
``keras_style/`` and ``tensorboardx_mnist/``.
"""

from __future__ import annotations

import math
import os
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from eventfiles import (  # noqa: E402  (tests/ is put on the path just above)
    simple_value,
    summary_event,
    tf2_scalar,
    torch_double_scalar,
    torch_new_style_scalar,
    write_events,
)

HOST = "sample-host"
T0 = 1_795_000_000  # 2026-11-18 11:06:40 UTC, the first job's start
TF2_FILE_SUFFIX = ".4242.0.v2"  # TF >= 2.x: .<pid>.<uid>.v2


# --------------------------------------------------------------------------- curves


def training_curves(steps: range, seed: int, *, start: float = 2.3, floor: float = 0.08,
                    tau: float = 90.0, noise: float = 0.04) -> tuple[list[float], list[float]]:
    """A decaying loss and a rising accuracy, with a little deterministic noise."""
    rng = np.random.default_rng(seed)
    losses, accuracies = [], []
    for step in steps:
        decay = math.exp(-step / tau)
        losses.append(floor + (start - floor) * decay + noise * float(rng.standard_normal()) * decay
                      + noise / 4 * float(rng.random()))
        accuracy = 0.1 + 0.88 * (1 - decay) + 0.01 * float(rng.standard_normal())
        accuracies.append(min(0.995, accuracy))
    return losses, accuracies


def cosine_lr(step: int, total: int, base: float = 0.1) -> float:
    return 0.5 * base * (1 + math.cos(math.pi * min(step, total) / total))


# --------------------------------------------------------------------------- writers


@contextmanager
def fixed_tensorboardx_clock(now: float) -> Iterator[None]:
    """Make tensorboardX name its file ``...<now>.sample-host`` and stamp file_version ``now``."""
    import tensorboardX.event_file_writer as efw

    with mock.patch.object(efw, "time", types.SimpleNamespace(time=lambda: now)), \
         mock.patch.object(efw, "socket", types.SimpleNamespace(gethostname=lambda: HOST)):
        yield


def tbx_writer(logdir: Path):  # type: ignore[no-untyped-def]
    from tensorboardX import SummaryWriter

    logdir.mkdir(parents=True, exist_ok=True)
    return SummaryWriter(logdir=str(logdir), flush_secs=3600, max_queue=1000)


def tf_name(seconds: float, suffix: str = "") -> str:
    return f"events.out.tfevents.{int(seconds):010d}.{HOST}{suffix}"


def torch_name(seconds: float, pid: int, counter: int) -> str:
    return f"events.out.tfevents.{int(seconds):010d}.{HOST}.{pid}.{counter}"


# --------------------------------------------------------------------------- Aim's tree


def write_run_1(root: Path) -> None:
    """tensorboardX (torch-style simple_value): a job that crashed after step 199 and was resumed
    from the checkpoint of step 150 by a second job, so steps 150..199 appear twice."""
    steps = range(300)
    losses, accuracies = training_curves(steps, seed=1)
    for start, stop, t0 in ((0, 200, T0), (150, 300, T0 + 3600)):
        with fixed_tensorboardx_clock(t0):
            writer = tbx_writer(root / "run_1")
            for step in range(start, stop):
                wall = t0 + 2.0 + (step - start) * 0.5
                # The resumed job logs the same loss curve shape, slightly better.
                resumed = 0.97 if t0 != T0 else 1.0
                writer.add_scalar("loss", losses[step] * resumed, step, walltime=wall)
                writer.add_scalar("accuracy", accuracies[step], step, walltime=wall)
                if step % 10 == 0:
                    writer.add_scalar("lr", cosine_lr(step, 300), step, walltime=wall)
            writer.close()


def write_group_1_orphan(root: Path) -> None:
    """A stray file directly in a group directory: Aim's file 3, ignored with a warning."""
    with fixed_tensorboardx_clock(T0 - 600):
        writer = tbx_writer(root / "group_1")
        for step in range(5):
            writer.add_scalar("smoke_test/loss", 2.3 - 0.1 * step, step, walltime=T0 - 600 + step)
        writer.close()


def keras_epochs(directory: Path, t0: float, epochs: range, seed: int, *, validation: bool,
                 total: int) -> None:
    """One TF2 file of Keras-style epoch scalars (rank-0 DT_FLOAT tensors, md on every event)."""
    steps_per_epoch = 469  # MNIST, batch 128
    losses, accuracies = training_curves(range(total), seed=seed, tau=6.0, noise=0.02,
                                         start=0.6 if validation else 0.9,
                                         floor=0.07 if validation else 0.03)
    events = []
    for epoch in epochs:
        wall = t0 + 3.0 + 11.37 * (epoch - epochs.start + 1)
        # One Event per tf.summary.scalar call, micro-second wall times as TF's C++ writer.
        logged = [(epoch, "epoch_loss", losses[epoch]),
                  (epoch, "epoch_accuracy", accuracies[epoch])]
        if validation:
            iterations = (epoch + 1) * steps_per_epoch
            logged += [(iterations, "evaluation_loss_vs_iterations", losses[epoch]),
                       (iterations, "evaluation_accuracy_vs_iterations", accuracies[epoch])]
        else:
            logged.append((epoch, "epoch_learning_rate", 1e-3 * 0.5 ** (epoch // 10)))
        for i, (step, tag, value) in enumerate(logged):
            stamp = round(wall + 0.000137 * i, 6)
            events.append(summary_event(step, stamp, [tf2_scalar(tag, value)]))
    # TF's C++ writer stamps file_version with whole seconds.
    write_events(directory / tf_name(t0, TF2_FILE_SUFFIX), events, version_wall_time=float(int(t0)))


def write_run_2(root: Path) -> None:
    """TF2 / Keras encodings in contexts train/ and validate/ (each restarted once: files 4-7),
    plus two TF1 FileWriter files directly in the run (merge_all events: files 8, 9)."""
    run = root / "group_1" / "run_2"
    t0 = T0 + 7200
    for context, validation, seed in (("train", False, 21), ("validate", True, 22)):
        keras_epochs(run / context, t0, range(0, 12), seed, validation=validation, total=25)
        keras_epochs(run / context, t0 + 900, range(12, 25), seed, validation=validation,
                     total=25)
    # TF1 graph mode: tf.compat.v1.summary.scalar + merge_all, one Event per session.run;
    # simple_value, no metadata.  The job was restarted at global step 1000.
    for t_start, steps in ((t0, range(0, 1200, 20)), (t0 + 900, range(1000, 2400, 20))):
        events = []
        for i, step in enumerate(steps):
            wall = round(t_start + 1.5 + 0.8 * i, 6)
            events.append(summary_event(step, wall, [
                simple_value("global_step/sec", 25.0 + 2.0 * math.sin(step / 300)),
                simple_value("learning_rate", 0.05 * 0.96 ** (step / 200)),
            ]))
        write_events(run / tf_name(t_start), events, version_wall_time=float(int(t_start)))


def write_run_3(root: Path) -> None:
    """torch.utils.tensorboard, new_style scalars: float_val (file 10) and double_precision
    DT_DOUBLE double_val (file 11), two writers of one process (pid 7001, counters 0 and 1)."""
    run = root / "group_1" / "run_3"
    t0 = T0 + 10800
    steps = range(0, 400, 2)
    losses, accuracies = training_curves(steps, seed=3, tau=120.0)
    events_f, events_d = [], []
    for i, step in enumerate(steps):
        wall = t0 + 1.0 + 0.25 * i
        events_f.append(summary_event(step, wall, [
            torch_new_style_scalar("Loss/train", losses[i])]))
        events_f.append(summary_event(step, wall, [
            torch_new_style_scalar("Accuracy/train", accuracies[i])]))
        # An exponential moving average kept in float64 (0.1 stays 0.1).
        ema = 0.1 + 0.9 * (1 - math.exp(-step / 150))
        events_d.append(summary_event(step, wall, [torch_double_scalar("ema_decay", ema)]))
    write_events(run / torch_name(t0, 7001, 0), events_f, version_wall_time=t0 + 0.123)
    write_events(run / torch_name(t0, 7001, 1), events_d, version_wall_time=t0 + 0.125)


def write_root_orphans(root: Path) -> None:
    """Two files directly in the logdir root (Aim's files 12 and 13): ignored, with warnings."""
    for k, t0 in enumerate((T0 - 3600, T0 - 1800)):
        with fixed_tensorboardx_clock(t0):
            writer = tbx_writer(root)
            for step in range(3):
                writer.add_scalar("scratch/value", float(k + step), step, walltime=t0 + step)
            writer.close()


# --------------------------------------------------------------------------- other groups


def write_keras_style(root: Path) -> None:
    """The TF tutorial's ``logs/fit/<timestamp>`` with Keras' train/ and validation/ contexts."""
    for k in range(2):
        t0 = T0 + 3 * 86400 + 1800 * k
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t0))  # datetime.now() in the tutorial
        run = root / "keras_style" / "fit" / stamp
        keras_epochs(run / "train", t0, range(30), 40 + k, validation=False, total=30)
        keras_epochs(run / "validation", t0, range(30), 50 + k, validation=True, total=30)


def write_tensorboardx_mnist(root: Path) -> None:
    """tensorboardX ``add_scalars``: one sub-run per key, nested ``<run>/<main>/<key>/``.

    The main writer logs nothing itself (everything goes through add_scalars), so its own file
    holds only the file_version record; Aim's rules make ``<run>`` a group and list that file
    as an orphan.
    """
    for k, lr in enumerate((0.1, 0.01)):
        t0 = T0 + 2 * 86400 + 3600 * k
        steps = range(0, 20)  # epochs
        train_loss, train_acc = training_curves(steps, seed=60 + k, tau=4.0 / (1 + 2 * lr))
        test_loss, test_acc = training_curves(steps, seed=70 + k, tau=4.5 / (1 + 2 * lr),
                                              floor=0.1)
        with fixed_tensorboardx_clock(t0):
            writer = tbx_writer(root / "tensorboardx_mnist" / f"lr_{lr}")
            for epoch in steps:
                wall = t0 + 30.0 * (epoch + 1)
                writer.add_scalars("loss", {"train": train_loss[epoch], "test": test_loss[epoch]},
                                   epoch, walltime=wall)
                writer.add_scalars("accuracy", {"train": train_acc[epoch],
                                                "test": test_acc[epoch]}, epoch, walltime=wall)
            writer.close()


# --------------------------------------------------------------------------- main


def clean(root: Path) -> None:
    """Remove event files written before (and the directories left empty), nothing else."""
    for directory, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            if "tfevents" in name:
                os.remove(os.path.join(directory, name))
        if Path(directory) != root and not os.listdir(directory):
            os.rmdir(directory)


def main() -> None:
    root = HERE
    clean(root)
    write_run_1(root)
    write_group_1_orphan(root)
    write_run_2(root)
    write_run_3(root)
    write_root_orphans(root)
    write_keras_style(root)
    write_tensorboardx_mnist(root)
    total = sum(p.stat().st_size for p in root.rglob("*tfevents*"))
    count = sum(1 for _ in root.rglob("*tfevents*"))
    print(f"wrote {count} event files, {total:,} bytes, under {root}")


if __name__ == "__main__":
    main()
