"""Kill a push at one MLflow call, from outside the product, as ``kill -9`` would.

Run as ``python -m tests.support.push_crash JOBS.json RESULTS.json``.  JOBS is a list of
``{"store", "uri", "experiment", "batch_size", "call", "number", "when"}``; for each, the
driver forks a child that wraps ``MlflowClient.<call>`` (``log_batch`` with metrics, or
``create_run``) and pushes; the child sends itself SIGKILL right before (``when="before"``:
MLflow never gets that call) or right after (``"after"``: MLflow acknowledged it, the store
has not marked it) its ``number``-th such call.  A ``number`` of 0 never kills: the child
pushes to the end.  RESULTS gets, per job, the child's exit status and the calls it made.

Forking a driver that has imported tbconvert and MLflow once keeps each kill cheap.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from tests.support.crashpoints import forked


def _push_in_child(job: dict[str, Any], report: int) -> None:
    from mlflow import MlflowClient

    from tbconvert.push.mlflow import push_mlflow

    call, target, when = job["call"], int(job["number"]), job["when"]
    original = getattr(MlflowClient, call)
    made = [0]
    lock = threading.Lock()

    def counted(client: Any, *args: Any, **kwargs: Any) -> Any:
        if call == "log_batch" and not kwargs.get("metrics"):
            return original(client, *args, **kwargs)
        with lock:
            made[0] += 1
            number = made[0]
        if number == target and when == "before":
            os.write(report, str(number - 1).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(client, *args, **kwargs)
        if number == target and when == "after":
            os.write(report, str(number).encode())
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(MlflowClient, call, counted)
    push_mlflow(job["store"], job["uri"], job["experiment"], batch_size=job["batch_size"])
    os.write(report, str(made[0]).encode())
    os._exit(0)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork, push and kill as the job says; the child's status and the calls it made."""
    status, said = forked(_push_in_child, job)
    return {"status": status, "said": said}


def main(jobs_file: str, results_file: str) -> int:
    """Run every job in order; write the results."""
    import mlflow  # noqa: F401  (imported once, before the forks)

    import tbconvert.push.mlflow  # noqa: F401

    return run_jobs_file(jobs_file, results_file, run_job)


class BackToBack:
    """Watches a whole push for the calls of the adapter's method ``counted`` that the next
    one follows with nothing in between: no other method of the adapter called, no
    transaction of the store committed.  The tracker's state moves only in the adapter's
    methods and the store's only in its transactions, so a kill right after such a call k
    and one right before call k + 1 stop the push in the same state."""

    def __init__(self, adapter: type, counted: str) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        self.events: list[str] = []
        for name, method in list(vars(adapter).items()):
            if inspect.isfunction(method) and not name.startswith("_"):
                setattr(adapter, name, self._watched(name, method, name == counted))
        self.counted = counted
        event.listen(Engine, "commit", lambda _connection: self.events.append("commit"))

    def _watched(self, name: str, method: Callable[..., Any], counted: bool) -> Any:
        def watched(*args: Any, **kwargs: Any) -> Any:
            self.events.append(name)
            result = method(*args, **kwargs)
            if counted:
                self.events.append("returned")
            return result

        return watched

    def numbers(self) -> list[int]:
        """The numbers k (from 1) of the counted calls that call k + 1 follows directly."""
        found, number = [], 0
        for before, event in zip(["start", *self.events], self.events, strict=False):
            if event == self.counted:
                number += 1
                if before == "returned":
                    found.append(number - 1)
        return found


def run_jobs_file(
    jobs_file: str, results_file: str, run: Callable[[dict[str, Any]], dict[str, Any]]
) -> int:
    """``run`` each job of JOBS in order; write the results to RESULTS."""
    with open(jobs_file, encoding="utf-8") as handle:
        jobs = json.load(handle)
    results = [run(job) for job in jobs]
    with open(results_file, "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
