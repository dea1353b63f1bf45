"""Ctrl-C (SIGINT) and SIGTERM stop a conversion after its current transaction, with one line
saying what is kept, exit 130 / 143 and no traceback from any process (workers included); the
next run continues.  ``--watch`` prints one line per pass that changed something, and its
totals add up (design §7, issue #13 item 7)."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from tbconvert import convert, open_store, watch
from tbconvert.conversion.summary import Summary
from tests.support.children import child_env
from tests.support.eventfiles import append_events, simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, comparable_rows

# Slow (signals sent to converters in subprocesses): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = child_env()


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 300k scalar points in 6 files: a conversion of a few seconds."""
    root = tmp_path_factory.mktemp("stopping") / "logs"
    rng = random.Random(3)
    for run in range(3):
        for part in range(2):
            write_events(
                root / f"run_{run}" / f"events.out.tfevents.{part}.host",
                [
                    summary_event(
                        step,
                        1e9 + step,
                        [simple_value("loss", rng.random()), simple_value("acc", 1)],
                    )
                    for step in range(part * 25_000, (part + 1) * 25_000)
                ],
            )
    return root


@pytest.fixture(scope="module")
def clean_rows(
    big_logdir: Path, make_store: StoreFactory, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[tuple[object, ...]]]:
    """The rows of one plain conversion of ``big_logdir`` on the current backend: what every
    stopped conversion, run again, must equal."""
    clean = make_store(tmp_path_factory.mktemp("clean"), "clean")
    convert(big_logdir, clean)
    return comparable_rows(clean)


# The CLI, held after its first commit until a stop is asked for: the signal lands between
# transactions of a conversion under way whatever the machine's pace (it cannot end first).
HELD_AFTER_A_COMMIT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tbconvert.cli import cli
    from tbconvert.conversion import job, stopping

    held, arguments = Path(sys.argv[1]), sys.argv[2:]
    commit = job.Job.commit_group

    def commit_then_hold(self, group, advance):
        commit(self, group, advance)
        if not held.exists():
            held.write_text("")
            while not stopping.requested():
                time.sleep(0.01)

    job.Job.commit_group = commit_then_hold
    cli(arguments)
""")


def started_converting(held: Path, process: subprocess.Popen) -> None:
    """Wait until the converter has committed its first points (so signal handlers are in
    place) and holds, as it says by ``held``; the bound only ends a broken test."""
    deadline = time.monotonic() + 300
    while not held.exists():
        assert process.poll() is None, "the conversion ended before it could be stopped"
        assert time.monotonic() < deadline, "the conversion never committed"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("signum", "jobs", "code"),
    [(signal.SIGINT, 1, 130), (signal.SIGTERM, 1, 143), (signal.SIGINT, 2, 130)],
    ids=["sigint", "sigterm", "sigint-jobs-2"],
)
def test_a_signal_stops_after_the_transaction_and_the_next_run_continues(
    big_logdir: Path,
    clean_rows: dict[str, list[tuple[object, ...]]],
    make_store: StoreFactory,
    tmp_path: Path,
    signum: int,
    jobs: int,
    code: int,
) -> None:
    store = make_store(tmp_path, "stopped")
    held = tmp_path / "held"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HELD_AFTER_A_COMMIT,
            str(held),
            "tf",
            "--logdir",
            str(big_logdir),
            "--store",
            store,
            "--jobs",
            str(jobs),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    started_converting(held, process)
    os.killpg(process.pid, signum)  # the whole group, workers too, as a terminal does
    _stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    [line] = stderr.strip().splitlines()
    assert line.startswith(
        f"stopped by {signal.Signals(signum).name} after the current transaction"
    )
    assert "is kept" in line and "run the same command again to continue" in line
    convert(big_logdir, store)
    assert comparable_rows(store) == clean_rows


def test_watch_reports_each_pass_that_changed_something_and_totals_add_up(
    tmp_path: Path, store: str
) -> None:
    logdir = tmp_path / "logs"
    path = write_events(
        logdir / "run" / "events.out.tfevents.1.host",
        [summary_event(s, 1e9 + s, [simple_value("x", s)]) for s in range(10)],
    )
    write_events(
        logdir / "other" / "events.out.tfevents.1.host",
        [summary_event(s, 1e9 + s, [simple_value("y", s)]) for s in range(5)],
    )
    seen: list[Summary] = []

    def grow(summary: Summary) -> None:
        seen.append(summary)
        if len(seen) == 1:
            append_events(path, [summary_event(10, 2e9, [simple_value("x", 1.0)])])

    total = watch(logdir, store, interval=0, passes=3, on_pass=grow, progress=False)
    assert [s.files_read for s in seen] == [2, 1, 0]
    assert total.passes == 3
    assert total.files_total == 6 and total.files_read + total.files_unchanged == 6
    assert total.points == Counter({"scalars": 16})
    assert total.runs == 2 and total.stopped is None


def test_a_watch_pass_stopped_after_a_commit_counts_what_it_committed(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during a pass, after it committed the new points: the watch's summary counts
    them, as the store holds them (it said 1872 of 2000 points when the stop came late)."""
    from tbconvert.conversion import job, stopping

    logdir = tmp_path / "logs"
    path = write_events(
        logdir / "run" / "events.out.tfevents.1.host",
        [summary_event(s, 1e9 + s, [simple_value("x", s)]) for s in range(10)],
    )
    commit = job.Job.commit_group
    passes: list[Summary] = []

    def commit_then_stop(self: job.Job, group: object, advance: object) -> None:
        commit(self, group, advance)  # type: ignore[arg-type]
        if passes:  # the second pass: a SIGINT arrives once its points are in
            stopping._requested.append(signal.SIGINT)

    def grow(summary: Summary) -> None:
        passes.append(summary)
        append_events(path, [summary_event(s, 2e9 + s, [simple_value("x", 1.0)]) for s in (10, 11)])

    monkeypatch.setattr(job.Job, "commit_group", commit_then_stop)
    try:
        total = watch(logdir, store, interval=0, on_pass=grow, progress=False)
    finally:
        stopping._requested.clear()
    assert len(passes) == 1 and total.stopped is not None
    assert total.points == Counter({"scalars": 12})
    with open_store(store) as opened:
        assert opened.query("SELECT count(*) AS n FROM v_scalars")[0]["n"] == 12


def test_absorb_adds_every_count() -> None:
    """Every numeric field of a pass adds up, except the logdir's own figures."""
    first, later = Summary("logs", "store"), Summary("logs", "store")
    numbers = [f.name for f in dataclasses.fields(Summary) if f.type in ("int", "float")]
    for number, name in enumerate(numbers, start=1):
        setattr(first, name, number)
        setattr(later, name, 10 * number)
    first.absorb(later)
    for number, name in enumerate(numbers, start=1):
        expected = 10 * number if name in ("runs", "runs_in_logdir", "contexts") else 11 * number
        assert getattr(first, name) == expected, name
