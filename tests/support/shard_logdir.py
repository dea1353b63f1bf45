"""A logdir for ``--shard`` tests: every kind of run a shard must take whole or leave whole.

Runs of tensorboardX's real ``SummaryWriter`` with ``add_scalars`` contexts, text, images and
an ``add_hparams`` session; PyTorch-style ``<run>/<tag>_<key>/`` contexts; Lightning versions
with their ``hparams.yaml`` sidecar; plain runs in a group; and orphans, at the logdir's root
(kept as run ``.``) and in a group (kept as the group's run).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboardX import SummaryWriter

from tests.support.eventfiles import scalar_events, write_events
from tests.support.layouts import WALL, lightning, pytorch_sweep, tensorboardx_sweep

PLAIN_RUNS = 8


def write_shard_logdir(root: Path) -> Path:
    """Write the logdir under ``root`` and return ``root``."""
    tensorboardx_sweep(root / "sweep", runs=4)
    pytorch_sweep(root / "torch", runs=3)
    lightning(root / "lit", versions=3)
    for index in range(PLAIN_RUNS):
        write_plain_run(root, f"group/exp{index}", steps=10 + index)
    with SummaryWriter(str(root / "images"), flush_secs=3600) as writer:
        for step in range(2):
            pixels = np.full((3, 4, 3), 40 * step, dtype=np.uint8)
            writer.add_image("sample", pixels, step, walltime=WALL + step, dataformats="HWC")
    write_events(root / "events.out.tfevents.100.root", scalar_events("root_loss", range(5)))
    write_events(
        root / "group" / "events.out.tfevents.100.group", scalar_events("group_loss", range(4))
    )
    return root


def write_plain_run(
    root: Path, run: str, steps: int, name: str = "events.out.tfevents.1.a"
) -> Path:
    """One event file of ``steps`` scalar points at ``root/run``; returns its path."""
    return write_events(root / run / name, scalar_events("loss", range(steps), base=WALL))
