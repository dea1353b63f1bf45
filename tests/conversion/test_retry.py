"""A server's deadlock victim or serialisation failure is rolled back and applied again.

Two converters that lock rows in different orders can make PostgreSQL abort one transaction
(SQLSTATE 40P01 or 40001).  The job then applies the same group of chunks (one transaction,
``conversion.commits``) again from its start, up to five attempts: the failures here are
injected into the bulk insert (the server cannot be made to choose a victim on demand), and
the store must come out equal to a conversion that never failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.errors import StoreError
from tbconvert.writing.postgres import PostgresBulk
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, comparable_rows, file_states

_INSERT_POINTS = PostgresBulk.insert_points


def logdir_of_chunks(root: Path) -> Path:
    for number, run in enumerate(("a", "b")):
        write_events(
            root / run / "events.out.tfevents.1.h",
            [
                summary_event(s, 1e9 + s, [simple_value("loss", number + s / 3.0)])
                for s in range(120)
            ],
        )
    return root


def failing(monkeypatch: pytest.MonkeyPatch, sqlstates: dict[int, str]) -> list[Any]:
    """Make the Nth bulk insert (1-based) raise the server error with ``sqlstates[N]``;
    returns the (step, value) of the first row of every call seen (ids differ between
    attempts: a server's sequences do not roll back)."""
    import psycopg.errors

    errors = {
        "40P01": psycopg.errors.DeadlockDetected,
        "40001": psycopg.errors.SerializationFailure,
    }
    calls: list[Any] = []
    real = _INSERT_POINTS

    def insert_points(
        self: PostgresBulk, dbapi: Any, table: str, rows: Any, fresh: bool = False
    ) -> int:
        first = next(iter(rows))
        calls.append((first[1], first[-1]))
        state = sqlstates.get(len(calls))
        if state is not None:
            raise errors[state](f"injected {state}")
        return real(self, dbapi, table, rows, fresh)

    monkeypatch.setattr(PostgresBulk, "insert_points", insert_points)
    return calls


@pytest.mark.parametrize("make_store", ["postgresql"], indirect=True)
def test_a_deadlock_victim_chunk_is_applied_again(
    tmp_path: Path, make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = logdir_of_chunks(tmp_path / "logs")
    clean = make_store(tmp_path, "clean")
    inserts = failing(monkeypatch, {})
    convert(logdir, clean, chunk_points=50, progress=False)
    # Chunks of 99 and 21 points a file (a chunk closes on the first block that reaches 50
    # points, and the first block's file_version record has none); the 21 share a
    # transaction with the next file's 99, and a group's rows go in with one insert:
    # groups a1 | a2 b1 | b2.
    assert len(inserts) == 3
    store = make_store(tmp_path, "victim")
    # Inserts fail on calls 2 and 3 (the group a2 b1): both kinds of victim, inside a group
    # of two files, and twice in a row.
    calls = failing(monkeypatch, {2: "40P01", 3: "40001"})
    summary = convert(logdir, store, chunk_points=50, progress=False)
    assert summary.points == {"scalars": 240}
    # Each failed attempt, then its whole group again from its first chunk (a2).
    a1, a2_b1, b2 = inserts
    assert calls == [a1, a2_b1, a2_b1, a2_b1, b2]
    assert comparable_rows(store) == comparable_rows(clean)
    assert file_states(store) == file_states(clean)


@pytest.mark.parametrize("make_store", ["postgresql"], indirect=True)
def test_a_chunk_that_keeps_failing_is_an_error_after_five_attempts(
    tmp_path: Path, make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = logdir_of_chunks(tmp_path / "logs")
    store = make_store(tmp_path, "victim")
    calls = failing(monkeypatch, dict.fromkeys(range(1, 100), "40001"))
    with pytest.raises(StoreError, match="database error: injected 40001"):
        convert(logdir, store, chunk_points=50, progress=False)
    assert len(calls) == 5
    # Nothing of the failed chunk was committed; a run without the fault completes the store.
    monkeypatch.undo()
    clean = make_store(tmp_path, "clean")
    convert(logdir, clean, chunk_points=50, progress=False)
    convert(logdir, store, chunk_points=50, progress=False)
    assert comparable_rows(store) == comparable_rows(clean)
