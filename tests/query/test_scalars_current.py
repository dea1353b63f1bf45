"""``v_scalars_current``: each series as its last attempt left it (design §6), checked
against TensorBoard's own purge where TensorBoard purges, and against the rule on restarts
written by tensorboardX."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

from tbconvert import convert
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
