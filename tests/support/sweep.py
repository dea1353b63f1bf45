"""The read side's store: ``sample_logdirs/`` (scalars from every writer) plus a small
tensorboardX sweep written here with hparams, images, texts and a loss that goes NaN, both
converted into one store of the current backend (``build_store``).

The read API, export, report, plot, serve, sparkline and cookbook tests read it; what the
sweep logged (``SWEEP``, ``STEPS``, ``sweep_loss``, ``sweep_pixels``) is what they expect
back.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

from tbconvert import convert
from tests.support.snapshots import StoreFactory

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LOGDIRS = ROOT / "sample_logdirs"
W0 = 1_795_300_000.0
# run -> (lr, optimizer, final accuracy, step at which the loss goes NaN or None)
SWEEP: dict[str, tuple[float, str, float, int | None]] = {
    "lr_0.01": (0.01, "sgd", 0.8, None),
    "lr_0.1": (0.1, "adam", 0.9, None),
    "lr_1.0": (1.0, "adam", 0.3, 6),
}
STEPS = 10
IMAGE_STEPS = (0, 2)


def sweep_pixels(run: str, step: int) -> np.ndarray:
    """The HWC uint8 image logged as ``samples`` by ``run`` at ``step`` (size varies by run)."""
    index = sorted(SWEEP).index(run)
    rng = np.random.default_rng(100 * index + step)
    return rng.integers(0, 256, size=(4 + index, 6 + index, 3), dtype=np.uint8)


def sweep_loss(run: str, step: int) -> float:
    """The loss logged by ``run`` at ``step``: decays, or NaN from its divergence step on."""
    lr, _, _, nan_from = SWEEP[run]
    if nan_from is not None and step >= nan_from:
        return math.nan
    return 1.0 / (1.0 + lr * step)


def write_sweep(logdir: Path) -> None:
    """``logdir/sweep/lr_*``: tensorboardX runs with scalars, images, a note and add_hparams."""
    for run, (lr, optimizer, final, nan_from) in SWEEP.items():
        with SummaryWriter(str(logdir / "sweep" / run), flush_secs=3600) as writer:
            for step in range(STEPS):
                wall_time = W0 + step
                writer.add_scalar("loss", sweep_loss(run, step), step, walltime=wall_time)
                writer.add_scalar("accuracy", final * (step + 1) / STEPS, step, walltime=wall_time)
            for step in IMAGE_STEPS:
                writer.add_image(
                    "samples", sweep_pixels(run, step), step, walltime=W0 + step, dataformats="HWC"
                )
            note = f"Diverged at step {nan_from}" if nan_from else "converged fine"
            writer.add_text("notes", note, STEPS - 1, walltime=W0 + STEPS)
            writer.add_hparams(
                {"lr": lr, "optimizer": optimizer, "batch_size": 32}, {"hparam/accuracy": final}
            )


def build_store(base: Path, make_store: StoreFactory, name: str = "runs") -> str:
    """Convert sample_logdirs and a fresh sweep (in ``base/logs``) into a new store of the
    current backend: ``base/name.db`` on SQLite, a fresh database on PostgreSQL."""
    write_sweep(base / "logs")
    store = make_store(base, name)
    for logdir in (SAMPLE_LOGDIRS, base / "logs"):
        # Aim's classification, orphans left out: the runs below are the documented ones.
        summary = convert(logdir, store, progress=False, skip_orphans=True)
        assert summary.exit_code == 0, summary.problems
    return store
