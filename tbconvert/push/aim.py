"""``tbconvert push aim``: a store's runs into an Aim repo (#48).

One Aim run per tbconvert run, under a hash derived from the store and the run
(:mod:`tbconvert.push.aim_repo`); its params as ``run["hparams"]`` (typed), where it came from
(source, group, path) as ``run["tbconvert"]``; each scalar series as an Aim metric named by its
tag, in the context ``{"subset": CONTEXT}`` (none for the run directory itself), every point
at its step with its own wall time (:mod:`tbconvert.push.aim_metrics`); images, audio, texts
and histograms as Aim's objects (:mod:`tbconvert.push.aim_objects`).

Incremental and crash-safe through the push core (:mod:`tbconvert.push.core`), with
:class:`AimTracker` as its adapter.  Aim keeps one point per step and can rewrite or remove
one, so a series is held as ``v_scalars_current`` shows it: its last attempt, a step written
twice in it as the last point written, steps a later attempt went back over removed.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.push.aim_metrics import MetricPoint, MetricWriter, RemoteMetricWriter
from tbconvert.push.aim_objects import push_objects
from tbconvert.push.aim_repo import (
    aim_errors,
    index_run,
    open_repo,
    open_run,
    repo_location,
    set_params,
)
from tbconvert.push.core import OpenedRun, Progress, RunPushed, plan_run, push_run
from tbconvert.push.metrics import Identity
from tbconvert.push.source import RunRow, chosen_runs
from tbconvert.push.state import Point
from tbconvert.query import lookups
from tbconvert.query.store import open_store
from tbconvert.urls import redacted

BATCH_SIZE = 5000  # points per write into Aim
_NAN = float("nan")


@dataclass
class AimPushSummary:
    """What a push into Aim did: the repo, each run's counts."""

    repo: str
    runs: list[RunPushed] = field(default_factory=list)
    dry_run: bool = False  # the counts are what a push would send
    removed: int = 0  # steps removed from Aim: a later attempt of their series went back
    warnings: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> int:
        """Metric points sent, over every run."""
        return sum(run.metrics for run in self.runs)


def push_aim(
    store: str | os.PathLike[str],
    repo: str,
    run: Globs = None,
    tag: Globs = None,
    *,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> AimPushSummary:
    """Push the store's runs (those matching ``run``, with their series matching ``tag``)
    into the Aim repo ``repo`` (a directory, created when missing, or ``aim://HOST:PORT``);
    only what no earlier push to the same repo sent.  ``progress`` is called with the count
    of each batch of points written.  With ``dry_run``, count what would go from the
    store's marks, opening no repo and writing nothing.

    Raises:
        UsageError: a batch size under 1.
        MissingDependency: aim is not installed.
        PushError: Aim cannot open the repo or write a run.
        StoreError: the store cannot be opened.
    """
    if batch_size < 1:
        raise UsageError(f"batch size {batch_size}", hint="at least 1")
    # The store first: a wrong --store must not leave an Aim repo created behind it.
    opened = open_store(store, upgrade=not dry_run)
    try:
        location = repo_location(repo)
        summary = AimPushSummary(redacted(location), dry_run=dry_run)
        if dry_run:
            planner = AimTracker(None, location, opened.display, batch_size)
            with opened.connect() as conn:
                summary.runs = [plan_run(conn, planner, one) for one in chosen_runs(conn, run, tag)]
            return summary
        tracker = AimTracker(open_repo(location), location, opened.display, batch_size)
        with opened.connect() as conn:
            runs = chosen_runs(conn, run, tag)
            params = lookups.param_sessions(conn, typed=True)
        for one in runs:
            one.params = params.get(one.run_id, {})
            pushed, warnings = push_run(tracker, opened.engine, one, progress)
            summary.runs.append(pushed)
            summary.warnings.extend(warnings)
        summary.removed = tracker.removed
        return summary
    finally:
        opened.close()


@dataclass
class _AimRun:
    """The adapter's handle of a run: the open Aim run, its writer, and the series it
    read or wrote in this push (what Aim holds of each, by step)."""

    run: Any
    writer: MetricWriter
    series: dict[str, dict[int, MetricPoint]] = field(default_factory=dict)


class AimTracker:
    """The push core's adapter for Aim (:class:`tbconvert.push.core.Tracker`)."""

    one_point_per_step = True
    skips_unchanged = False  # opening a run writes nothing in Aim
    point_tables: tuple[str, ...] = ("scalars", "images", "audio", "texts", "histograms")

    def __init__(self, repo: Any, location: str, store: str, batch_size: int) -> None:
        self.repo, self.store, self.batch_size = repo, store, batch_size
        self.destination = f"aim {redacted(location)}"
        self.removed = 0

    def open_run(self, run: RunRow, known: str | None, warnings: list[str]) -> OpenedRun:
        """The Aim run of ``run``: the one the store recorded, else the one under its hash."""
        handle, created = open_run(self.repo, known, run, self.store)
        remote = self.repo.is_remote_repo
        writer = RemoteMetricWriter(handle) if remote else MetricWriter(handle)
        return OpenedRun(str(handle.hash), created, handle=_AimRun(handle, writer))

    def log_params(self, opened: OpenedRun, run: RunRow, warnings: list[str]) -> int:
        """The run's params as ``run["hparams"]``; how many Aim did not hold."""
        with aim_errors(f"set the params of {run.run_path!r}"):
            return set_params(opened.handle.run, run.params)

    def series_keys(self, run: RunRow) -> dict[int, str]:
        """A scalar series' key: its context and tag (Aim's context and metric name)."""
        return {
            one.id: json.dumps([one.context, one.tag])
            for one in run.series
            if one.plugin == "scalars"
        }

    def log_points(
        self, opened: OpenedRun, run: RunRow, keys: dict[int, str], batch: list[Point]
    ) -> None:
        """Write one batch, as one write."""
        handle: _AimRun = opened.handle
        # The core sends points in step order: each series' points are written together.
        by_series: dict[str, list[MetricPoint]] = {}
        for point in batch:
            by_series.setdefault(keys[point.series_id], []).append(_metric_point(point))
        with aim_errors(f"write the metrics of {run.run_path!r}"):
            for key, points in by_series.items():
                handle.writer.put(*_series(key), points)
                held = handle.series.setdefault(key, {})
                held.update((point.step, point) for point in points)
            handle.writer.commit()

    def identity(self, point: Point) -> Identity:
        """What Aim shows of a point once written, as :meth:`read_history` gives it."""
        value, time = point.value, point.wall_time
        stamp: Any = "nan" if time is None or time != time else time  # Identity's 2nd place
        return point.step, stamp, "nan" if value is None or value != value else float(value)

    def read_history(self, opened: OpenedRun, key: str) -> Iterable[Identity]:
        """Every point Aim holds of the series ``key``."""
        handle: _AimRun = opened.handle
        with aim_errors("read a metric from Aim"):
            held = handle.writer.history(*_series(key))
        handle.series[key] = held
        return [point.identity() for point in held.values()]

    def remove_steps(self, opened: OpenedRun, key: str, steps: list[int]) -> None:
        """Remove the points of the series ``key`` at ``steps``."""
        handle: _AimRun = opened.handle
        with aim_errors("remove steps from an Aim metric"):
            handle.writer.delete(*_series(key), steps)
            handle.writer.commit()
        for step in steps:
            handle.series.get(key, {}).pop(step, None)
        self.removed += len(steps)

    def log_files(self, opened: OpenedRun, run: RunRow, engine: Engine) -> int:
        """Images, audio, texts and histograms as Aim's objects (marked as they go)."""
        with aim_errors(f"write the images, audio, texts and histograms of {run.run_path!r}"):
            return push_objects(
                engine,
                self.destination,
                opened.handle.run,
                run.series,
                batch_size=self.batch_size,
            )

    def finish_run(self, opened: OpenedRun, run: RunRow) -> None:
        """Summarise each series read or written (what Aim's UI lists), close the run and
        bring the repo's index up to date with it."""
        handle: _AimRun = opened.handle
        with aim_errors(f"finish the run {run.run_path!r}"):
            for key, held in handle.series.items():
                if held:
                    handle.writer.describe(*_series(key), [held[s] for s in sorted(held)])
            handle.run.close()
        index_run(self.repo, opened.remote_id)


@functools.lru_cache(maxsize=4096)
def _series(key: str) -> tuple[str, str]:
    """The context and tag of a series' key."""
    context, tag = json.loads(key)
    return str(context), str(tag)


def _metric_point(point: Point) -> MetricPoint:
    value, time = point.value, point.wall_time
    return MetricPoint(
        point.step, _NAN if value is None else float(value), _NAN if time is None else time
    )
