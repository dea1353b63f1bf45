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

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.engine import Connection, Engine

from tbconvert.push.metrics import Identity, Marks, already_there, send_points
from tbconvert.push.source import RunRow
from tbconvert.push.state import (
    Point,
    has_new_points,
    last_of_each_file,
    new_points,
    new_scalars,
    remote_run,
    save_marks,
    save_run,
)
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
    # Whether a run that was pushed whole and has no new point in ``point_tables`` is left
    # alone, not even opened (a tracker where opening a run writes something: W&B offline).
    skips_unchanged: bool
    point_tables: tuple[str, ...]

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


@contextmanager
def points_bar(progress: bool | None) -> Iterator[Progress | None]:
    """A progress bar of points sent (tqdm, stderr; ``None``: only on a terminal), or
    nothing (``False``)."""
    if progress is False:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(unit=" points", unit_scale=True, disable=None if progress is None else not progress)
    try:
        yield bar.update
    finally:
        bar.close()


def push_run(
    tracker: Tracker, engine: Engine, run: RunRow, progress: Progress | None = None
) -> tuple[RunPushed, list[str]]:
    """Push one run through ``tracker``: find or create it, params, scalars, files, end."""
    warnings: list[str] = []
    where = tracker.destination
    with engine.connect() as conn:
        known = remote_run(conn, where, run.run_id)
    if tracker.skips_unchanged and known is not None and not known[1]:
        with engine.connect() as conn:
            if not has_new_points(conn, where, tracker.point_tables, run.series):
                return RunPushed(run.run_path, known[0]), warnings
    opened = tracker.open_run(run, None if known is None else known[0], warnings)
    # A run found by its stable id, not in the store, was created by a push that crashed.
    pending = known[1] if known is not None else not opened.created
    pushed = RunPushed(run.run_path, opened.remote_id, created=opened.created)
    with engine.begin() as conn:
        save_run(conn, where, run.run_id, opened.remote_id, pending=True)
    pushed.params = tracker.log_params(opened, run, warnings)
    keys = tracker.series_keys(run)
    scalars = _Scalars(tracker, engine, opened, run, keys, pending, pushed, progress)
    if tracker.one_point_per_step:
        scalars.one_per_step()
    else:
        scalars.every_point()
    pushed.artifacts = tracker.log_files(opened, run, engine)
    tracker.finish_run(opened, run)
    with engine.begin() as conn:
        save_run(conn, where, run.run_id, opened.remote_id, pending=False)
    return pushed, warnings


def plan_run(conn: Connection, tracker: Tracker, run: RunRow) -> RunPushed:
    """What pushing ``run`` would send, from the marks alone (``--dry-run``): its new
    points (for a tracker of one point per step, those its last attempt keeps, the rest in
    ``not_sent``) and the new points of its other tables as ``artifacts``."""
    where = tracker.destination
    known = remote_run(conn, where, run.run_id)
    planned = RunPushed(run.run_path, "" if known is None else known[0], created=known is None)
    scalars = [s.id for s in run.series if s.plugin == "scalars"]
    found = new_scalars(conn, where, scalars, covered=True)
    fresh = {id(point) for point, covered in found if not covered}
    planned.metrics = len(fresh)
    if tracker.one_point_per_step:
        going = 0
        for series_id, indices in _by_series([point for point, _ in found]).items():
            points = [found[i][0] for i in indices]
            kept = last_per_step(current_points(conn, series_id, points))
            going += sum(id(point) in fresh for point in kept)
        planned.metrics, planned.not_sent = going, len(fresh) - going
    others = [s for s in run.series if s.plugin != "scalars"]
    tables = [table for table in tracker.point_tables if table != "scalars"]
    planned.artifacts = sum(
        len(new_points(conn, where, t, "p.step", [s.id for s in others])) for t in tables
    )
    return planned


@dataclass
class _Scalars:
    """The scalar points of one run's push, sent by one of the two rules."""

    tracker: Tracker
    engine: Engine
    opened: OpenedRun
    run: RunRow
    keys: dict[int, str]
    pending: bool
    pushed: RunPushed
    progress: Progress | None

    def send(self, batch: list[Point]) -> None:
        """One batch, acknowledged by the tracker when this returns."""
        self.tracker.log_points(self.opened, self.run, self.keys, batch)
        if self.progress is not None:
            self.progress(len(batch))

    def every_point(self) -> None:
        """Every point no mark covers, less those a crashed push had sent."""
        where = self.tracker.destination
        with self.engine.connect() as conn:
            found = new_scalars(conn, where, list(self.keys), covered=self.pending)
        points = [point for point, _ in found]
        covered = [flag for _, flag in found]
        done = covered
        if self.pending and not all(covered):
            done = self._already_there(points, covered)
        # The marks already cover those: only the rest (a suffix of each file's points) moves.
        fresh = [index for index, flag in enumerate(covered) if not flag]
        points, done = [points[i] for i in fresh], [done[i] for i in fresh]
        self.pushed.resent_skipped = sum(done)
        marks = Marks(self.engine, where, points, done)
        self.pushed.metrics = send_points(marks, self.send, self.tracker.batch_size)

    def _already_there(self, points: list[Point], covered: list[bool]) -> list[bool]:
        """Which points a crashed push had sent, series by series."""
        there = list(covered)
        for series_id, indices in _by_series(points).items():
            if all(covered[i] for i in indices):
                continue
            found = already_there(
                [covered[i] for i in indices],
                [points[i] for i in indices],
                self.tracker.read_history(self.opened, self.keys[series_id]),
                self.tracker.identity,
            )
            for index, value in zip(indices, found, strict=True):
                there[index] = value
        return there

    def one_per_step(self) -> None:
        """Each series with new points (every series of a pending run) as its last attempt,
        after the last step the tracker holds of it; then every new point of those series is
        marked, sent or not."""
        where = self.tracker.destination
        with self.engine.connect() as conn:
            found = new_scalars(conn, where, list(self.keys), covered=True)
            groups = _by_series([point for point, _ in found])
            fresh = [point for point, covered in found if not covered]
            touched = [
                series_id
                for series_id, indices in groups.items()
                if self.pending or not all(found[i][1] for i in indices)
            ]
            current = {
                series_id: last_per_step(
                    current_points(conn, series_id, [found[i][0] for i in groups[series_id]])
                )
                for series_id in touched
            }
        to_send: list[Point] = []
        replaces = getattr(self.tracker, "remove_steps", None) is not None
        for series_id in touched:
            history = list(self.tracker.read_history(self.opened, self.keys[series_id]))
            if replaces:
                to_send += self._replace_steps(series_id, history, current[series_id])
                continue
            last = max((identity[0] for identity in history), default=None)
            to_send += [p for p in current[series_id] if last is None or p.step > last]
        to_send.sort(key=lambda point: (point.step, point.series_id))
        for start in range(0, len(to_send), self.tracker.batch_size):
            self.send(to_send[start : start + self.tracker.batch_size])
        self.pushed.metrics = len(to_send)
        fresh_ids, sent = set(map(id, fresh)), set(map(id, to_send))
        if replaces:  # a current point not sent was in the tracker already
            kept = {id(point) for series_id in touched for point in current[series_id]}
            self.pushed.resent_skipped = len((fresh_ids & kept) - sent)
            fresh_ids -= kept
        self.pushed.not_sent = len(fresh_ids - sent)
        with self.engine.begin() as conn:
            save_marks(conn, where, "scalars", last_of_each_file(fresh))

    def _replace_steps(
        self, series_id: int, history: list[Identity], current: list[Point]
    ) -> list[Point]:
        """For a tracker that can rewrite and remove a step (its adapter has
        ``remove_steps``): the steps it holds that the series no longer has are removed now,
        and the current points it holds otherwise, or not at all, are returned to send."""
        held = {identity[0]: identity for identity in history}
        kept = {point.step for point in current}
        stale = sorted(step for step in held if step not in kept)
        if stale:
            self.tracker.remove_steps(  # type: ignore[attr-defined]
                self.opened, self.keys[series_id], stale
            )
        return [p for p in current if held.get(p.step) != self.tracker.identity(p)]


def _by_series(points: Sequence[Point]) -> dict[int, list[int]]:
    by_series: dict[int, list[int]] = {}
    for index, point in enumerate(points):
        by_series.setdefault(point.series_id, []).append(index)
    return by_series
