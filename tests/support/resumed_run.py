"""A run resumed from a checkpoint: steps 0..100 logged, then 50..150 by a second writer in
the same directory, the way a training script restarted from step 50 logs them."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

TAG = "loss"


def write_resumed_run(run: Path) -> list[int]:
    """Write the run; returns its steps in the order they were written, as TensorBoard's
    own loader reads its files (in name order, the order the writers created them)."""
    from tensorboardX import SummaryWriter

    for suffix, steps in ((".a", range(0, 101)), (".b", range(50, 151))):
        with SummaryWriter(str(run), filename_suffix=suffix, flush_secs=3600) as writer:
            for step in steps:
                value = 1.0 / (step + 1) + (0.05 if suffix == ".b" else 0.0)
                writer.add_scalar(TAG, value, step, walltime=1e9 + step)
    return [
        event.step
        for path in sorted(run.glob("events.out.tfevents.*"))
        for event in EventFileLoader(str(path)).Load()
        if any(value.tag == TAG for value in event.summary.value)
    ]
