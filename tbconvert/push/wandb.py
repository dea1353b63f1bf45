"""``tbconvert push wandb``: a store's runs into Weights & Biases (#48).

One W&B run per tbconvert run, with a stable id (:func:`stable_id`: a re-push resumes it,
a crash before the store recorded it finds it again), named by its run path, in the group
of its group path, its params as its config (:func:`tbconvert.push.wandb_keys.config_keys`).
Scalars under ``CONTEXT/TAG`` keys (:mod:`tbconvert.push.wandb_keys`), each series with its
own step as its x axis: W&B's ``_step`` (the row number) grows across every key of a run, so
each series logs its step under ``KEY@step`` and ``define_metric(KEY,
step_metric=KEY@step)`` makes that its axis.  A row's wall time is its ``_timestamp``, which
``run.log`` takes as given (W&B's own TensorBoard sync sets it so): a row holds the points of
one step written at one wall time, so a step whose series were written at several wall
times is several rows, each point at its own time (W&B's "Wall Time" axis).  W&B keeps
one point per step and steps that only grow, so the core's one-point-per-step rule applies
(:mod:`tbconvert.push.core`: a series as its last attempt, a repeated step as its last
written point).  Images, texts and histograms as W&B objects
(:mod:`tbconvert.push.wandb_media`), each row at its point's wall time too.

``offline`` writes W&B's offline run directories under ``DIR/wandb`` (what ``wandb sync``
uploads) with no network; what they hold is read back before anything more is sent
(:mod:`tbconvert.push.wandb_offline`).  Online, what a resumed run holds is its summary:
the last step of each series.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.errors import PushError, UsageError, import_extra
from tbconvert.filters import Globs
from tbconvert.push.core import OpenedRun, Progress, RunPushed, plan_run, push_run
from tbconvert.push.metrics import Identity, metric_value
from tbconvert.push.source import RunRow, chosen_runs
from tbconvert.push.state import Point, last_of_each_file, new_points, save_marks
from tbconvert.push.wandb_keys import config_keys, step_key, wandb_key
from tbconvert.push.wandb_media import TABLES, last_value_per_step, media_object
from tbconvert.push.wandb_offline import held_history, run_directories
from tbconvert.query.store import open_store

# Points (and so rows, at most) per batch: W&B takes any number; this bounds what a killed
# push leaves to compare.
BATCH_SIZE = 1000


@dataclass
class WandbSummary:
    """What a push into W&B did: the destination, each run's counts, the warnings."""

    project: str
    entity: str | None
    offline: str | None
    dry_run: bool = False
    runs: list[RunPushed] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> int:
        """Points sent, over every run."""
        return sum(run.metrics for run in self.runs)

    @property
    def not_sent(self) -> int:
        """New points W&B cannot take (not the last at their step), over every run."""
        return sum(run.not_sent for run in self.runs)


def stable_id(run: RunRow) -> str:
    """The W&B id of a run: a digest of its source and path, the same from every push."""
    digest = hashlib.sha256(f"tbconvert\0{run.source}\0{run.run_path}".encode()).hexdigest()
    return f"tb{digest[:30]}"


def push_wandb(
    store: str | os.PathLike[str],
    project: str,
    entity: str | None = None,
    offline: str | os.PathLike[str] | None = None,
    run: Globs = None,
    tag: Globs = None,
    *,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> WandbSummary:
    """Push the store's runs (those matching ``run``, with their series matching ``tag``)
    into the W&B project ``project``; only what no earlier push to it sent.  With
    ``offline``, into offline run directories under that directory; with ``dry_run``, count
    what would go and send nothing.

    Raises:
        UsageError: an empty project, or a batch size under 1.
        MissingDependency: wandb is not installed.
        PushError: W&B refuses a run.
        StoreError: the store cannot be opened.
    """
    if not project:
        raise UsageError("an empty --project", hint="name the W&B project")
    if batch_size < 1:
        raise UsageError(f"batch size {batch_size}", hint="1 or more")
    root = None if offline is None else Path(offline).expanduser().absolute()
    opened = open_store(store, upgrade=not dry_run)
    try:
        summary = WandbSummary(project, entity, None if root is None else str(root), dry_run)
        tracker = WandbTracker(project, entity, root, batch_size)
        with opened.connect() as conn:
            runs = chosen_runs(conn, run, tag, typed=True)
            if dry_run:
                summary.runs = [plan_run(conn, tracker, one) for one in runs]
                return summary
        _require_wandb()
        with _wandb_environment(root):
            for one in runs:
                pushed, warnings = push_run(tracker, opened.engine, one, progress)
                summary.runs.append(pushed)
                summary.warnings.extend(warnings)
        return summary
    finally:
        opened.close()


def _require_wandb() -> None:
    import_extra("wandb", "wandb", "pushing to W&B")


@contextmanager
def _wandb_environment(root: Path | None) -> Iterator[None]:
    """W&B's settings for the push: silent, and offline under ``root`` when given."""
    chosen = {"WANDB_SILENT": "true", "WANDB_CONSOLE": "off"}
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        chosen |= {"WANDB_MODE": "offline", "WANDB_DIR": str(root)}
    before = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class _Run:
    """A W&B run being pushed: the SDK's run, what it held when opened, its next row."""

    run: Any
    held: dict[str, list[tuple[int, Any]]]
    next_row: int
    defined: set[str] = field(default_factory=set)
    # The media points sent, marked once the run is finished: the core's pending run makes
    # a push after a crash compare every scalar series, not the other plugins' marks.
    engine: Engine | None = None
    unmarked: list[tuple[str, list[Point]]] = field(default_factory=list)


class WandbTracker:
    """W&B's adapter of the push core (:class:`tbconvert.push.core.Tracker`)."""

    one_point_per_step = True
    skips_unchanged = True
    point_tables: tuple[str, ...] = ("scalars", *TABLES)

    def __init__(self, project: str, entity: str | None, root: Path | None, batch_size: int):
        self.project, self.entity, self.root, self.batch_size = project, entity, root, batch_size
        place = f"offline {root}" if root is not None else "online"
        self.destination = f"wandb {place} project {entity or ''}/{project}"

    def open_run(self, run: RunRow, known: str | None, warnings: list[str]) -> OpenedRun:
        """Resume (or create) the run of ``run`` under its stable id, config and group."""
        import wandb

        remote_id = known or stable_id(run)
        held: dict[str, list[tuple[int, Any]]] = {}
        next_row = 0
        created = True
        settings: dict[str, Any] = {
            "silent": True,
            "console": "off",
            "x_disable_stats": True,
            "x_disable_meta": True,
            # The packages of the pushing process are not those of the run's training.
            "x_save_requirements": False,
        }
        if self.root is not None:
            history = held_history(self.root, remote_id, step_key(""))
            held, next_row = history.points, history.last_row + 1
            created = not run_directories(self.root, remote_id)
            settings["x_start_time"] = _start_time(self.root, remote_id)
        config = config_keys(run.params)
        with _wandb_errors(f"open the W&B run of {run.run_path!r}"):
            sdk_run = wandb.init(
                entity=self.entity,
                project=self.project,
                id=remote_id,
                resume="allow",
                name=run.run_path,
                group=run.group_path or None,
                config=config,
                dir=None if self.root is None else str(self.root),
                reinit="create_new",
                settings=wandb.Settings(**settings),
            )
        if self.root is None:
            created = not sdk_run.resumed
            next_row = sdk_run.step
            held = _summary_history(sdk_run.summary)
        return OpenedRun(remote_id, created, {}, _Run(sdk_run, held, next_row))

    def log_params(self, opened: OpenedRun, run: RunRow, warnings: list[str]) -> int:
        """The config went with ``wandb.init``; how many entries it holds."""
        return len(config_keys(run.params))

    def series_keys(self, run: RunRow) -> dict[int, str]:
        """``CONTEXT/TAG`` keys (:func:`tbconvert.push.wandb_keys.wandb_key`)."""
        return {s.id: wandb_key(s.context, s.tag) for s in run.series if s.plugin == "scalars"}

    def log_points(
        self, opened: OpenedRun, run: RunRow, keys: dict[int, str], batch: list[Point]
    ) -> None:
        """Rows of points by step then wall time: each row the points of one step written
        at one wall time (its ``_timestamp``), each series once in it."""
        rows: list[tuple[tuple[int, float | None], dict[str, Any]]] = []
        for point in sorted(batch, key=_row_order):
            if not rows or rows[-1][0] != (point.step, point.wall_time):
                rows.append(((point.step, point.wall_time), _timestamp(point)))
            key = keys[point.series_id]
            rows[-1][1].update({key: metric_value(point.value), step_key(key): point.step})
        self._log_rows(opened, run, [row for _, row in rows])

    def identity(self, point: Point) -> Identity:
        """W&B keeps a series' step and value."""
        return point.step, 0, metric_value(point.value)

    def read_history(self, opened: OpenedRun, key: str) -> list[Identity]:
        """What the run held of ``key`` when opened."""
        handle: _Run = opened.handle
        return [(step, 0, value) for step, value in handle.held.get(key, [])]

    def log_files(self, opened: OpenedRun, run: RunRow, engine: Engine) -> int:
        """Images, texts and histograms: per series, the new steps after the last one the run
        holds, as W&B objects (:mod:`tbconvert.push.wandb_media`), their points marked once
        the run is finished."""
        handle: _Run = opened.handle
        handle.engine = engine
        sent, marked = 0, handle.unmarked
        with engine.connect() as conn:
            for table, (plugin, columns, joins) in TABLES.items():
                for one in (s for s in run.series if s.plugin == plugin):
                    found = new_points(
                        conn, self.destination, table, columns, [one.id], joins=joins
                    )
                    fresh = [point for point, _ in found]
                    if not fresh:
                        continue
                    key = wandb_key(one.context, one.tag)
                    last = max((step for step, _ in handle.held.get(key, [])), default=None)
                    rows = [
                        {key: media_object(table, elements), step_key(key): step}
                        | _timestamp(elements[-1])
                        for step, elements in sorted(last_value_per_step(fresh).items())
                        if last is None or step > last
                    ]
                    self._log_rows(opened, run, rows)
                    sent += len(rows)
                    marked.append((table, fresh))
        return sent

    def finish_run(self, opened: OpenedRun, run: RunRow) -> None:
        """Finish the run (W&B writes, or uploads, everything logged before it returns),
        then mark the media points sent."""
        handle: _Run = opened.handle
        with _wandb_errors(f"finish the W&B run of {run.run_path!r}"):
            handle.run.finish()
        if handle.engine is not None and handle.unmarked:
            with handle.engine.begin() as conn:
                for table, points in handle.unmarked:
                    save_marks(conn, self.destination, table, last_of_each_file(points))

    def _log_rows(self, opened: OpenedRun, run: RunRow, rows: list[dict[str, Any]]) -> None:
        handle: _Run = opened.handle
        with _wandb_errors(f"log the points of {run.run_path!r}"):
            for row in rows:
                for key in row:
                    # W&B's own keys (``_timestamp``) start with ``_``; no series key does.
                    if key in handle.defined or key.startswith("_") or key.endswith(step_key("")):
                        continue
                    handle.run.define_metric(step_key(key), hidden=True)
                    handle.run.define_metric(key, step_metric=step_key(key))
                    handle.defined.add(key)
                handle.run.log(row, step=handle.next_row)
                handle.next_row += 1


def _row_order(point: Point) -> tuple[int, bool, float, int]:
    """Step, then wall time (a point without one last), then series."""
    wall = point.wall_time
    return point.step, wall is None, 0.0 if wall is None else wall, point.series_id


def _timestamp(point: Point) -> dict[str, Any]:
    """The ``_timestamp`` of a row holding ``point``: W&B takes a row's wall time from it
    (else it writes the time of the push), to the full float64 of the store."""
    return {} if point.wall_time is None else {"_timestamp": point.wall_time}


def _summary_history(summary: Any) -> dict[str, list[tuple[int, Any]]]:
    """A resumed online run's last point of each series, from its summary."""
    held: dict[str, list[tuple[int, Any]]] = {}
    for key in list(summary.keys()):
        step = summary.get(step_key(key))
        if step is not None:
            held[key] = [(int(step), summary.get(key))]
    return held


def _start_time(root: Path, remote_id: str) -> float:
    """When the run's new offline directory starts: now, or the next second whose name no
    directory of the run has (W&B names a directory by the second its run started, and a
    second one of the same name would be the first, overwritten)."""
    start = time.time()
    while (root / "wandb" / _directory_name(start, remote_id)).exists():
        start = math.floor(start) + 1.0
    return start


def _directory_name(start: float, remote_id: str) -> str:
    # wandb.sdk.wandb_settings.Settings._start_datetime: local time, to the second.
    return f"offline-run-{datetime.fromtimestamp(start):%Y%m%d_%H%M%S}-{remote_id}"


@contextmanager
def _wandb_errors(what: str) -> Iterator[None]:
    """W&B's errors while doing ``what`` as one-line PushErrors."""
    import wandb

    try:
        yield
    except (wandb.Error, OSError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PushError(f"W&B refused to {what}: {message}") from error
