"""Kill a ``push wandb --offline`` at one call of its adapter, from outside the product, as
``kill -9`` would.

Run as ``python -m tests.support.push_crash_wandb JOBS.json RESULTS.json``.  JOBS is a list of
``{"store", "out", "batch_size", "call", "number", "when"}``; for each, the driver forks a
child that wraps ``WandbTracker.<call>`` (``log_points``: a batch; ``open_run``: a W&B run
made, the store not told; ``log_files``: the images, texts and histograms of a run;
``finish_run``: the end of a run) and pushes into the offline directory ``out``; the child
sends itself SIGKILL right before (``when="before"``) or right after (``"after"``) its
``number``-th such call.  A ``number`` of 0 never kills, and says which of the calls it made
the next one followed directly (``BackToBack``).  RESULTS gets, per job, the child's exit
status and the calls it made.

W&B writes a run's records in a ``wandb-core`` process the child starts; killed, the child
leaves it to write what it had and exit.  The driver is the subreaper of its descendants and
waits for every one of them after each job, so that the next push reads a finished log.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import Any

from tests.support.crashpoints import forked
from tests.support.push_crash import BackToBack, run_jobs_file

_PR_SET_CHILD_SUBREAPER = 36


def _push_in_child(job: dict[str, Any], report: int) -> None:
    from tbconvert.push.wandb import WandbTracker, push_wandb

    call, target, when = job["call"], int(job["number"]), job["when"]
    watch = BackToBack(WandbTracker, call) if target == 0 else None
    original = getattr(WandbTracker, call)
    made = [0]

    def counted(tracker: Any, *args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        if made[0] == target and when == "before":
            os.write(report, str(made[0] - 1).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(tracker, *args, **kwargs)
        if made[0] == target and when == "after":
            os.write(report, str(made[0]).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(WandbTracker, call, counted)
    push_wandb(job["store"], "crash", offline=job["out"], batch_size=job["batch_size"])
    said: Any = made[0] if watch is None else {"calls": made[0], "back_to_back": watch.numbers()}
    os.write(report, json.dumps(said).encode())
    os._exit(0)


def _reap_descendants() -> None:
    """Wait for every process left behind (a killed child's wandb-core)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork, push and kill as the job says; the child's status and the calls it made."""
    status, said = forked(_push_in_child, job)
    _reap_descendants()
    return {"status": status, "said": said}


def main(jobs_file: str, results_file: str) -> int:
    """Run every job in order; write the results."""
    # Imported once, before the forks: wandb, with what wandb.init imports as a run starts.
    import wandb.sdk.launch  # noqa: F401

    import tbconvert.push.wandb  # noqa: F401

    # Each child starts its own wandb-core, as a `tbconvert push` on its own does: one shared
    # with the test process (wandb passes its address down in WANDB_SERVICE) would outlive a
    # killed child and hold its run's id as in use.
    os.environ.pop("WANDB_SERVICE", None)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    return run_jobs_file(jobs_file, results_file, run_job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
