"""One file read into chunks (``tbconvert.reading.chunks``): a file that cannot be opened is
one last chunk that says why, and a read from the file's start says so in its first chunk
only, however many chunks it takes (``test_by_record.py`` has which path a chunk is decoded by,
``test_small_files_batched.py`` the chunks of small files read together).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tbconvert import convert
from tbconvert.filters import Selection
from tbconvert.reading import chunks
from tbconvert.reading.chunks import FileTask, ReadSettings, read_file
from tests.support.eventfiles import simple_value, summary_event, write_events


@pytest.mark.mutant_gap
def test_a_file_that_cannot_be_opened_is_one_last_chunk_with_the_reason(tmp_path: Path) -> None:
    task = FileTask(
        index=0,
        path=str(tmp_path / "missing" / "events.out.tfevents.1.h"),
        rel_path="missing/events.out.tfevents.1.h",
        run_path="missing",
        context="",
        size=100,
        mtime_ns=0,
        offset=40,
        stored_size=100,
        stored_digest=None,
        known_metadata={},
    )
    (chunk,) = read_file(task, ReadSettings(Selection(), 1000), {})
    assert chunk.error == "cannot read: No such file or directory"
    assert chunk.done and not chunk.torn
    assert (chunk.consumed, chunk.records, chunk.rows, chunk.damage) == (40, 0, {}, [])
    assert chunks.bytes_to_read(task, ReadSettings(Selection(), 1000)) == 60


@pytest.mark.mutant_gap
def test_a_moved_and_replaced_file_read_in_several_chunks_is_one_of_each(tmp_path: Path) -> None:
    # --flat makes group/run/train a run of its own: its file moves there with its points;
    # rewritten with another first record, it is then read again from its start in three
    # chunks of 10 points, and only the first one says it replaced the stored points.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    path = logs / "group" / "run" / "train" / "events.out.tfevents.1.h"
    write_events(path, [summary_event(1, 1e9, [simple_value("loss", 0.5)])])
    convert(logs, store, chunk_points=10)
    write_events(
        path, [summary_event(step, 2e9 + step, [simple_value("loss", 0.5)]) for step in range(30)]
    )
    flat = convert(logs, store, flat=True, chunk_points=10)
    assert (flat.files_moved, flat.files_replaced, flat.files_read) == (1, 1, 1)
    assert flat.records_read == 31 and flat.bytes_read == path.stat().st_size
    assert flat.points == {"scalars": 30}
