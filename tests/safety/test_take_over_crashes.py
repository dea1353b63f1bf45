"""A crash at every commit boundary of a conversion that takes over a nested logdir's files
(``logs/sweep`` stored, then ``logs`` converted), then one plain run: the store equals a
clean conversion of ``logs`` (design §7, issue #44).  The crashes come from outside the
product (``tests/support/crashpoints.py``), as in ``test_crash_points.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbconvert import convert
from tests.conversion.test_nested_logdirs import SWEEP_RUNS, events, views
from tests.safety.test_crash_points import crash, file_rows
from tests.support.crashpoints import CRASHED
from tests.support.eventfiles import write_events
from tests.support.snapshots import StoreFactory, query_rows

pytestmark = pytest.mark.slow

CHUNK_POINTS = 20


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep of three runs inside a parent with runs of its own, some files of several
    chunks, and one sweep file grown since the sweep was stored (see ``stored_sweep``)."""
    root = tmp_path_factory.mktemp("takeover") / "logs"
    write_events(root / "baseline" / "events.out.tfevents.1.host", events("loss", range(45), 1e3))
    write_events(root / "probe" / "events.out.tfevents.1.host", events("acc", range(8), 2e3))
    for index, run in enumerate(SWEEP_RUNS):
        path = root / "sweep" / run / "train" / "events.out.tfevents.1.host"
        write_events(path, events("loss", range(10 + 10 * index), 1e4 * (index + 1)))
    (root / "sweep" / "lr_0.01" / "hparams.yaml").write_text("lr: 0.01\n")
    return root


def stored_sweep(logs: Path, store: str) -> None:
    convert(logs / "sweep", store, chunk_points=CHUNK_POINTS)


def test_a_crash_at_every_commit_of_a_take_over_then_a_plain_run_equals_clean(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    clean = make_store(tmp_path, "clean")
    convert(logs, clean, chunk_points=CHUNK_POINTS)
    expected_views, expected_files = views(clean), file_rows(clean)

    options = {"chunk_points": CHUNK_POINTS}
    counting = make_store(tmp_path, "count")
    stored_sweep(logs, counting)
    job = {"logdir": str(logs), "store": counting, "commit": 0, "when": "after"}
    [counted] = crash([{**job, "options": options}], tmp_path)
    assert counted["exit"] == 0
    commits = counted["commits"]
    assert commits >= 4  # planning with the take-over, the conversion's row, chunks, the end
    moments = ("before", "after") if make_store.backend == "sqlite" else ("after",)
    jobs = []
    for number in range(1, commits + 1):
        for when in moments:
            store = make_store(tmp_path, f"crash_{number}_{when}")
            stored_sweep(logs, store)
            jobs.append({**job, "store": store, "commit": number, "when": when, "options": options})
    results = crash(jobs, tmp_path)

    own_bytes = sum(
        path.stat().st_size for run in ("baseline", "probe") for path in (logs / run).iterdir()
    )
    sources_at_crash = set()
    for job, result in zip(jobs, results, strict=True):
        made = job["commit"] - (job["when"] == "before")
        assert result == {"exit": CRASHED, "commits": made}, job
        held = query_rows(job["store"], "SELECT DISTINCT source FROM runs ORDER BY source")
        sources_at_crash.add(tuple(Path(str(row[0])).name for row in held))
        summary = convert(logs, job["store"])
        # Whatever the crash left, the sweep's files are not read again.
        assert summary.bytes_read <= own_bytes, job
        assert views(job["store"]) == expected_views, job
        assert file_rows(job["store"]) == expected_files, job
    # The take-over commits with the planning, in the first transaction: a crash before it
    # leaves the sweep's source alone (SQLite's "before" moments), any later one the parent's.
    taken = {("logs",)}
    assert sources_at_crash == (taken | {("sweep",)} if make_store.backend == "sqlite" else taken)


def test_a_crash_at_every_commit_of_a_child_taking_over_then_a_plain_run_completes_it(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    """``logs`` stored, then ``logs/sweep`` converted and crashed at each commit: a plain run
    of the sweep leaves the store a whole take-over leaves (the union of the two sources,
    which ``tests/conversion/test_nested_logdirs.py`` checks against clean conversions)."""
    whole = make_store(tmp_path, "whole")
    convert(logs, whole, chunk_points=CHUNK_POINTS)
    assert convert(logs / "sweep", whole).files_taken_over == 3  # the event files
    expected_views, expected_files = views(whole), file_rows(whole)

    moments = ("before", "after") if make_store.backend == "sqlite" else ("after",)
    job = {"logdir": str(logs / "sweep"), "commit": 0, "when": "after", "options": {}}
    counting = make_store(tmp_path, "count")
    convert(logs, counting, chunk_points=CHUNK_POINTS)
    [counted] = crash([{**job, "store": counting}], tmp_path)
    jobs = []
    for number in range(1, counted["commits"] + 1):
        for when in moments:
            store = make_store(tmp_path, f"child_{number}_{when}")
            convert(logs, store, chunk_points=CHUNK_POINTS)
            jobs.append({**job, "store": store, "commit": number, "when": when})
    for job, result in zip(jobs, crash(jobs, tmp_path), strict=True):
        assert result["exit"] == CRASHED, job
        assert convert(logs / "sweep", job["store"]).bytes_read == 0, job
        assert views(job["store"]) == expected_views, job
        assert file_rows(job["store"]) == expected_files, job
