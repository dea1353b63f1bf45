"""Groups committed in a thread of their own on a server store (``commits.Committer``).

The next group decodes while the server takes the one before; the store must go through the
same commits as in line: one group at a time, in order, a failed commit raised in the
converter with every group before it kept, and nothing of the failed one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.conversion.applying import Applier
from tbconvert.conversion.commits import CommitGroup, Committer
from tbconvert.conversion.job import Job
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import view_rows, without_run_ids


def test_groups_commit_one_at_a_time_in_order_and_failures_surface() -> None:
    done: list[int] = []
    active: list[str] = []
    overlap = threading.Event()
    release = threading.Event()

    def commit(group: CommitGroup) -> None:
        active.append(threading.current_thread().name)
        if len(active) > 1 + len(done):
            overlap.set()  # two commits at once: must never happen
        if group.points == 2:
            committer.waiting_on_server()  # as before a COPY: submit() returns
            release.wait(120)  # set by the test; the bound only ends a broken test
        if group.points == 3:
            raise RuntimeError("server went away")
        done.append(group.points)

    committer = Committer(commit, in_thread=True)
    committer.submit(CommitGroup(1))
    committer.submit(CommitGroup(2))  # waits for group 1
    assert done == [1]
    release.set()
    committer.submit(CommitGroup(3))  # waits for group 2, then fails in the thread
    with pytest.raises(RuntimeError, match="server went away"):
        committer.wait()
    committer.wait()  # the error is raised once
    assert done == [1, 2]
    assert not overlap.is_set()
    assert set(active) == {"tbconvert-commit"}

    in_line = Committer(commit, in_thread=False)
    in_line.submit(CommitGroup(4))
    assert active[-1] == threading.current_thread().name and done[-1] == 4


def test_submit_returns_once_the_commit_waits_on_the_server() -> None:
    """The next group decodes only when the commit thread's own work is done: until then
    they would share the interpreter while the server idles."""
    steps: list[str] = []
    release = threading.Event()

    def commit(group: CommitGroup) -> None:
        steps.append(f"statements {group.points}")
        if group.points == 1:
            time.sleep(0.2)  # statements take a while: submit() must wait for them
            steps.append("handed over")  # before the call that lets submit() return
            committer.waiting_on_server()
            release.wait(120)  # set by the test; the bound only ends a broken test
        steps.append(f"committed {group.points}")

    committer = Committer(commit, in_thread=True)
    committer.submit(CommitGroup(1))
    assert steps == ["statements 1", "handed over"]
    release.set()
    committer.submit(CommitGroup(2))  # never waits on the server: returns when it is done
    assert steps == [
        "statements 1",
        "handed over",
        "committed 1",
        "statements 2",
        "committed 2",
    ]
    committer.wait()


def _logdir(root: Path, runs: int) -> Path:
    for run in range(runs):
        write_events(
            root / f"run_{run}" / "events.out.tfevents.1.h",
            [summary_event(s, 1e9 + s, [simple_value("loss", s / 7.0)]) for s in range(300)],
        )
    return root


def test_a_server_store_is_committed_in_a_thread_and_equals_sqlite_s(
    pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[str] = set()
    commit_group = Job.commit_group

    def recorded(self: Job, group: CommitGroup, advance: Any) -> None:
        threads.add(threading.current_thread().name)
        commit_group(self, group, advance)

    monkeypatch.setattr(Job, "commit_group", recorded)
    logdir = _logdir(tmp_path / "logs", 6)
    server = pg_server.new_database("committer")
    convert(logdir, server, chunk_points=500)
    assert threads == {"tbconvert-commit"}

    threads.clear()
    convert(logdir, tmp_path / "s.db", chunk_points=500)
    assert threads == {threading.current_thread().name}
    assert view_rows(server)["v_scalars"] == view_rows(tmp_path / "s.db")["v_scalars"]


def test_a_group_failing_on_the_server_keeps_the_groups_before_it(
    pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = _logdir(tmp_path / "logs", 6)
    apply_chunk = Applier.apply_chunk

    def failing_at_run_3(self: Applier, task: Any, chunk: Any, position: Any) -> Any:
        if task.run_path == "run_3":
            raise RuntimeError("the server refused run_3")
        return apply_chunk(self, task, chunk, position)

    monkeypatch.setattr(Applier, "apply_chunk", failing_at_run_3)
    server = pg_server.new_database("failing")
    # 300 points a file, groups of 600: runs 0-1, 2-3 (fails), 4-5 never committed.
    with pytest.raises(RuntimeError, match="refused run_3"):
        convert(logdir, server, chunk_points=600)
    kept = {row[1] for row in view_rows(server)["v_scalars"]}
    assert kept == {"run_0", "run_1"}

    monkeypatch.setattr(Applier, "apply_chunk", apply_chunk)
    convert(logdir, server, chunk_points=600)
    expected = tmp_path / "one.db"
    convert(logdir, expected, chunk_points=600)
    # The server's ids skip those of the transaction rolled back.
    assert without_run_ids(view_rows(server)) == without_run_ids(view_rows(expected))
