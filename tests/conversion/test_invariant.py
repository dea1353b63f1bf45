"""The store is a function of the logdir (design §7, issue #13): whatever happened before, one
plain conversion leaves every view equal to one clean conversion of the logdir as it is now.

One regression test per way the history used to leak into the store: a conversion stopped
inside a multi-chunk file, a filtered conversion followed by a plain one, a file whose
(run, context) changed (``--flat`` switched, a run directory renamed).  Crashes are injected
from the test (a transaction that commits, then the "process" stops), never by the product.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from tbconvert import convert
from tbconvert.writing.writer import StoreWriter
from tests.support.eventfiles import (
    append_events,
    scalar_events,
    simple_value,
    summary_event,
    write_events,
)
from tests.support.snapshots import (
    StoreFactory,
    connect,
    file_states,
    rows,
    view_rows,
    views_without_gone,
    without_run_ids,
)

Clean = Callable[..., dict]  # (logdir, **options) -> the views of a clean conversion
FILE = "events.out.tfevents.1.h"


class Crash(BaseException):
    """The converter "process" dying right after a commit (not an Exception: nothing may
    catch it on the way out, as nothing survives a kill -9)."""


@contextmanager
def crash_after_chunks(monkeypatch: pytest.MonkeyPatch, chunks: int) -> Iterator[None]:
    """Let ``chunks`` transactions that insert points commit, then stop the conversion."""
    transaction, insert_points = StoreWriter.transaction, StoreWriter.insert_points
    inserting = [False]
    committed = [0]

    @contextmanager
    def counted(writer: StoreWriter) -> Iterator[None]:
        inserting[0] = False
        with transaction(writer):
            yield
        committed[0] += inserting[0]
        if committed[0] >= chunks:
            raise Crash

    def noted(writer: StoreWriter, table: str, rows: Any, **options: Any) -> None:
        inserting[0] = True
        insert_points(writer, table, rows, **options)

    with monkeypatch.context() as patch:
        patch.setattr(StoreWriter, "transaction", counted)
        patch.setattr(StoreWriter, "insert_points", noted)
        yield


def text_value(tag: str, words: str) -> Summary.Value:
    tensor = TensorProto(dtype=7)
    tensor.tensor_shape.SetInParent()
    tensor.string_val.append(words.encode())
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    return Summary.Value(tag=tag, tensor=tensor, metadata=metadata)


def mixed_events(steps: range, base: float = 1000.0) -> list[Any]:
    return [
        summary_event(
            step,
            base + step,
            [
                simple_value("loss", 1.0 / (step + 1)),
                simple_value("loss_aux", step * 0.5),
                simple_value("accuracy", step * 0.01),
                text_value("notes", f"step {step}"),
            ],
        )
        for step in steps
    ]


@pytest.fixture
def clean(make_store: StoreFactory, tmp_path: Path) -> Clean:
    """The views of one conversion of a logdir into a fresh store (run ids left out: they
    number runs in the order a store first met them)."""
    names = (f"clean{i}" for i in itertools.count())

    def views(logdir: Path, **options: Any) -> dict:
        store = make_store(tmp_path, next(names))
        convert(logdir, store, **options)
        return without_run_ids(view_rows(store))

    return views


def current(store: str) -> dict:
    return without_run_ids(view_rows(store))


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_events(root / "run_a" / "events.out.tfevents.1.host", mixed_events(range(120)))
    write_events(root / "run_b" / "events.out.tfevents.1.host", mixed_events(range(40), 5000.0))
    return root


# --------------------------------------------------------------------------- item 1


def test_stopped_inside_a_multi_chunk_file_then_rerun_equals_clean(
    logdir: Path, store: str, clean: Clean, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stop after the second chunk of run_a's file, whose 480 points make ten chunks.
    with pytest.raises(Crash), crash_after_chunks(monkeypatch, 2):
        convert(logdir, store, chunk_points=50)
    states = file_states(store)
    assert (
        states["run_a/events.out.tfevents.1.host"][1]
        < (logdir / "run_a" / "events.out.tfevents.1.host").stat().st_size
    ), "the stop did not interrupt the file"
    again = convert(logdir, store)
    assert again.files_unchanged == 0
    assert current(store) == clean(logdir)
    assert convert(logdir, store).files_unchanged == 2


def test_a_partly_read_file_is_never_planned_unchanged(
    logdir: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Crash), crash_after_chunks(monkeypatch, 2):
        convert(logdir, store, chunk_points=50)
    plan = {item["path"]: item["action"] for item in convert(logdir, store, dry_run=True).plan}
    assert plan["run_a/events.out.tfevents.1.host"] == "append"
    assert plan["run_b/events.out.tfevents.1.host"] == "new"


# --------------------------------------------------------------------------- item 2


@pytest.mark.parametrize(
    "options",
    [
        {"plugins": ["text"]},
        {"tags": ["loss*"]},
        {"exclude_tags": ["loss*"]},
        {"plugins": ["scalars"], "tags": ["acc*"]},
    ],
    ids=["plugins", "tag", "exclude-tag", "plugins-and-tag"],
)
def test_filtered_then_plain_reads_what_is_missing(
    logdir: Path, store: str, clean: Clean, options: dict
) -> None:
    first = convert(logdir, store, **options)
    assert 0 < first.total_points < 160 * 4
    plain = convert(logdir, store)
    assert plain.files_unchanged == 0 and plain.files_read == 2
    assert current(store) == clean(logdir)
    assert convert(logdir, store).files_unchanged == 2


def test_a_covering_selection_skips_and_another_one_keeps_what_is_stored(
    logdir: Path, store: str, clean: Clean
) -> None:
    convert(logdir, store, plugins=["text"], tags=["notes"])
    texts = view_rows(store)["v_texts"]
    assert len(texts) == 160
    assert convert(logdir, store, plugins=["text"], tags=["notes"]).files_unchanged == 2
    # A selection the stored one does not cover reads again, and drops nothing.
    other = convert(logdir, store, tags=["loss*"])
    assert other.files_read == 2 and other.points["scalars"] == 320
    assert view_rows(store)["v_texts"] == texts
    assert convert(logdir, store).files_read == 2  # stored under loss*: read for the rest
    assert current(store) == clean(logdir)
    assert convert(logdir, store, tags=["loss"]).files_unchanged == 2


def test_a_file_grown_under_a_narrower_selection_is_completed_by_a_plain_run(
    logdir: Path, store: str, clean: Clean
) -> None:
    from tests.support.eventfiles import append_events

    convert(logdir, store)
    append_events(logdir / "run_a" / "events.out.tfevents.1.host", mixed_events(range(120, 150)))
    convert(logdir, store, plugins=["text"])
    convert(logdir, store)
    assert current(store) == clean(logdir)


# --------------------------------------------------------------------------- item 3


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """Directories two deep: by default ``exp`` is a run with contexts ``train`` and
    ``eval``; with ``--flat`` they are runs ``exp/train`` and ``exp/eval`` of group ``exp``."""
    root = tmp_path / "nested"
    write_events(root / "exp" / "train" / "events.out.tfevents.1.host", mixed_events(range(30)))
    write_events(root / "exp" / "eval" / "events.out.tfevents.1.host", mixed_events(range(10)))
    write_events(root / "solo" / "events.out.tfevents.1.host", mixed_events(range(5)))
    return root


@pytest.mark.parametrize(
    "first_flat", [False, True], ids=["default-then-flat", "flat-then-default"]
)
def test_switching_flat_moves_files_instead_of_doubling_them(
    nested: Path, store: str, clean: Clean, first_flat: bool
) -> None:
    convert(nested, store, flat=first_flat)
    second = convert(nested, store, flat=not first_flat)
    assert second.files_gone == 0
    assert current(store) == clean(nested, flat=not first_flat)
    with connect(store) as connection:
        statuses = rows(connection, "SELECT status FROM event_files")
        run_paths = sorted(row[0] for row in rows(connection, "SELECT run_path FROM runs"))
    assert {status for (status,) in statuses} == {"ok"} and len(statuses) == 3
    assert run_paths == (["exp", "solo"] if first_flat else ["exp/eval", "exp/train", "solo"])
    # And back again.
    convert(nested, store, flat=first_flat)
    assert current(store) == clean(nested, flat=first_flat)


def test_renamed_run_directory_keeps_the_old_path_as_gone(
    logdir: Path, store: str, clean: Clean
) -> None:
    convert(logdir, store)
    (logdir / "run_b").rename(logdir / "run_renamed")
    second = convert(logdir, store)
    assert second.files_gone == 1
    assert without_run_ids(views_without_gone(store)) == clean(logdir)


# --------------------------------------------------------------------------- last point


def test_last_point_does_not_depend_on_the_order_files_were_met(
    tmp_path: Path, store: str, clean: Clean
) -> None:
    """Two files of a series end at the same step: the last point is the one of the file
    later in name order, whichever file the store met first."""
    run = tmp_path / "logs" / "run"
    later = run / "events.out.tfevents.2.host"
    write_events(later, [summary_event(s, 2000.0 + s, [simple_value("x", 2.0)]) for s in range(5)])
    convert(tmp_path / "logs", store)
    earlier = run / "events.out.tfevents.1.host"
    write_events(
        earlier, [summary_event(s, 1000.0 + s, [simple_value("x", 1.0)]) for s in range(5)]
    )
    convert(tmp_path / "logs", store)
    views = current(store)
    assert views == clean(tmp_path / "logs")
    assert [row[-1] for row in views["v_last_scalars"]] == [2.0]


# --------------------------------------------------------------------------- item 4


def test_a_logdir_through_a_symlink_is_its_target(
    logdir: Path, store: str, clean: Clean, tmp_path: Path
) -> None:
    link = tmp_path / "latest"
    link.symlink_to(logdir, target_is_directory=True)
    first = convert(link, store)
    assert first.logdir == str(logdir)
    second = convert(logdir, store)
    assert second.files_unchanged == 2 and second.total_points == 0
    assert current(store) == clean(logdir)
    with connect(store) as connection:
        assert rows(connection, "SELECT DISTINCT source FROM runs") == [(str(logdir),)]


def test_a_moved_logdir_continued_under_its_source_names_its_new_place(
    logdir: Path, store: str, clean: Clean, tmp_path: Path
) -> None:
    convert(logdir, store)
    moved = tmp_path / "moved"
    logdir.rename(moved)
    continued = convert(moved, store, source=str(logdir))
    assert continued.files_unchanged == 2 and not continued.warnings
    assert current(store) == clean(moved, source=str(logdir))


def test_a_logdir_known_under_another_source_gets_a_notice(
    logdir: Path, store: str, tmp_path: Path
) -> None:
    convert(logdir, store)
    moved = tmp_path / "moved"
    logdir.rename(moved)
    noticed = convert(moved, store)
    [warning] = [line for line in noticed.warnings if "--source" in line]
    assert f"--source {logdir}" in warning and "\n" not in warning
    assert not convert(moved, store).warnings  # once its own source holds files


# --------------------------------------------------------------------------- item 5


def test_orphans_are_kept_as_runs_of_their_directories(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    from click.testing import CliRunner

    from tbconvert.cli import cli

    root = tmp_path / "logs"
    write_events(root / "events.out.tfevents.1.host", mixed_events(range(4)))
    write_events(root / "grp" / "events.out.tfevents.1.host", mixed_events(range(3)))
    write_events(
        root / "grp" / "run" / "train" / "events.out.tfevents.1.host", mixed_events(range(2))
    )
    kept_store, skipped_store = make_store(tmp_path, "kept"), make_store(tmp_path, "skipped")
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(root), "--store", kept_store])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: orphan")]
    assert warnings == [
        "warning: orphan event file (in a directory that holds runs) kept as run .: "
        "events.out.tfevents.1.host",
        "warning: orphan event file (in a directory that holds runs) kept as run grp: "
        "grp/events.out.tfevents.1.host",
    ]
    assert (
        "orphans:  2 event files in directories that hold runs, kept as runs of their "
        "directories (2 new: see warnings)" in result.stderr
    )
    # Named once, by the conversion that first finds them; then counted.
    again = CliRunner().invoke(cli, ["tf", "--logdir", str(root), "--store", kept_store])
    assert again.exit_code == 0, again.output
    assert "warning: orphan" not in again.stderr
    assert (
        "orphans:  2 event files in directories that hold runs, kept as runs of their "
        "directories\n" in again.stderr
    )
    with connect(kept_store) as connection:
        counted = rows(
            connection,
            "SELECT run_path, context, count(*) FROM v_scalars GROUP BY run_path, context "
            "ORDER BY run_path, context",
        )
    assert counted == [(".", "", 12), ("grp", "", 9), ("grp/run", "train", 6)]
    skipped = CliRunner().invoke(
        cli, ["tf", "--logdir", str(root), "--store", skipped_store, "--skip-orphans"]
    )
    assert skipped.exit_code == 0 and "skipped (--skip-orphans)" in skipped.stderr
    with connect(skipped_store) as connection:
        assert rows(connection, "SELECT DISTINCT run_path FROM v_scalars") == [("grp/run",)]
    # Skipped later, kept orphans stay as they are (not gone: they are still there).
    again = convert(root, kept_store, skip_orphans=True)
    assert again.files_gone == 0


# --------------------------------------------------------------------------- item 6


def test_dry_run_on_a_store_it_cannot_open_is_an_error(pg_server: Any, logdir: Path) -> None:
    from click.testing import CliRunner

    from tbconvert.cli import cli

    pg_server.password_role("guarded", "right")
    url = pg_server.url(pg_server.new_database("guarded").rsplit("/", 1)[1])
    wrong = url.replace("://tbconvert@", "://guarded:wrong@")
    for extra in (["--dry-run"], []):
        result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", wrong, *extra])
        assert result.exit_code == 1, result.output
        assert "wrong" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_dry_run_plans_moved_and_reread_files(nested: Path, store: str) -> None:
    convert(nested, store, plugins=["text"])
    plan = {item["path"]: item["action"] for item in convert(nested, store, dry_run=True).plan}
    assert set(plan.values()) == {"reread"}
    convert(nested, store)
    flat = convert(nested, store, flat=True, dry_run=True).plan
    actions = {item["path"]: (item["action"], item["run_path"]) for item in flat}
    assert actions == {
        "exp/eval/events.out.tfevents.1.host": ("moved", "exp/eval"),
        "exp/train/events.out.tfevents.1.host": ("moved", "exp/train"),
        "solo/events.out.tfevents.1.host": ("unchanged", "solo"),
    }


@pytest.mark.mutant_gap
def test_dry_run_plans_each_action_with_the_bytes_it_reads(tmp_path: Path) -> None:
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    grown = write_events(logs / "a" / FILE, scalar_events("loss", range(6)))
    replaced = write_events(logs / "b" / FILE, scalar_events("loss", range(6)))
    shrunk = write_events(logs / "c" / FILE, scalar_events("loss", range(6)))
    write_events(logs / "d" / FILE, scalar_events("loss", range(6)))
    convert(logs, store)
    stored = grown.stat().st_size
    append_events(grown, scalar_events("loss", range(6, 9)))
    # Another first record, and more bytes than were read: only the digest tells.
    write_events(replaced, scalar_events("acc", range(9), base=3e9))
    write_events(shrunk, scalar_events("loss", range(2)))
    fresh = write_events(logs / "e" / FILE, scalar_events("loss", range(1)))
    plan = {
        entry["path"]: (entry["action"], entry["bytes"])
        for entry in convert(logs, store, dry_run=True).plan
    }
    assert plan == {
        f"a/{FILE}": ("append", grown.stat().st_size - stored),
        f"b/{FILE}": ("replaced", replaced.stat().st_size),
        f"c/{FILE}": ("replaced", shrunk.stat().st_size),
        f"d/{FILE}": ("unchanged", 0),
        f"e/{FILE}": ("new", fresh.stat().st_size),
    }
    full = {
        entry["path"]: entry["action"]
        for entry in convert(logs, store, dry_run=True, full=True).plan
    }
    assert set(full.values()) == {"reread", "new"}


def test_dry_run_on_an_empty_server_database_plans_every_file_new(
    pg_server: Any, logdir: Path
) -> None:
    plan = convert(logdir, pg_server.new_database("empty"), dry_run=True).plan
    assert [item["action"] for item in plan] == ["new", "new"]


def test_dry_run_reads_a_store_older_than_0005_as_the_upgrade_leaves_it(
    logdir: Path, tmp_path: Path
) -> None:
    import sqlite3

    store = tmp_path / "old.db"
    convert(logdir, store)
    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE event_files SET status = 'partial'")
        connection.execute("ALTER TABLE event_files DROP COLUMN selection")
        connection.execute("UPDATE tbconvert_alembic_version SET version_num = '0004'")
    plan = convert(logdir, store, dry_run=True).plan
    assert [item["action"] for item in plan] == ["append", "append"]
