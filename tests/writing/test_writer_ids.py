"""SQLite's writer gives new runs, series and files their ids itself and inserts them when the
transaction ends (``writing.identities``, issue #14).  Over any history (the rules of
``test_invariant_property``: files grown, cut, replaced, deleted, runs renamed, conversions
under any options, stopped after any commit), the store it leaves is the one that inserting
each row at once leaves: every table, id for id.

Two stores follow one logdir through the same history: one written as the converter writes,
one with ``Identities`` inserting each new row as it is made (as on a server).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test
from PIL import Image
from tensorboard.compat.proto.summary_pb2 import Summary

from tbconvert import convert
from tbconvert.conversion.options import ConvertTuning
from tbconvert.reading.tuning import ReadTuning
from tbconvert.rows import SeriesDefinition
from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tbconvert.store.file_states import FileState
from tbconvert.store.migrate import ensure_schema
from tbconvert.writing import writer as writer_module
from tbconvert.writing.identities import Identities
from tbconvert.writing.writer import StoreWriter
from tests.safety.test_invariant_property import (
    CHUNK_POINTS,
    MODES,
    SELECTIONS,
    History,
    crash_after,
    mode_options,
)
from tests.support.eventfiles import summary_event, write_events
from tests.support.snapshots import StoreFactory, connect, rows, sqlite_rows

FILE = "events.out.tfevents.1.h"

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


@contextmanager
def inserting_at_once() -> Iterator[None]:
    """SQLite's writer with the server's strategy: every new row inserted at once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "AllocatingIdentities", Identities)
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
        mode=st.sampled_from(MODES),
        crash=st.none() | st.integers(1, 40),
        full=st.booleans(),
        batches=st.booleans(),
    )
    def convert_some_way(  # type: ignore[override]
        self,
        selection: dict[str, Any],
        mode: str,
        crash: int | None,
        full: bool,
        batches: bool,
    ) -> None:
        tuning = ConvertTuning(read=ReadTuning()) if batches else ConvertTuning()
        ways: tuple[tuple[str, AbstractContextManager[Any]], ...] = (
            (self.store, nullcontext()),
            (self.inserting, inserting_at_once()),
        )
        for store, way in ways:
            with crash_after(crash), way:
                convert(
                    self.logdir,
                    store,
                    full=full and crash is None,
                    chunk_points=CHUNK_POINTS,
                    progress=False,
                    tuning=tuning,
                    **mode_options(mode),
                    **selection,
                )
        assert tables(self.store) == tables(self.inserting)

    @rule(data=st.data(), mode=st.sampled_from(MODES), crash=st.none() | st.integers(1, 10))
    def convert_a_nested_logdir(self, data: st.DataObject, mode: str, crash: int | None) -> None:
        """The same directory inside or around the logdir, converted into both stores."""
        nested = self.nested_logdir(data)
        self.convert_nested(nested, self.store, mode, crash)
        with inserting_at_once():
            self.convert_nested(nested, self.inserting, mode, crash)
        assert tables(self.store) == tables(self.inserting)

    def _check(self, mode: str) -> None:
        """A plain conversion of both (the check rule, and the end of every history)."""
        self.convert_some_way({}, mode, None, False, True)


@pytest.mark.slow  # many histories, each followed by two writers
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
                run = writer.identities.run_id(
                    "src", "r", host="h", logdir="/l", group_path=".", name="r"
                )
                context = writer.identities.context_id("")
                definition = SeriesDefinition(0, tag, "scalars", "float32", None, None, None)
                (series,) = writer.identities.series_ids(run, context, [definition])
                made.append((run, series))
                # Neither has points or files: both go again.
                writer.files.drop_empty(run, context)
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


@pytest.mark.mutant_gap
def test_ids_made_in_a_rolled_back_transaction_are_not_reused(tmp_path: Path) -> None:
    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    writer = StoreWriter(engine)
    try:
        series = SeriesDefinition(0, "loss", "scalars", "float32", None, None, None)
        with pytest.raises(RuntimeError), writer.transaction():
            run = writer.identities.run_id(
                "src", "r", host="h", logdir="/l", group_path="", name="r"
            )
            writer.identities.series_ids(run, writer.identities.context_id("train"), [series])[0]
            writer.insert_blobs({"ab" * 32: b"bytes"})
            raise RuntimeError("the chunk fails: everything above rolls back")
        with writer.transaction():
            run = writer.identities.run_id(
                "src", "r", host="h", logdir="/l", group_path="", name="r"
            )
            context = writer.identities.context_id("train")
            series_id = writer.identities.series_ids(run, context, [series])[0]
            writer.insert_blobs({"ab" * 32: b"bytes"})
        again = writer.identities.series_ids(run, context, [series])[0]
    finally:
        writer.close()
        engine.dispose()
    assert again == series_id
    assert sqlite_rows(tmp_path / "s.db", "SELECT id, name FROM runs") == [(run, "r")]
    assert sqlite_rows(tmp_path / "s.db", "SELECT id, name FROM contexts") == [(context, "train")]
    assert sqlite_rows(tmp_path / "s.db", "SELECT id, run_id, context_id FROM series") == [
        (series_id, run, context)
    ]
    assert sqlite_rows(tmp_path / "s.db", "SELECT sha256, size, data FROM blobs") == [
        ("ab" * 32, 5, b"bytes")
    ]


@pytest.mark.mutant_gap
def test_rows_dropped_as_empty_are_made_again_not_reused_from_the_cache(tmp_path: Path) -> None:
    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    writer = StoreWriter(engine)
    loss = SeriesDefinition(0, "loss", "scalars", "float32", None, None, None)
    acc = SeriesDefinition(1, "acc", "scalars", "float32", None, None, None)
    names = {"host": "h", "logdir": "/l", "group_path": ""}
    try:
        with writer.transaction():
            # Run "kept" keeps a file, so only its series goes; run "gone" goes whole.
            kept = writer.identities.run_id("src", "kept", name="kept", **names)
            gone = writer.identities.run_id("src", "gone", name="gone", **names)
            context = writer.identities.context_id("train")
            writer.files.save(FileState(None, kept, context, "kept/f"))
            old_series = [
                writer.identities.series_ids(run, context, [loss])[0] for run in (kept, gone)
            ]
            other = writer.identities.series_ids(kept, writer.identities.context_id("eval"), [acc])[
                0
            ]
            writer.files.drop_empty(kept, context)
            writer.files.drop_empty(gone, context)
            again = writer.identities.run_id("src", "gone", name="gone", **names)
            new_series = [
                writer.identities.series_ids(run, context, [loss])[0] for run in (kept, again)
            ]
            assert (
                writer.identities.series_ids(kept, writer.identities.context_id("eval"), [acc])[0]
                == other
            )
    finally:
        writer.close()
        engine.dispose()
    runs = sqlite_rows(tmp_path / "s.db", "SELECT id, run_path FROM runs ORDER BY run_path")
    assert runs == [(again, "gone"), (kept, "kept")]
    series = sqlite_rows(tmp_path / "s.db", "SELECT id, run_id, name FROM series ORDER BY id")
    assert series == sorted(
        [(other, kept, "acc")]
        + [(new, run, "loss") for new, run in zip(new_series, (kept, again), strict=True)]
    )
    # (SQLite may hand a deleted row's id out again: the rows, not the ids, tell.)
    assert len(old_series) == 2 and gone


@pytest.mark.mutant_gap
def test_image_and_audio_rows_keep_every_column_around_their_blob(tmp_path: Path) -> None:
    # The writer swaps each row's blob digest for the blob's id: the columns on either
    # side of it must come through unchanged.
    picture = io.BytesIO()
    Image.new("RGB", (3, 2), (200, 10, 10)).save(picture, format="PNG")
    image = Summary.Image(encoded_image_string=picture.getvalue(), width=3, height=2)
    sound = Summary.Audio(
        sample_rate=8000.0,
        num_channels=1,
        length_frames=4,
        encoded_audio_string=b"RIFF-not-checked",
        content_type="audio/wav",
    )
    values = [Summary.Value(tag="picture", image=image), Summary.Value(tag="sound", audio=sound)]
    write_events(tmp_path / "logs" / "run" / FILE, [summary_event(4, 8.0, values)])
    convert(tmp_path / "logs", tmp_path / "s.db")
    assert sqlite_rows(
        tmp_path / "s.db", "SELECT tag, step, idx, format, width, height, data FROM v_images"
    ) == [("picture", 4, 0, "PNG", 3, 2, picture.getvalue())]  # Pillow's name
    assert sqlite_rows(
        tmp_path / "s.db", "SELECT tag, step, idx, sample_rate, data FROM v_audio"
    ) == [("sound", 4, 0, 8000.0, b"RIFF-not-checked")]
    assert sqlite_rows(
        tmp_path / "s.db", "SELECT num_channels, length_frames, content_type FROM audio"
    ) == [(1, 4, "audio/wav")]
