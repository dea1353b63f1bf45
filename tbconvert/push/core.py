"""The tracker-neutral push core: a store's runs into any tracker, through one adapter each.

What every push does, whatever the tracker:

- **One remote run per run**, found again by the id the store recorded (``push_runs``), else
  by a stable id or tag the adapter derives from the run (a crash between creating the run
  and recording it leaves nothing else to find it by), else created.
- **Marks** (:mod:`tbconvert.push.state`): per (series, point table, event file) the last
  point the tracker acknowledged, under the adapter's ``destination`` (which names the
  tracker first: ``"mlflow ..."``, ``"wandb ..."``, so one store keeps the marks of every
  tracker apart).  A batch is marked only after the adapter's ``log_points`` returned.
- **Pending runs**: a run is ``pending`` from its push's start to its end; the next push of
  a pending run first compares what no mark covers with the tracker's own history
  (``read_history``) and sends only the rest, so a push killed anywhere and run again leaves
  each point in the tracker once.
- **Batches** of at most the adapter's ``batch_size`` points.
- **Two scalar rules**, the adapter's ``one_point_per_step``.  False (MLflow): every point
  goes, with its wall time.  True (trackers whose steps only grow, W&B): a series goes as its
  last attempt (:mod:`tbconvert.query.resumed`, as ``v_scalars_current``), a step repeated
  within it as its last written point, and only steps after the last step the tracker holds
  for that series (its history is read back, pending or not); every other new point is
  counted as one that could not go (``RunPushed.not_sent``).  A tracker that can rewrite
  and remove a step (Aim; its adapter has ``remove_steps(opened, key, steps)``) gets instead
  every current point it does not hold as it is, and loses the steps a series no longer has
  (a later attempt went back), so it holds each series as ``v_scalars_current`` does.
- ``--dry-run`` (:func:`plan_run`) counts what would go from the marks alone, touching no
  tracker.  Credentials stay in the adapter: a destination holds none
  (:func:`tbconvert.push.state.destination`).

The adapter interface (:class:`Tracker`), one class per tracker (``mlflow.MlflowTracker``,
``wandb.WandbTracker``): ``open_run`` (find or create the run; return its id and the params
it holds), ``log_params``, ``series_keys`` (the tracker's key of each scalar series, by an
injective rule), ``log_points`` (one batch), ``read_history`` (what the tracker holds for one
series, as :data:`~tbconvert.push.metrics.Identity` values made by the adapter's
``identity``), ``log_files`` (the other plugins; the adapter marks what it sent) and
``finish_run``.  :func:`push_run` drives them in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from tbconvert.push.metrics import Identity, Marks, already_there, send_points
from tbconvert.push.source import RunRow
from tbconvert.push.state import Point, new_scalars, remote_run, save_run
from tbconvert.push.steps import current_points, last_per_step


@dataclass
class RunPushed:
    """What one run's push did (or, in a dry run, would do)."""

    run_path: str
    remote_id: str
    created: bool = False
    metrics: int = 0  # points sent
    resent_skipped: int = 0  # points a crashed push had sent, found in the tracker
    params: int = 0
    artifacts: int = 0  # files (or objects) sent
    not_sent: int = 0  # new points the tracker cannot take (one point per step)


@dataclass
class OpenedRun:
    """A run in the tracker, as ``open_run`` found or made it."""

    remote_id: str
    created: bool
    params: dict[str, str] = field(default_factory=dict)  # what the tracker holds
    handle: Any = None  # the adapter's own object for the run


class Tracker(Protocol):
    """One tracker's side of a push (the module's adapter interface)."""

    destination: str  # the marks' key: tracker name first, no credentials
    batch_size: int
    one_point_per_step: bool

    def open_run(self, run: RunRow, known: str | None, warnings: list[str]) -> OpenedRun:
        """The tracker's run of ``run``: ``known`` (the id the store recorded), else the one
        found by its stable id or tag, else a new one."""

    def log_params(self, opened: OpenedRun, run: RunRow, warnings: list[str]) -> int:
        """Send the run's params (and tags); returns how many params were new."""

    def series_keys(self, run: RunRow) -> dict[int, str]:
        """The tracker's key of each scalar series of ``run``, by series id."""

    def log_points(
        self, opened: OpenedRun, run: RunRow, keys: dict[int, str], batch: list[Point]
    ) -> None:
        """Send one batch; return only once the tracker acknowledged it."""

    def identity(self, point: Point) -> Identity:
        """What the tracker's history shows of ``point`` once sent."""

    def read_history(self, opened: OpenedRun, key: str) -> Iterable[Identity]:
        """Every point the tracker holds for the series ``key``."""

    def log_files(self, opened: OpenedRun, run: RunRow, engine: Engine) -> int:
        """Send the new points of the other plugins and mark them; returns files sent."""

    def finish_run(self, opened: OpenedRun, run: RunRow) -> None:
        """End the run in the tracker (its last wall time, where it takes one)."""


Progress = Callable[[int], None]


def push_run(
    tracker: Tracker, engine: Engine, run: RunRow, progress: Progress | None = None
) -> tuple[RunPushed, list[str]]:
    """Push one run through ``tracker``: find or create it, params, scalars, files, end."""
    warnings: list[str] = []
    where = tracker.destination
    with engine.connect() as conn:
        known = remote_run(conn, where, run.run_id)
    opened = tracker.open_run(run, None if known is None else known[0], warnings)
    # A run found by its stable id, not in the store, was created by a push that crashed.
    pending = known[1] if known is not None else not opened.created
    pushed = RunPushed(run.run_path, opened.remote_id, created=opened.created)
    with engine.begin() as conn:
        save_run(conn, where, run.run_id, opened.remote_id, pending=True)
    pushed.params = tracker.log_params(opened, run, warnings)
    keys = tracker.series_keys(run)
    if tracker.one_point_per_step:
        _send_steps(tracker, engine, opened, run, keys, pending, pushed, progress)
    else:
        _send_every_point(tracker, engine, opened, run, keys, pending, pushed, progress)
    pushed.artifacts = tracker.log_files(opened, run, engine)
    tracker.finish_run(opened, run)
    with engine.begin() as conn:
        save_run(conn, where, run.run_id, opened.remote_id, pending=False)
    return pushed, warnings


def _send_every_point(
    tracker: Tracker,
    engine: Engine,
    opened: OpenedRun,
    run: RunRow,
    keys: dict[int, str],
    pending: bool,
    pushed: RunPushed,
    progress: Progress | None,
) -> None:
    with engine.connect() as conn:
        found = new_scalars(conn, tracker.destination, list(keys), covered=pending)
    points = [point for point, _ in found]
    covered = [flag for _, flag in found]
    done = covered
    if pending and not all(covered):
        done = _already_there(tracker, opened, keys, points, covered)
    # The marks already cover those: only the rest (a suffix of each file's points) moves.
    fresh = [index for index, flag in enumerate(covered) if not flag]
    points, done = [points[i] for i in fresh], [done[i] for i in fresh]
    pushed.resent_skipped = sum(done)

    def send(batch: list[Point]) -> None:
        tracker.log_points(opened, run, keys, batch)
        if progress is not None:
            progress(len(batch))

    marks = Marks(engine, tracker.destination, points, done)
    pushed.metrics = send_points(marks, send, tracker.batch_size)


def _already_there(
    tracker: Tracker,
    opened: OpenedRun,
    keys: dict[int, str],
    points: list[Point],
    covered: list[bool],
) -> list[bool]:
    """Which points a crashed push had sent, series by series."""
    there = list(covered)
    for series_id, indices in _by_series(points).items():
        if all(covered[i] for i in indices):
            continue
        found = already_there(
            [covered[i] for i in indices],
            [points[i] for i in indices],
            tracker.read_history(opened, keys[series_id]),
            tracker.identity,
        )
        for index, value in zip(indices, found, strict=True):
            there[index] = value
    return there


def _send_steps(
    tracker: Tracker,
    engine: Engine,
    opened: OpenedRun,
    run: RunRow,
    keys: dict[int, str],
    pending: bool,
    pushed: RunPushed,
    progress: Progress | None,
) -> None:
    """One point per step: each touched series' last attempt after the last step the
    tracker holds for it; then every point of those series is marked."""
    with engine.connect() as conn:
        found = new_scalars(conn, tracker.destination, list(keys), covered=True)
        points = [point for point, _ in found]
        fresh = {id(point) for point, covered in found if not covered}
        groups = _by_series(points)
        touched = [
            s for s, ix in groups.items() if pending or any(id(points[i]) in fresh for i in ix)
        ]
        current = {
            s: last_per_step(current_points(conn, s, [points[i] for i in groups[s]]))
            for s in touched
        }
    to_send: list[Point] = []
    remove_steps = getattr(tracker, "remove_steps", None)
    for series_id in touched:
        history = list(tracker.read_history(opened, keys[series_id]))
        if remove_steps is not None:
            to_send += _replace_steps(tracker, opened, keys[series_id], history, current[series_id])
            continue
        last = max((identity[0] for identity in history), default=None)
        to_send += [p for p in current[series_id] if last is None or p.step > last]
    to_send.sort(key=lambda point: (point.step, point.series_id))
    for start in range(0, len(to_send), tracker.batch_size):
        batch = to_send[start : start + tracker.batch_size]
        tracker.log_points(opened, run, keys, batch)
        if progress is not None:
            progress(len(batch))
    pushed.metrics = len(to_send)
    pushed.resent_skipped = 0
    sent = {id(point) for point in to_send}
    if remove_steps is not None:  # a current point not sent was in the tracker already
        kept = {id(point) for series_id in touched for point in current[series_id]}
        pushed.resent_skipped = len((fresh & kept) - sent)
        fresh -= kept
    pushed.not_sent = len(fresh - sent)
    chosen = [points[i] for s in touched for i in groups[s]]
    marks = Marks(engine, tracker.destination, chosen, [True] * len(chosen))
    marks.advance(list(marks.cursor))


def _replace_steps(
    tracker: Tracker,
    opened: OpenedRun,
    key: str,
    history: list[Identity],
    current: list[Point],
) -> list[Point]:
    """For a tracker that can rewrite and remove a step (its adapter has ``remove_steps``):
    the steps it holds that the series no longer has are removed now, and the current points
    it holds otherwise, or not at all, are returned to send."""
    held = {identity[0]: identity for identity in history}
    kept = {point.step for point in current}
    stale = sorted(step for step in held if step not in kept)
    if stale:
        tracker.remove_steps(opened, key, stale)  # type: ignore[attr-defined]
    return [point for point in current if held.get(point.step) != tracker.identity(point)]


def _by_series(points: Sequence[Point]) -> dict[int, list[int]]:
    by_series: dict[int, list[int]] = {}
    for index, point in enumerate(points):
        by_series.setdefault(point.series_id, []).append(index)
    return by_series
