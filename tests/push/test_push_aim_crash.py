"""A push into Aim killed (SIGKILL, in a real process) at every batch boundary and around
run creation, then run again, leaves every Aim metric equal to ``v_scalars_current``, every
object in place, and one Aim run per run: no stray or empty run (#48).

Each kill is right before a batch of points is written (Aim never gets it) or right after
(the store has not marked it); before and after Aim opens a run under its hash (its
directory made, then the run made, the store not told); after the push's ``open_run``
returned; and after an object is written.  Each kill pushes into an Aim repo of its own (a
copy of one fresh repo), read back through Aim's SDK.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tests.push.conftest import write_logdir

aim = pytest.importorskip("aim")

from tests.push.test_push_aim import ROOT, aim_histories, aim_runs, store_histories  # noqa: E402
from tests.push.test_push_crash import kill_everywhere_then_run_again  # noqa: E402
from tests.push.test_push_crash import run_jobs as run_mlflow_jobs  # noqa: E402

pytestmark = pytest.mark.slow

BATCH = 10


def run_jobs(jobs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    return run_mlflow_jobs(jobs, tmp_path, "tests.support.push_aim_crash", timeout=900)


# The object sequences write_logdir makes: (Aim's getter, name).
OBJECTS = (
    ("get_image_sequence", "sample"),
    ("get_text_sequence", "note/text_summary"),
    ("get_distribution_sequence", "w"),
    ("get_audio_sequence", "clip"),
)


def objects(repo: Path) -> dict[tuple[str, str], list[int]]:
    """The steps of every image, text, distribution and audio sequence of every run."""
    found = {}
    for path, run in aim_runs(repo).items():
        for getter, name in OBJECTS:
            sequence = getattr(run, getter)(name, ROOT)
            if sequence is not None:
                steps, _ = sequence.data.numpy()
                found[(path, name)] = sorted(int(step) for step in steps)
    return found


def test_a_push_killed_at_every_batch_boundary_then_run_again_is_exact(tmp_path: Path) -> None:
    write_logdir(tmp_path / "logs", runs=2, steps=12)
    store = tmp_path / "runs.db"
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    fresh = tmp_path / "fresh"
    aim.Repo.from_path(str(fresh), init=True)  # made once: Aim sets a repo up in seconds

    def job(name: str, call: str = "commit", number: int = 0, when: str = "after") -> Any:
        repo = tmp_path / name
        if not repo.exists():
            shutil.copytree(fresh, repo)
        return {
            "store": str(store),
            "repo": str(repo),
            "batch_size": BATCH,
            "call": call,
            "number": number,
            "when": when,
        }

    kills = kill_everywhere_then_run_again(
        lambda jobs: run_jobs(jobs, tmp_path),
        job,
        "count",
        ("commit", "commit"),
        6,
        [
            ("create-before", "create", 2, "before"),
            ("create-after", "create", 2, "after"),
            ("opened", "opened", 1, "after"),
            ("track", "track", 2, "after"),
        ],
    )

    expected = store_histories(store)
    expected_objects = objects(tmp_path / "count")
    assert len(expected_objects) == 7  # image, text, histogram of two runs; a clip
    with closing(sqlite3.connect(store)) as conn:
        paths = sorted(path for (path,) in conn.execute("SELECT run_path FROM runs"))
    for name in kills:
        repo = tmp_path / name
        assert aim_histories(repo) == expected, name
        assert objects(repo) == expected_objects, name
        # One Aim run per run, none stray or empty.
        assert sorted(aim_runs(repo)) == paths, name
        assert len(aim.Repo(str(repo)).list_all_runs()) == len(paths), name
