"""Kill a conversion at one commit boundary, from outside the product's code path.

Run as ``python -m tests.support.crashpoints JOBS.json RESULTS.json``.  JOBS is a list of
``{"logdir", "store", "commit", "when", "options"}``; for each, the driver forks a child that
wraps :meth:`StoreWriter.transaction` (the converter's only commits) and converts; the child
ends itself with ``os._exit(9)`` right before (``when="before"``: the transaction never
commits) or right after (``"after"``) its ``commit``-th commit, as ``kill -9`` would.  A
``commit`` of 0 never crashes: the child exits 0 and reports how many commits a whole
conversion makes.  RESULTS gets, per job, the child's exit status and the commits it made.

A job with ``"point"`` instead of ``"commit"`` is killed (SIGKILL, from itself) at its
``point``-th step on the way to the store: a Python audit event on a path that begins with the
store's (``sqlite3.connect``, ``os.link``, ``os.remove`` ...) or an SQL statement SQLAlchemy
runs (the schema's, one by one).  A ``point`` of 0 reports how many steps a whole conversion
takes; the kills then land at every step the code reaches, not after a guessed sleep.

Forking a driver that has imported the converter once keeps a crash a few milliseconds, so a
test can afford one at every commit of a conversion.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

CRASHED = 9


def _crash_in_child(job: dict[str, Any], report: int) -> None:
    from tbconvert import convert
    from tbconvert.writing.writer import StoreWriter

    target, when = int(job["commit"]), job["when"]
    original = StoreWriter.transaction
    made = [0]

    @contextmanager
    def transaction(writer: StoreWriter) -> Iterator[None]:
        number = made[0] + 1
        with original(writer):
            yield
            if number == target and when == "before":
                os.write(report, str(made[0]).encode())
                os._exit(CRASHED)
        made[0] = number
        if number == target and when == "after":
            os.write(report, str(made[0]).encode())
            os._exit(CRASHED)

    StoreWriter.transaction = transaction  # type: ignore[method-assign]
    convert(job["logdir"], job["store"], progress=False, **job.get("options", {}))
    os.write(report, str(made[0]).encode())
    os._exit(0)


def _kill_in_child(job: dict[str, Any], report: int) -> None:
    import signal

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from tbconvert import convert

    store, target = str(job["store"]), int(job["point"])
    steps = [0]

    def step() -> None:
        steps[0] += 1
        if steps[0] == target:
            os.write(report, str(steps[0]).encode())
            os.kill(os.getpid(), signal.SIGKILL)

    def on_audit(name: str, arguments: tuple[Any, ...]) -> None:
        if any(isinstance(value, str) and value.startswith(store) for value in arguments):
            step()

    event.listen(Engine, "before_cursor_execute", lambda *_arguments: step())
    sys.addaudithook(on_audit)
    convert(job["logdir"], store, progress=False, **job.get("options", {}))
    os.write(report, str(steps[0]).encode())
    os._exit(0)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork, crash as the job says, and return the child's exit status and the commits made
    (or, for a ``point`` job, the steps taken)."""
    if "point" in job:
        status, steps = forked(_kill_in_child, job)
        return {"exit": status, "steps": int(steps or -1)}
    status, commits = forked(_crash_in_child, job)
    return {"exit": status, "commits": int(commits or -1)}


def forked(body: Callable[[dict[str, Any], int], None], job: dict[str, Any]) -> tuple[int, str]:
    """Run ``body(job, report)`` in a forked child; its exit status (minus the signal that
    ended it) and what it wrote to the file descriptor ``report``.  A body that raises is a
    failure, not a crash: said on stderr, exit 70."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            body(job, write_end)
        except BaseException as error:
            os.write(2, f"forked child: {error!r}\n".encode())
            os._exit(70)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), said


def main(jobs_path: str, results_path: str) -> None:
    """Run every job of the file in order; write their results."""
    import tbconvert.conversion.pipeline  # noqa: F401  (imported once, before forking)

    with open(jobs_path) as handle:
        jobs = json.load(handle)
    results = [run_job(job) for job in jobs]
    with open(results_path, "w") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
