"""``v_scalars_current``: each series as its last attempt left it (design §6), checked
against TensorBoard's own purge where TensorBoard purges, and against the rule on restarts
written by tensorboardX."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.query.resumed import last_attempt
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, connect, rows

TAGS = ("loss", "accuracy")


def current(store: str, run: str) -> dict[str, list[tuple[int, float]]]:
    with closing(connect(store)) as conn:
        found = rows(
            conn,
            "SELECT tag, step, wall_time FROM v_scalars_current WHERE run_path = ? "
            "ORDER BY tag, step, wall_time",
            (run,),
        )
    by_tag: dict[str, list[tuple[int, float]]] = {}
    for tag, step, wall in found:
        by_tag.setdefault(tag, []).append((step, wall))
    return by_tag


def export_and_view(store: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The rows of ``export scalars --resumed current`` (the reader, per series) and of the
    view, both sorted."""
    result = CliRunner().invoke(
        cli, ["export", "scalars", "--store", store, "--resumed", "current", "--format", "jsonl"]
    )
    assert result.exit_code == 0, result.output
    exported = sorted(
        (row["run_path"], row["context"], row["tag"], row["step"], row["wall_time"])
        for row in map(json.loads, result.stdout.splitlines())
    )
    with closing(connect(store)) as conn:
        view = rows(conn, "SELECT run_path, context, tag, step, wall_time FROM v_scalars_current")
    return exported, sorted(view)


def assert_current_export_is_the_view(store: str) -> None:
    """``export scalars --resumed current`` (computed per series) gives the view's rows."""
    exported, view = export_and_view(store)
    assert exported == view and exported


def tensorboard_purged(directory: Path) -> dict[str, list[tuple[int, float]]]:
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: sorted((event.step, event.wall_time) for event in accumulator.Scalars(tag))
        for tag in accumulator.Tags()["scalars"]
    }


def scalar(steps: range, tag: str, wall: float) -> list[Event]:
    return [summary_event(step, wall + step, [simple_value(tag, step / 10)]) for step in steps]


def merged(step: int, wall: float) -> Event:
    """A TF1 ``merge_all`` event: every tag's value in one Event."""
    return summary_event(step, wall, [simple_value(tag, step / 10) for tag in TAGS])


def test_a_tf1_file_that_steps_back_is_purged_as_tensorboard_purges_it(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    run = tmp_path / "logs" / "tf1"
    events = [Event(wall_time=1.0, file_version="brain.Event:1")]
    events += [merged(step, 10.0 + step) for step in range(10)]
    events += [merged(step, 100.0 + step) for step in range(4, 14)]  # resumed at step 4
    events += [merged(step, 200.0 + step) for step in range(12, 16)]  # and at 12
    write_events(run / "events.out.tfevents.1.host", events, file_version=False)
    store = make_store(tmp_path)
    convert(tmp_path / "logs", store, progress=False)
    assert current(store, "tf1") == tensorboard_purged(run)
    assert_current_export_is_the_view(store)
    # Every record is still in v_scalars.
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT count(*) FROM v_scalars") == [(2 * 24,)]


def test_a_session_start_drops_the_later_steps_of_every_series_as_tensorboard_does(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    run = tmp_path / "logs" / "v2"
    events = [summary_event(step, 10.0 + step, [simple_value("loss", 1.0)]) for step in range(8)]
    events += [
        summary_event(step, 10.5 + step, [simple_value("accuracy", 0.5)]) for step in range(8)
    ]
    # A job restarted from the step-5 checkpoint says so; its steps then go on from 5.
    events.append(Event(step=5, wall_time=50.0, session_log=SessionLog(status=SessionLog.START)))
    events += [
        summary_event(step, 60.0 + step, [simple_value("loss", 2.0)]) for step in range(5, 9)
    ]
    write_events(run / "events.out.tfevents.1.host", events)
    store = make_store(tmp_path)
    convert(tmp_path / "logs", store, progress=False)
    purged = tensorboard_purged(run)
    assert current(store, "v2") == purged
    assert [step for step, _ in purged["accuracy"]] == [0, 1, 2, 3, 4]
    assert_current_export_is_the_view(store)


def test_a_second_tensorboardx_writer_going_back_starts_the_last_attempt(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """TensorBoard shows the zigzag here (a v2 file, no session start); the view keeps the
    first attempt up to where the second began, then the second.  Equal steps are no
    restart."""
    from tensorboardX import SummaryWriter

    run = tmp_path / "logs" / "resumed"
    with SummaryWriter(str(run), filename_suffix=".a", flush_secs=3600) as first:
        for step in [0, 1, 2, 2, 3, 4, 5, 6, 7]:
            first.add_scalar("loss", 1.0, step, walltime=100.0 + step)
    with SummaryWriter(str(run), filename_suffix=".b", flush_secs=3600) as second:
        for step in range(5, 10):
            second.add_scalar("loss", 2.0, step, walltime=200.0 + step)
    store = make_store(tmp_path)
    convert(tmp_path / "logs", store, progress=False)
    kept = current(store, "resumed")["loss"]
    assert kept == [(0, 100.0), (1, 101.0), (2, 102.0), (2, 102.0), (3, 103.0), (4, 104.0)] + [
        (step, 200.0 + step) for step in range(5, 10)
    ]
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT count(*) FROM v_scalars") == [(14,)]
    assert_current_export_is_the_view(store)


@given(
    steps=st.lists(st.integers(0, 12), max_size=40),
    starts=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 40)), max_size=3),
)
def test_the_last_attempt_is_what_applying_the_rule_in_write_order_leaves(
    steps: list[int], starts: list[tuple[int, int]]
) -> None:
    """:func:`last_attempt` against the rule applied literally, one point at a time."""
    points = [(step, float(i), 0.0, "f", i, 0) for i, step in enumerate(steps)]
    # A session start after the record at ``at`` (offset at + 0.5: between two records).
    marks = [(step, "f", at + 0.5) for step, at in starts]
    kept: list[tuple[object, ...]] = []
    events = sorted(
        [(point[4], 1, point) for point in points] + [(m[2], 0, m) for m in marks],
        key=lambda item: (item[0], item[1]),
    )
    previous = None
    for _position, kind, item in events:
        if kind == 0:  # a session start
            kept = [point for point in kept if point[0] < item[0]]
            continue
        if previous is not None and item[0] < previous:
            kept = [point for point in kept if point[0] < item[0]]
        kept.append(item)
        previous = item[0]
    assert last_attempt(points, marks) == sorted(kept, key=lambda point: point[0])


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(
        st.lists(
            st.one_of(
                st.tuples(st.just("loss"), st.integers(0, 9)),
                st.tuples(st.just("accuracy"), st.integers(0, 9)),
                st.tuples(st.just("start"), st.integers(0, 9)),
            ),
            max_size=12,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_the_reader_and_the_view_keep_the_same_points_after_any_history(
    tmp_path_factory: pytest.TempPathFactory, files: list[list[tuple[str, int]]]
) -> None:
    """The two homes of the rule (the SQL view for SQL clients, the reader the commands use:
    docs/performance.md says why there are two) over generated histories: several files of one
    run, steps going back within and across them, session starts anywhere."""
    root = tmp_path_factory.mktemp("history")
    for number, records in enumerate(files):
        events = [Event(wall_time=1.0, file_version="brain.Event:2")]
        for index, (what, step) in enumerate(records):
            wall = 10.0 * number + index
            if what == "start":
                events.append(
                    Event(
                        step=step, wall_time=wall, session_log=SessionLog(status=SessionLog.START)
                    )
                )
            else:
                events.append(summary_event(step, wall, [simple_value(what, float(index))]))
        write_events(
            root / "logs" / "run" / f"events.out.tfevents.{number}.host", events, file_version=False
        )
    store = str(root / "store.db")
    convert(root / "logs", store, progress=False)
    exported, view = export_and_view(store)
    assert exported == view
