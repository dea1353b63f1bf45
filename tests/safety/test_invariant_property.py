"""A stateful property test of design §7: over random histories, one plain conversion leaves the
store equal to a clean conversion of the logdir as it is now.

Rules grow files by any number of bytes (cutting records anywhere), truncate, replace, touch,
delete and add files and runs, rename run directories, convert a directory inside the logdir
or around it into the same store, and convert with random ``--plugins``,
``--tag``, ``--exclude-tag``, ``--run``, ``--layout``, ``--flat`` and ``--jobs``, sometimes
stopped right after a random commit.  The check (a rule, and the end of every history) runs
one plain conversion in a mode and compares every view, and the state of every present file,
with a clean conversion into a fresh store in that mode; rows of deleted files (kept as
``gone``) are left out of the comparison.

Bounded for CI; ``pytest --hypothesis-profile=invariant-long`` runs long histories.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.plugins.hparams import summary_v2 as hparams_summary
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert import convert
from tbconvert.conversion.options import ConvertTuning
from tbconvert.reading.layouts import PARAMS_SIDECARS
from tbconvert.reading.tuning import ReadTuning
from tbconvert.writing.writer import StoreWriter
from tests.conversion.test_invariant import Crash, text_value
from tests.support.eventfiles import file_version_event, simple_value, summary_event
from tests.support.snapshots import (
    StoreFactory,
    assert_current_summaries_exact,
    assert_run_params_exact,
    connect,
    rows,
    view_rows,
    views_without_gone,
    without_run_ids,
)

# Slow (random histories of a logdir, converted again): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

# Directories files go into: the logdir and a group (orphans), runs, contexts, a nested run (a
# context with --layout aim, a run with --flat), a PyTorch add_scalars sub-writer of r0 (a
# context once its first values are all "loss"); renamed run directories get the names of
# RENAMES.
DIRECTORIES = (
    "",
    "grp",
    "r0",
    "r0/loss_train",
    "r1",
    "r1/train",
    "grp/r2",
    "grp/r3",
    "grp/r3/eval/deep",
    "r1/eval",
)
# How directories become runs: the layouts, and --flat.
MODES = ("auto", "aim", "flat")
RENAMES = {"r0": "r9", "r9": "r0", "grp": "grq", "grq": "grp"}
NAMES = ("events.out.tfevents.1.h", "events.out.tfevents.2.h", "events.out.tfevents.3.h")
CHUNK_POINTS = 7
SELECTIONS = st.fixed_dictionaries(
    {},
    optional={
        "plugins": st.sampled_from([["scalars"], ["text"], ["scalars", "text"], ["images"]]),
        "tags": st.sampled_from([["loss"], ["l*"], ["notes", "acc"]]),
        "exclude_tags": st.sampled_from([["acc"], ["*s"]]),
        "runs": st.sampled_from([["r*"], ["grp*"], ["r1"]]),
    },
)
FILE_COLUMNS = (
    "f.path, r.run_path, c.name, f.status, f.size, f.mtime_ns, f.head_digest, "
    "f.offset_consumed, f.records, f.damaged_records, f.selection"
)
histories = [0]


def mode_options(mode: str) -> dict[str, Any]:
    """``convert``'s keywords for a mode of :data:`MODES`."""
    return {"flat": True} if mode == "flat" else {"layout": mode}


INVARIANT_LONG = "invariant-long"


def records(seed: int, count: int, first: bool) -> bytes:
    """``count`` framed Events: steps that repeat and go back, scalars and text, and now and
    then a ``SessionLog`` (START drops the points before it at or after its step) or an
    hparams session (a params row per key, which a selection ranks by context, step and
    place, and which hides a sidecar's key)."""
    rng = random.Random(seed)
    # Its own draws, so that the other records of a seed stay what they were.
    sessions = random.Random(seed + 1)
    buffer = io.BytesIO()
    writer = RecordWriter(buffer)
    if first:
        writer.write(file_version_event(1e9 + seed % 1000).SerializeToString())
    for _ in range(count):
        values = []
        if rng.random() < 0.8:
            values.append(simple_value("loss", rng.choice([rng.random(), float("nan"), 1.0])))
        if rng.random() < 0.5:
            values.append(simple_value("acc", rng.random()))
        if rng.random() < 0.3:
            values.append(text_value("notes", f"n{rng.randrange(5)}"))
        event = summary_event(rng.randrange(12), 1e9 + rng.randrange(100), values)
        if rng.random() < 0.05:
            status = rng.choice([SessionLog.START, SessionLog.STOP])
            event = Event(step=event.step, wall_time=event.wall_time)
            event.session_log.status = status
        writer.write(event.SerializeToString())
        if sessions.random() < 0.1:
            session = {"lr": sessions.choice([0.1, 0.5, 2]), "opt": sessions.choice("ab")}
            summary = hparams_summary.hparams_pb(session, start_time_secs=1e9)
            writer.write(Event(step=event.step, wall_time=1e9, summary=summary).SerializeToString())
    return buffer.getvalue()


@contextmanager
def crash_after(commits: int | None) -> Iterator[None]:
    """Stop the conversion right after its ``commits``-th commit (None: never)."""
    if commits is None:
        yield
        return
    original = StoreWriter.transaction
    made = [0]

    @contextmanager
    def transaction(writer: StoreWriter) -> Iterator[None]:
        with original(writer):
            yield
        made[0] += 1
        if made[0] == commits:
            raise Crash

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StoreWriter, "transaction", transaction)
        with suppress(Crash):
            yield


def file_rows(store: str) -> list[tuple[Any, ...]]:
    with connect(store) as connection:
        return sorted(
            rows(
                connection,
                f"SELECT {FILE_COLUMNS} FROM event_files AS f JOIN runs AS r ON r.id = f.run_id "
                "JOIN contexts AS c ON c.id = f.context_id WHERE f.status <> 'gone'",
            ),
            key=repr,
        )


class History(RuleBasedStateMachine):
    """One logdir and one store, through a random history."""

    factory: ClassVar[StoreFactory]

    def __init__(self) -> None:
        super().__init__()
        histories[0] += 1
        self.root = Path(tempfile.mkdtemp(prefix="tbconvert-history-"))
        self.logdir = self.root / "logs"
        self.logdir.mkdir()
        self.store = self.factory(self.root, "history")
        # What each file's writer has written, of which the file holds a prefix.
        self.written: dict[str, bytes] = {}
        self.cleans = 0
        self.final_mode = "auto"

    @initialize(mode=st.sampled_from(MODES))
    def choose_final_mode(self, mode: str) -> None:
        self.final_mode = mode

    def _write(self, path: str, length: int) -> None:
        target = self.logdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.written[path][:length])

    def _size(self, path: str) -> int:
        return (self.logdir / path).stat().st_size

    @rule(
        directory=st.sampled_from(DIRECTORIES),
        name=st.sampled_from(NAMES),
        seed=st.integers(0, 2**31),
        count=st.integers(0, 30),
        cut=st.integers(0, 40),
    )
    def add_or_replace_file(
        self, directory: str, name: str, seed: int, count: int, cut: int
    ) -> None:
        path = f"{directory}/{name}" if directory else name
        for old, new in RENAMES.items():  # a renamed run's directory
            if path.startswith(old + "/") and any(p.startswith(new + "/") for p in self.written):
                path = new + path[len(old) :]
                break
        self.written[path] = records(seed, count, first=True)
        self._write(path, max(len(self.written[path]) - cut, 0))

    @precondition(lambda self: self.written)
    @rule(data=st.data(), seed=st.integers(0, 2**31), count=st.integers(0, 20))
    def grow(self, data: st.DataObject, seed: int, count: int) -> None:
        path = data.draw(st.sampled_from(sorted(self.written)))
        self.written[path] += records(seed, count, first=False)
        size = self._size(path)
        self._write(path, data.draw(st.integers(size, len(self.written[path]))))

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.written)))
        self._write(path, data.draw(st.integers(0, self._size(path))))

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        path = self.logdir / data.draw(st.sampled_from(sorted(self.written)))
        stat = path.stat()
        path.touch()
        if path.stat().st_mtime_ns == stat.st_mtime_ns:
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.written)))
        (self.logdir / path).unlink()
        del self.written[path]

    @rule(
        directory=st.sampled_from(("r0", "r1", "r1/train", "grp/r2")),
        name=st.sampled_from(sorted(PARAMS_SIDECARS)),
        lr=st.none() | st.sampled_from([0.1, 0.5, 2]),
    )
    def write_or_remove_params_sidecar(self, directory: str, name: str, lr: float | None) -> None:
        """A sidecar of params beside a run's files (``lr`` None: removed): its keys show
        where no event file of the run holds them."""
        target = self.logdir / directory / name
        if lr is None:
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"lr": lr, "seed": 3}))  # YAML reads JSON too

    @rule(old=st.sampled_from(sorted(RENAMES)))
    def rename_run_directory(self, old: str) -> None:
        new = RENAMES[old]
        if not (self.logdir / old).exists() or (self.logdir / new).exists():
            return
        (self.logdir / old).rename(self.logdir / new)
        self.written = {
            (new + path[len(old) :] if path.startswith(old + "/") else path): content
            for path, content in self.written.items()
        }

    @rule(
        selection=SELECTIONS,
        mode=st.sampled_from(MODES),
        jobs=st.sampled_from([1, 1, 2]),
        crash=st.none() | st.integers(1, 40),
        full=st.booleans(),
        batches=st.booleans(),
    )
    def convert_some_way(
        self,
        selection: dict[str, Any],
        mode: str,
        jobs: int,
        crash: int | None,
        full: bool,
        batches: bool,
    ) -> None:
        # Small files read in batches (small_files), or each on its own as the suite does.
        tuning = ConvertTuning(read=ReadTuning()) if batches else ConvertTuning()
        with crash_after(crash):
            convert(
                self.logdir,
                self.store,
                jobs=jobs,
                full=full and crash is None,
                chunk_points=CHUNK_POINTS,
                progress=False,
                tuning=tuning,
                **mode_options(mode),
                **selection,
            )

    @rule(data=st.data(), mode=st.sampled_from(MODES), crash=st.none() | st.integers(1, 10))
    def convert_a_nested_logdir(self, data: st.DataObject, mode: str, crash: int | None) -> None:
        """Convert a directory of the logdir that holds files, or the directory around the
        logdir, into the same store: the next conversion of the logdir takes their files
        over (issue #44)."""
        self.convert_nested(self.nested_logdir(data), self.store, mode, crash)

    def nested_logdir(self, data: st.DataObject) -> Path:
        """A directory of the logdir that holds files, or the one around it."""
        inside = {str(Path(path).parent) for path in self.written} - {"."}
        directory = data.draw(st.sampled_from(["..", *sorted(inside)]))
        return self.root if directory == ".." else self.logdir / directory

    @staticmethod
    def convert_nested(nested: Path, store: str, mode: str, crash: int | None) -> None:
        with crash_after(crash):
            convert(nested, store, chunk_points=CHUNK_POINTS, progress=False, **mode_options(mode))

    @rule(mode=st.sampled_from(MODES))
    def plain_run_equals_a_clean_one(self, mode: str) -> None:
        self._check(mode)

    def teardown(self) -> None:
        try:
            self._check(self.final_mode)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _check(self, mode: str) -> None:
        convert(self.logdir, self.store, progress=False, **mode_options(mode))
        # The current summaries the history's writes kept, beside the clean store's.
        with closing(connect(self.store)) as connection:
            assert_current_summaries_exact(connection)
            assert_run_params_exact(connection)
        self.cleans += 1
        clean = self.factory(self.root, f"clean{self.cleans}")
        convert(self.logdir, clean, progress=False, **mode_options(mode))
        assert without_run_ids(views_without_gone(self.store)) == without_run_ids(view_rows(clean))
        assert file_rows(self.store) == file_rows(clean)


def test_any_history_then_a_plain_run_equals_a_clean_conversion(
    make_store: StoreFactory,
) -> None:
    long = settings.default is settings.get_profile(INVARIANT_LONG)
    examples = {"sqlite": 40, "postgresql": 8}[make_store.backend]
    History.factory = make_store
    before = histories[0]
    run_state_machine_as_test(
        History,
        settings=settings(
            settings.default,
            max_examples=settings.default.max_examples if long else examples,
            stateful_step_count=settings.default.stateful_step_count if long else 12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(f"histories run ({make_store.backend}): {histories[0] - before}")
