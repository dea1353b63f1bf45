"""Real processes: kill -9 at random moments, concurrent converters, live writers, --watch.

Each scenario ends by comparing the store's views, row for row, with one clean conversion of
the final files.  Every scenario runs on SQLite and on a PostgreSQL server.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.children import child_env
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import (
    StoreFactory,
    comparable_rows,
    file_states,
    point_count,
    view_rows,
    without_run_ids,
)

# Slow (kill -9 loops, concurrent converters, a live writer): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = child_env()


def tbconvert(*args: str) -> list[str]:
    return [sys.executable, "-m", "tbconvert", *args]


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 400k scalar points in 4 runs: several chunks, a few seconds to convert."""
    root = tmp_path_factory.mktemp("big") / "logs"
    rng = random.Random(7)
    for run in range(4):
        for part in range(2):
            steps = range(part * 25_000, (part + 1) * 25_000)
            write_events(
                root / f"run_{run}" / f"events.out.tfevents.{part}.host",
                [
                    summary_event(
                        step,
                        1e9 + step,
                        [simple_value("loss", rng.random()), simple_value("acc", step)],
                    )
                    for step in steps
                ],
            )
    return root


@pytest.fixture(scope="module")
def big_clean(
    big_logdir: Path, tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> dict:
    store = make_store(tmp_path_factory.mktemp("clean"), "clean")
    summary = convert(big_logdir, store)
    assert summary.points["scalars"] == 400_000
    return comparable_rows(store)


def big_clean_files(logdir: Path, store: str) -> dict[str, tuple[object, ...]]:
    """The event_files rows (status, offset, records) of one clean conversion of ``logdir``
    into a fresh store beside ``store`` (of the same backend)."""
    records = 0
    states = {}
    for path in sorted(logdir.rglob("events.out.tfevents.*")):
        rel = path.relative_to(logdir).as_posix()
        # 25,000 summary events and the file_version event per file, read to the end.
        states[rel] = ("ok", path.stat().st_size, 25_001)
        records += 25_001
    assert records == 8 * 25_001
    return states


def points_so_far(store: str) -> int:
    """The store's points, 0 while it or its tables are not made yet."""
    try:
        return point_count(store)
    except Exception:  # sqlite3's or psycopg's "no such file / table"
        return 0


def test_kill_9_at_random_moments_then_rerun_equals_clean(
    big_logdir: Path, big_clean: dict, store: str
) -> None:
    # Each kill lands once the store holds more points than a threshold drawn at random:
    # mid-conversion on any machine, where sleeps of a few seconds all ended before the
    # first commit on a loaded one (the kills before it: test_first_run, test_crash_points).
    rng = random.Random(11)
    for threshold in sorted(rng.sample(range(1, 350_000), 6)):
        process = subprocess.Popen(
            tbconvert("tf", "--logdir", str(big_logdir), "--store", str(store), "-q"), env=ENV
        )
        deadline = time.monotonic() + 300  # only bounds the wait
        while points_so_far(store) < threshold and process.poll() is None:
            assert time.monotonic() < deadline, f"never {threshold} points"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
    final = subprocess.run(
        tbconvert("tf", "--logdir", str(big_logdir), "--store", str(store), "-q"),
        env=ENV,
        check=False,
    )
    assert final.returncode == 0
    assert comparable_rows(store) == big_clean


def test_two_converters_at_once_on_one_store(big_logdir: Path, big_clean: dict, store: str) -> None:
    processes = [
        subprocess.Popen(
            tbconvert("tf", "--logdir", str(big_logdir), "--store", str(store), "--json"),
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    for process, (_stdout, stderr) in zip(processes, outputs, strict=False):
        assert process.returncode == 0, stderr
        assert "locked" not in stderr
    assert comparable_rows(store) == big_clean
    # The files' read state too: each file read once, its records counted once (a converter
    # that finds a file already read further by the other leaves it to that one).
    assert file_states(store) == big_clean_files(big_logdir, store)
    claimed = [json.loads(stdout)["points"].get("scalars", 0) for stdout, _ in outputs]
    assert sum(claimed) == 400_000, claimed


def test_converters_on_different_logdirs_share_a_store(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    logdirs = []
    for name in ("a", "b", "c"):
        root = tmp_path / name
        for run in range(3):
            write_events(
                root / f"run_{run}" / "events.out.tfevents.1.host",
                [summary_event(s, 1e9 + s, [simple_value("x", s)]) for s in range(3000)],
            )
        logdirs.append(root)
    store = make_store(tmp_path, "shared")
    processes = [
        subprocess.Popen(
            tbconvert("tf", "--logdir", str(root), "--store", str(store), "-q"), env=ENV
        )
        for root in logdirs
    ]
    assert [process.wait(timeout=300) for process in processes] == [0, 0, 0]
    sequential = make_store(tmp_path, "sequential")
    for root in logdirs:
        convert(root, sequential)
    # Run ids depend on who got the lock first; compare everything else.
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(sequential))


WRITER = textwrap.dedent("""
    import sys, time
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter
    import io

    path, count = sys.argv[1], int(sys.argv[2])
    pause_every = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    with open(path, "ab") as handle:
        for step in range(count):
            event = Event(step=step, wall_time=1e9 + step,
                          summary=Summary(value=[Summary.Value(tag="loss", simple_value=step)]))
            buffer = io.BytesIO()
            RecordWriter(buffer).write(event.SerializeToString())
            record = buffer.getvalue()
            # Flush in two halves, as a writer's buffer does: readers see torn records.
            handle.write(record[:7]); handle.flush(); time.sleep(0.001)
            if pause_every and step % pause_every == pause_every - 1:
                sys.stdin.readline()  # torn until the test has run a pass (and says so)
            handle.write(record[7:]); handle.flush()
            if step % 50 == 0:
                time.sleep(0.01)
""")


def _start_writer(path: Path, count: int, pause_every: int = 0) -> subprocess.Popen:
    """A process appending ``count`` records to ``path``; with ``pause_every``, it stops
    halfway through every ``pause_every``-th record until it reads a line on stdin."""
    path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-c", WRITER, str(path), str(count), str(pause_every)]
    stdin = subprocess.PIPE if pause_every else subprocess.DEVNULL
    return subprocess.Popen(command, env=ENV, stdin=stdin, text=True)


def _release(writer: subprocess.Popen) -> None:
    """Let a pausing writer go past one pause (it may not be there yet: the line waits)."""
    assert writer.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it finished
        writer.stdin.write("\n")
        writer.stdin.flush()


def test_converter_runs_repeatedly_while_a_writer_appends(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    logdir = tmp_path / "live"
    store = make_store(tmp_path, "live")
    # Each writer pauses 6 times, mid-record, and goes on only once a pass has run: the
    # passes interleave with the appends by construction, not by the machine's pace.
    writers = [
        _start_writer(logdir / f"run_{i}" / "events.out.tfevents.1.host", 3000, 500)
        for i in range(2)
    ]
    passes = 0
    while any(writer.poll() is None for writer in writers):
        convert(logdir, store)
        passes += 1
        for writer in writers:
            _release(writer)
    for writer in writers:
        assert writer.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a line it never read
            writer.stdin.close()
    assert all(writer.returncode == 0 for writer in writers)
    convert(logdir, store)
    assert passes >= 6
    # Which run's file appeared first decides the run ids; everything else must match.
    assert without_run_ids(view_rows(store)) == without_run_ids(
        view_rows(_clean_copy(logdir, tmp_path, make_store))
    )


def test_watch_follows_a_live_writer_until_ctrl_c(tmp_path: Path, make_store: StoreFactory) -> None:
    logdir = tmp_path / "live"
    store = make_store(tmp_path, "watch")
    writer = _start_writer(logdir / "run_0" / "events.out.tfevents.1.host", 2000)
    watcher = subprocess.Popen(
        tbconvert(
            "tf",
            "--logdir",
            str(logdir),
            "--store",
            str(store),
            "--watch",
            "--interval",
            "0.2",
            "--json",
        ),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.wait(timeout=120) == 0
    # Stop once a pass has stored every point (an event, not a guess at how long passes take
    # on a loaded machine); a watcher that never gets there fails here.
    deadline = time.monotonic() + 120
    while points_so_far(store) < 2000:
        assert watcher.poll() is None, watcher.communicate()[1]
        assert time.monotonic() < deadline, "the watcher never stored all 2000 points"
        time.sleep(0.05)
    watcher.send_signal(signal.SIGINT)
    stdout, stderr = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["points"]["scalars"] == 2000
    assert "Converted" in stderr
    assert comparable_rows(store) == comparable_rows(_clean_copy(logdir, tmp_path, make_store))


def _clean_copy(logdir: Path, tmp_path: Path, make_store: StoreFactory) -> str:
    store = make_store(tmp_path, f"clean_{time.monotonic_ns()}")
    convert(logdir, store)
    return store
