"""The suite's checks for rows that point nowhere catch them, whoever wrote them.

``tests/conftest.py`` checks every store a test (or its module's fixtures) made once the test
is over, so conversions in subprocesses are covered; ``tests/support/snapshots.py`` compares the raw
point tables joined outwards besides the views, which are inner joins and would hide a
dangling row.  Each check is shown failing on a dangling row made on purpose.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tbconvert import convert
from tests.support.eventfiles import simple_value, summary_event, tensor_value, write_events
from tests.support.snapshots import (
    DANGLING,
    RAW_POINTS,
    VIEWS,
    StoreFactory,
    connect,
    dangling_rows,
    is_server,
    view_rows,
)


def _logdir(root: Path) -> Path:
    for context in ("train", "eval"):
        write_events(
            root / "run" / context / "events.out.tfevents.1.h",
            [
                summary_event(step, 1e9 + step, [simple_value("loss", step / 4)])
                for step in range(5)
            ],
        )
    return root


# A converter in another process that leaves a point whose series does not exist: the
# in-process check at StoreWriter.close never sees this process's connections.
_CONVERT_THEN_DANGLE = """
import sqlite3, sys
from tbconvert import convert
logdir, store, dangle = sys.argv[1], sys.argv[2], sys.argv[3] == "dangle"
convert(logdir, store)
if dangle:
    with sqlite3.connect(store) as connection:
        connection.execute(
            "INSERT INTO scalars SELECT series_id + 1000, step, file_id, record_offset, "
            "value_index, wall_time, value FROM scalars LIMIT 1"
        )
"""

_INNER_TESTS = """
import subprocess, sys
import pytest
from tests.writing.test_dangling_rows import _CONVERT_THEN_DANGLE, _logdir

def _convert(directory, how):
    logdir = _logdir(directory / "logs")
    subprocess.run(
        [sys.executable, "-c", _CONVERT_THEN_DANGLE, str(logdir), str(directory / "s.db"), how],
        check=True,
    )

def test_clean(tmp_path):
    _convert(tmp_path, "clean")

def test_dangling(tmp_path):
    _convert(tmp_path, "dangle")

@pytest.fixture(scope="module")
def module_store(tmp_path_factory):
    _convert(tmp_path_factory.mktemp("module"), "dangle")

def test_uses_a_module_store(module_store):
    pass
"""


@pytest.mark.dangling_rows  # the inner session's stores are under this test's tmp_path
def test_a_dangling_row_left_by_a_subprocess_fails_the_test_that_made_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=_INNER_TESTS)
    result = pytester.runpytest("-p", "tests.conftest", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)
    output = result.stdout.str()
    assert "ERROR at teardown of test_dangling " in output
    assert "ERROR at teardown of test_uses_a_module_store " in output
    assert "foreign key of scalars" in output
    assert "1 scalars rows whose series is missing" in output
    assert "in this module's stores" in output


def _other_context(store: str) -> None:
    """File the train file under the eval context: its points' series stay in train, which
    no foreign key forbids."""
    with closing(connect(store, read_only=False)) as connection:
        connection.execute(
            "UPDATE event_files SET context_id = (SELECT id FROM contexts WHERE name = 'eval') "
            "WHERE path = 'run/train/events.out.tfevents.1.h'"
        )
        connection.commit()


@pytest.mark.dangling_rows
def test_dangling_rows_finds_points_filed_under_another_place(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store(tmp_path)
    convert(_logdir(tmp_path / "logs"), store)
    with closing(connect(store)) as connection:
        assert dangling_rows(connection) == []
    _other_context(store)
    with closing(connect(store)) as connection:
        assert dangling_rows(connection) == [
            ("scalars rows whose file and series are in different (run, context)s", 5)
        ]


@pytest.mark.dangling_rows
def test_the_snapshot_shows_a_dangling_point_that_the_views_hide(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    logdir = _logdir(tmp_path / "logs")
    write_events(
        logdir / "run" / "train" / "events.out.tfevents.2.h",
        [
            summary_event(
                1, 1e9, [tensor_value("weights", [1.0, 2.0], shape=(2,), with_metadata=False)]
            )
        ],
    )
    convert(logdir, store)
    before = view_rows(store)
    assert not is_server(store) and before[DANGLING] == []
    with closing(sqlite3.connect(store)) as connection:
        # What a crash between deleting a file's row and its points would leave, say.
        connection.execute("DELETE FROM series WHERE name = 'loss'")
        connection.execute("DELETE FROM blobs")
        connection.commit()
    after = view_rows(store)
    # The views are inner joins: the orphaned points and the tensor without its blob
    # vanish from them, so a comparison of views alone sees rows missing, never what is left.
    assert all(after[view] == [] for view in ("v_scalars", "v_last_scalars", "v_tensors"))
    assert set(after) == {*VIEWS, RAW_POINTS, DANGLING}
    orphans = [row for row in after[RAW_POINTS] if row[3] is None]
    assert len(orphans) == 10 and {row[0] for row in orphans} == {"scalars"}
    assert {row[7] for row in orphans} == {
        "run/train/events.out.tfevents.1.h",
        "run/eval/events.out.tfevents.1.h",
    }
    (tensor,) = [row for row in after[RAW_POINTS] if row[0] == "tensors"]
    assert tensor[3] == "weights" and tensor[-1] is None
    assert after[DANGLING] == [
        ("scalars rows whose series is missing", 10),
        ("tensors rows whose blob is missing", 1),
        ("series_summaries rows whose series is missing", 2),  # loss in train and eval
    ]
