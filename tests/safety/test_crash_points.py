"""A crash at every commit boundary of a conversion, then one plain run: the store equals a
clean conversion, view for view and file state for file state (design §7, issue #13).

The crashes are injected from outside the product (``tests/support/crashpoints.py`` wraps the
writer's transactions in a forked child that ends itself with ``os._exit(9)``), right before
and right after each commit of a multi-chunk, multi-file conversion: between the chunks of
big files, and around groups of small files that commit together (``conversion.commits``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tests.conversion.test_invariant import text_value
from tests.support.children import child_env
from tests.support.crashpoints import CRASHED
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, comparable_rows, connect, point_count, rows

# Slow (a crash at every commit, then a rerun, on both backends): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHUNK_POINTS = 50
FILE_COLUMNS = (
    "path, status, size, mtime_ns, head_digest, offset_consumed, records, damaged_records, "
    "first_wall_time, last_wall_time, selection"
)


@pytest.fixture(scope="module")
def crash_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four runs, a context, five files of 100 to 400 points, one ending in a torn record, and
    six tiny files that share a transaction."""
    root = tmp_path_factory.mktemp("crash") / "logs"
    layout = {
        "run_a/events.out.tfevents.1.host": 200,
        "run_a/events.out.tfevents.2.host": 120,
        "run_b/train/events.out.tfevents.1.host": 150,
        "run_b/eval/events.out.tfevents.1.host": 60,
        "run_c/events.out.tfevents.1.host": 100,
        **{f"run_d/events.out.tfevents.{number}.host": 3 for number in range(1, 7)},
    }
    for index, (path, steps) in enumerate(layout.items()):
        write_events(
            root / path,
            [
                summary_event(
                    step,
                    1e9 + 1000 * index + step,
                    [simple_value("loss", 1.0 / (step + 1)), simple_value("acc", step / steps)]
                    + ([text_value("notes", f"{path} {step}")] if step % 10 == 0 else []),
                )
                for step in range(steps)
            ],
        )
    torn = root / "run_c" / "events.out.tfevents.1.host"
    torn.write_bytes(torn.read_bytes()[:-5])
    return root


def file_rows(store: str) -> list[tuple[Any, ...]]:
    with connect(store) as connection:
        return sorted(rows(connection, f"SELECT {FILE_COLUMNS} FROM event_files"))


def crash(jobs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    jobs_file, results_file = tmp_path / "jobs.json", tmp_path / "results.json"
    jobs_file.write_text(json.dumps(jobs))
    subprocess.run(
        [sys.executable, "-m", "tests.support.crashpoints", str(jobs_file), str(results_file)],
        cwd=ROOT,
        env=child_env(),
        check=True,
        timeout=900,
    )
    return list(json.loads(results_file.read_text()))


def test_a_crash_at_every_commit_then_a_plain_run_equals_clean(
    crash_logdir: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    clean = make_store(tmp_path, "clean")
    whole = convert(crash_logdir, clean, chunk_points=CHUNK_POINTS)
    assert whole.files_partial == 1 and whole.total_points > 1000
    expected_views, expected_files = comparable_rows(clean), file_rows(clean)

    options = {"chunk_points": CHUNK_POINTS}
    [counted] = crash(
        [
            {
                "logdir": str(crash_logdir),
                "store": make_store(tmp_path, "count"),
                "commit": 0,
                "when": "after",
                "options": options,
            }
        ],
        tmp_path,
    )
    assert counted["exit"] == 0
    commits = counted["commits"]
    assert commits >= 15  # planning, the conversion's rows, one per chunk (several a file)
    # Every commit, crashed right before and right after it (a server store: after only).
    moments = ("before", "after") if make_store.backend == "sqlite" else ("after",)
    jobs = [
        {
            "logdir": str(crash_logdir),
            "store": make_store(tmp_path, f"crash_{number}_{when}"),
            "commit": number,
            "when": when,
            "options": options,
        }
        for number in range(1, commits + 1)
        for when in moments
    ]
    results = crash(jobs, tmp_path)

    left_behind = set()
    after: dict[int, dict[str, tuple[Any, ...]]] = {0: {}}  # file states after commit N
    for job, result in zip(jobs, results, strict=True):
        made = job["commit"] - (job["when"] == "before")
        assert result == {"exit": CRASHED, "commits": made}, job
        left_behind.add(point_count(job["store"]))
        if job["when"] == "after":
            after[made] = {row[0]: row for row in file_rows(job["store"])}
        convert(crash_logdir, job["store"])
        assert comparable_rows(job["store"]) == expected_views, job
        assert file_rows(job["store"]) == expected_files, job
    # The crashes interrupted the conversion at every stage: a dozen different stores (by
    # their number of points) were left behind, from empty to nearly whole.
    assert len(left_behind) >= 12 and min(left_behind) == 0
    assert max(left_behind) == whole.total_points
    # Some crashes came between two chunks of one file (left reading) ...
    assert any(row[1] == "reading" for states in after.values() for row in states.values())
    # ... and some commit took several whole files at once, so crashes came right before and
    # right after a group.
    changed = [
        {path for path, row in after[number].items() if after[number - 1].get(path) != row}
        for number in range(1, commits + 1)
    ]
    assert max(len(paths) for paths in changed) >= 4
    print(f"crash points exercised: {len(jobs)} ({commits} commits x {len(moments)})")
