"""Kill a push into Aim at one write, from outside the product, as ``kill -9`` would.

Run as ``python -m tests.support.push_aim_crash JOBS.json RESULTS.json``.  JOBS is a list of
``{"store", "repo", "batch_size", "call", "number", "when"}``; for each, the driver forks a
child that wraps one call and pushes; the child sends itself SIGKILL right before
(``when="before"``: Aim never gets that write) or right after (``"after"``: Aim holds it, the
store has not marked it or recorded the run) its ``number``-th such call.  The calls:

- ``commit``: a batch of metric points (or a removal of steps) written into Aim;
- ``create``: ``aim.Run`` opening a run (before: its directory made, nothing in it);
- ``opened``: the push's ``open_run`` returning (the run made, the store not told);
- ``track``: an image, audio clip, text or histogram written through Aim's tracker.

A ``number`` of 0 never kills: the child pushes to the end.  RESULTS gets, per job, the
child's exit status and the calls it made.  Forking a driver that imported Aim and tbconvert
once keeps each kill cheap.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from tests.support.crashpoints import forked
from tests.support.push_crash import run_jobs_file


def _targets() -> dict[str, tuple[Any, str]]:
    import aim.sdk.run
    import aim.sdk.tracker

    import tbconvert.push.aim
    import tbconvert.push.aim_metrics

    return {
        "commit": (tbconvert.push.aim_metrics.MetricWriter, "commit"),
        "create": (aim.sdk.run.Run, "__init__"),
        "opened": (tbconvert.push.aim, "open_run"),
        "track": (aim.sdk.tracker.RunTracker, "_track"),
    }


def _push_in_child(job: dict[str, Any], report: int) -> None:
    from tbconvert.push.aim import push_aim

    owner, name = _targets()[job["call"]]
    target, when = int(job["number"]), job["when"]
    original = getattr(owner, name)
    made = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        if made[0] == target and when == "before":
            os.write(report, str(made[0] - 1).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if made[0] == target and when == "after":
            os.write(report, str(made[0]).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, counted)
    push_aim(job["store"], job["repo"], batch_size=job["batch_size"])
    os.write(report, str(made[0]).encode())
    os._exit(0)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork, push and kill as the job says; the child's status and the calls it made."""
    status, said = forked(_push_in_child, job)
    return {"status": status, "said": said}


def main(jobs_file: str, results_file: str) -> int:
    """Run every job in order; write the results."""
    _targets()  # imported once, before the forks
    return run_jobs_file(jobs_file, results_file, run_job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
