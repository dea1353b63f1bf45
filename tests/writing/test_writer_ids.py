"""SQLite's writer gives new runs, series and files their ids itself and inserts them when the
transaction ends (``writing.identities``, issue #14).  Over any history (the rules of
``test_invariant_property``: files grown, cut, replaced, deleted, runs renamed, conversions
under any options, stopped after any commit), the store it leaves is the one that inserting
each row at once leaves: every table, id for id.

Two stores follow one logdir through the same history: one written as the converter writes,
one with ``Identities`` inserting each new row as it is made (as on a server).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from tbconvert import convert
from tbconvert.reading import chunks
from tbconvert.rows import SeriesDefinition
from tbconvert.store.engine import create_store_engine, store_url
from tbconvert.store.file_states import FileState
from tbconvert.store.migrate import ensure_schema
from tbconvert.writing import writer as writer_module
from tbconvert.writing.identities import Identities
from tbconvert.writing.writer import StoreWriter
from tests.conftest import REAL_BY_RECORD_BYTES
from tests.safety.test_invariant_property import CHUNK_POINTS, SELECTIONS, History, crash_after
from tests.support.snapshots import StoreFactory, connect, rows

# Every table but the conversions log, in id order; the time a file's state was saved is not
# compared (it is the clock's).
TABLES = {
    "runs": "SELECT * FROM runs ORDER BY id",
    "contexts": "SELECT * FROM contexts ORDER BY id",
    "series": "SELECT * FROM series ORDER BY id",
    "event_files": (
        "SELECT id, run_id, context_id, path, size, mtime_ns, head_digest, offset_consumed, "
        "records, damaged_records, status, last_error, first_wall_time, last_wall_time, "
        "selection FROM event_files ORDER BY id"
    ),
    "blobs": "SELECT * FROM blobs ORDER BY id",
    "series_summaries": "SELECT * FROM series_summaries ORDER BY series_id, point_table",
    **{
        table: f"SELECT * FROM {table} ORDER BY series_id, step, file_id, record_offset"
        for table in ("scalars", "texts", "images", "histograms", "params", "audio", "tensors")
    },
}


class _Inserting(Identities):
    """Identities that insert every new row at once, as the writer does on a server."""

    def __init__(self, *args: Any, allocate: bool = False) -> None:
        super().__init__(*args, allocate=False)


@contextmanager
def inserting_at_once() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "Identities", _Inserting)
        yield


def tables(store: str) -> dict[str, list[tuple[Any, ...]]]:
    with connect(store) as connection:
        return {name: rows(connection, sql) for name, sql in TABLES.items()}


class TwoWriters(History):
    """The history of ``History``, written into two stores, one of them inserting at once."""

    def __init__(self) -> None:
        super().__init__()
        self.inserting = self.factory(self.root, "inserting")

    @rule(
        selection=SELECTIONS,
        flat=st.booleans(),
        crash=st.none() | st.integers(1, 40),
        full=st.booleans(),
        batches=st.booleans(),
    )
    def convert_some_way(  # type: ignore[override]
        self,
        selection: dict[str, Any],
        flat: bool,
        crash: int | None,
        full: bool,
        batches: bool,
    ) -> None:
        by_record_bytes = REAL_BY_RECORD_BYTES if batches else chunks._BY_RECORD_BYTES
        ways: tuple[tuple[str, AbstractContextManager[Any]], ...] = (
            (self.store, nullcontext()),
            (self.inserting, inserting_at_once()),
        )
        for store, way in ways:
            with crash_after(crash), pytest.MonkeyPatch.context() as patch:
                patch.setattr(chunks, "_BY_RECORD_BYTES", by_record_bytes)
                with way:
                    convert(
                        self.logdir,
                        store,
                        flat=flat,
                        full=full and crash is None,
                        chunk_points=CHUNK_POINTS,
                        progress=False,
                        **selection,
                    )
        assert tables(self.store) == tables(self.inserting)

    def _check(self, flat: bool) -> None:
        """A plain conversion of both (the check rule, and the end of every history)."""
        self.convert_some_way({}, flat, None, False, True)


def test_ids_given_by_the_writer_are_those_inserting_at_once_gives() -> None:
    TwoWriters.factory = StoreFactory("sqlite", None)  # only SQLite's writer gives ids
    run_state_machine_as_test(
        TwoWriters,
        settings=settings(
            settings.default,
            max_examples=60,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_an_id_freed_in_the_transaction_is_given_again(tmp_path: Path) -> None:
    """A row deleted in the transaction that made it frees its id, as SQLite's own choice
    (the largest id plus one) would: the next new run and series take the same ids."""
    engine = create_store_engine(store_url(str(tmp_path / "store.db")))
    ensure_schema(engine, allow_upgrade=None)
    writer = StoreWriter(engine)
    try:
        made = []
        with writer.transaction():
            for tag in ("loss", "acc"):
                writer.lock_runs("src", ["r"])
                run = writer.run_id("src", "r", host="h", logdir="/l", group_path=".", name="r")
                context = writer.context_id("")
                definition = SeriesDefinition(0, tag, "scalars", "float32", None, None, None)
                (series,) = writer.series_ids(run, context, [definition])
                made.append((run, series))
                # Neither has points or files: both go again.
                writer.drop_empty(run, context)
        with connect(str(tmp_path / "store.db")) as connection:
            assert rows(connection, "SELECT count(*) FROM series") == [(0,)]
    finally:
        writer.close()
        engine.dispose()
    assert made[0] == made[1]


@settings(max_examples=80, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from(list(FileState.__dataclass_fields__)),
        st.one_of(st.none(), st.integers(0, 9), st.text(max_size=3), st.floats()),
        max_size=6,
    )
)
def test_a_file_state_updated_is_the_one_dataclasses_replace_makes(changes: dict) -> None:
    state = FileState(1, 2, 3, "run/events", size=5, status="ok", head_digest="ab")
    before = repr(state)
    assert repr(state.updated(**changes)) == repr(replace(state, **changes))
    assert repr(state) == before  # the original is left as it was


def test_a_file_state_refuses_an_update_of_no_field() -> None:
    state = FileState(1, 2, 3, "run/events")
    with pytest.raises(TypeError, match="offest_consumed"):
        state.updated(offest_consumed=1)
