"""``--jobs`` workers end when the writer's process dies, even by ``kill -9`` (issue #44).

The workers are caught at a point their code reaches (each writes its pid once it has decoded
a chunk, then holds on as a worker blocked on a full queue would), never after a guessed
sleep; the writer is then killed, and the test waits, polling with a generous bound, for the
workers to be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.children import child_env
from tests.support.eventfiles import scalar_events, write_events

ROOT = Path(__file__).resolve().parents[2]
ENV = child_env()

# The writer's process: the CLI, with the workers' reader wrapped (forked workers inherit it).
WRITER = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    from tbconvert.cli import cli
    from tbconvert.conversion import workers

    marks, logdir, store, kernel = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    read_files = workers.read_files
    if kernel == "no":  # as on macOS: only the worker's own watch of its parent
        workers._ask_the_kernel_for_sigkill_on_parent_death = lambda: False

    def held_after_the_first_chunk(*args):
        for item in read_files(*args):
            yield item
            (marks / f"worker-{os.getpid()}").write_text("")
            threading.Event().wait()

    workers.read_files = held_after_the_first_chunk
    cli(["tf", "--logdir", logdir, "--store", store, "--jobs", "2", "-q"])
""")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (dead, not reaped by whoever adopted it) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True  # no /proc (macOS): the signal found it
    return state != "Z"


def wait_for(condition, what: str, seconds: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.skipif(os.name != "posix", reason="kill -9 and fork")
@pytest.mark.parametrize("kernel", ["yes", "no"], ids=["pdeathsig", "watch-thread"])
def test_kill_9_of_a_jobs_2_conversion_leaves_no_worker_behind(tmp_path: Path, kernel: str) -> None:
    logdir = tmp_path / "logs"
    for run in range(4):
        write_events(
            logdir / f"run{run}" / "events.out.tfevents.1.h", scalar_events("x", range(3000))
        )
    marks = tmp_path / "marks"
    marks.mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(marks), str(logdir), str(tmp_path / "s.db"), kernel],
        env=ENV,
    )
    workers: list[int] = []
    try:
        wait_for(lambda: len(os.listdir(marks)) == 2 or writer.poll() is not None, "no workers")
        assert writer.poll() is None, "the conversion ended before its workers held"
        workers = [int(name.split("-")[1]) for name in os.listdir(marks)]
        assert all(map(alive, workers))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        wait_for(lambda: not any(map(alive, workers)), f"workers left behind: {workers}")
    finally:
        writer.kill()
        writer.wait()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
