"""Which files commit together (``tbconvert.conversion.commits``): a group of files shares
one transaction, and closes once its points fill a chunk, once it holds
``ConvertTuning.group_files`` files, or once its files read ``ConvertTuning.group_read_bytes``.
Counted from outside the job, as tests/support/crashpoints.py does: the points in the store
after each commit.
(``test_committer.py`` has how a server store commits the groups in a thread of their own.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tbconvert import convert
from tbconvert.conversion.options import ConvertTuning
from tbconvert.reading.tuning import ReadTuning
from tbconvert.writing.writer import StoreWriter
from tests.support.eventfiles import scalar_events, write_events
from tests.support.snapshots import sqlite_rows

FILE = "events.out.tfevents.1.h"


@pytest.mark.mutant_gap
def test_small_files_commit_together_once_their_points_fill_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten files of 3 points, 10 points a chunk: a group takes files until it holds 10 points
    # or more, so they commit as 4 + 4 + 2 files.  Counted from outside the job, as
    # tests/support/crashpoints.py does: the points in the store after each commit.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(10):
        write_events(logs / f"run_{run}" / FILE, scalar_events("loss", range(3)))
    after_commits = _points_after_each_commit(store, monkeypatch)
    summary = convert(logs, store, chunk_points=10)
    assert summary.points == {"scalars": 30}
    assert sorted(set(after_commits)) == [0, 12, 24, 30]


def _points_after_each_commit(store: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The scalars in the store after each of the writer's transactions (filled as they end),
    counted from outside the job."""
    original = StoreWriter.transaction
    after_commits: list[int] = []

    @contextmanager
    def counted(writer: StoreWriter) -> Iterator[None]:
        with original(writer):
            yield
        after_commits.append(sqlite_rows(store, "SELECT count(*) FROM scalars")[0][0])

    monkeypatch.setattr(StoreWriter, "transaction", counted)
    return after_commits


@pytest.mark.mutant_gap
def test_a_group_also_closes_at_its_number_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever their points, a group takes at most group_files files (1000; 3 here).
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(7):
        write_events(logs / f"run_{run}" / FILE, scalar_events("loss", range(2)))
    after_commits = _points_after_each_commit(store, monkeypatch)
    convert(logs, store, chunk_points=1000, tuning=ConvertTuning(group_files=3))
    assert sorted(set(after_commits)) == [0, 6, 12, 14]


@pytest.mark.mutant_gap
@pytest.mark.by_record_switch
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
def test_a_group_also_closes_at_its_bytes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    # Whatever their points, a group closes once its files read group_read_bytes (2 MB;
    # two of these files here), whether small files are read in batches or one by one.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    for run in range(7):
        write_events(logs / f"run_{run}" / FILE, scalar_events("loss", range(2)))
    size = (logs / "run_0" / FILE).stat().st_size
    read = ReadTuning() if batched else ReadTuning(by_record_bytes=0)
    tuning = ConvertTuning(read=read, group_read_bytes=2 * size)
    after_commits = _points_after_each_commit(store, monkeypatch)
    convert(logs, store, chunk_points=1000, tuning=tuning)
    assert sorted(set(after_commits)) == [0, 4, 8, 12, 14]
