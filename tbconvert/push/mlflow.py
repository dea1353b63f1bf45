"""``tbconvert push mlflow``: a store's runs into an MLflow tracking server (#39).

One MLflow run per tbconvert run, named by its run path and tagged with where it came from
(:func:`~tbconvert.push.mlflow_remote.run_tags`); its params (:func:`~tbconvert.push.keys
.param_keys`); every scalar point as a metric point under its series' key
(:mod:`tbconvert.push.keys`); images, audio, texts, histograms and other tensors as artifacts
(:mod:`tbconvert.push.artifacts`).  Incremental and crash-safe through the store's marks
(:mod:`tbconvert.push.core`, through :class:`MlflowTracker`, its adapter).  Runs are pushed
concurrently on an HTTP server.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection, Engine

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.push import mlflow_remote as remote
from tbconvert.push.artifacts import push_artifacts
from tbconvert.push.core import OpenedRun, Progress, RunPushed, plan_run, push_run
from tbconvert.push.keys import metric_key, param_keys
from tbconvert.push.metrics import Identity, identity, metric_value, point_identity, timestamp_ms
from tbconvert.push.source import RunRow, chosen_runs
from tbconvert.push.state import (
    Point,
    destination,
    named_destination,
    save_destination,
    unnamed_destinations,
)
from tbconvert.query.store import open_store
from tbconvert.urls import redacted

DEFAULT_EXPERIMENT = "tbconvert"
THREADS = 4


@dataclass
class PushSummary:
    """What a push did: the destination, each run's counts, the warnings."""

    tracking_uri: str
    experiment: str
    experiment_id: str  # in a dry run, the one the store recorded ("" if none)
    runs: list[RunPushed] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dry_run: bool = False  # the counts are what a push would send

    @property
    def metrics(self) -> int:
        """Metric points sent, over every run."""
        return sum(run.metrics for run in self.runs)


def push_mlflow(
    store: str | os.PathLike[str],
    tracking_uri: str,
    experiment: str = DEFAULT_EXPERIMENT,
    run: Globs = None,
    tag: Globs = None,
    *,
    dry_run: bool = False,
    batch_size: int = remote.MAX_METRICS_PER_BATCH,
    threads: int = THREADS,
    progress: Progress | None = None,
) -> PushSummary:
    """Push the store's runs (those matching ``run``, with their series matching ``tag``)
    into the MLflow experiment ``experiment`` at ``tracking_uri``; only what no earlier push
    to the same destination sent.  ``progress`` is called with the count of each batch of
    points acknowledged.  With ``dry_run``, count what would go from the store's marks
    alone (:func:`plan_mlflow`), opening no MLflow and writing nothing.

    Raises:
        UsageError: a batch size outside 1..1000.
        MissingDependency: mlflow is not installed.
        PushError: MLflow is unreachable or refuses (a deleted experiment or run).
        StoreError: the store cannot be opened.
    """
    if not 1 <= batch_size <= remote.MAX_METRICS_PER_BATCH:
        raise UsageError(f"batch size {batch_size}", hint="1 to 1000 (MLflow's limit)")
    # The store first: a wrong --store must not leave an MLflow database created behind it.
    opened = open_store(store, upgrade=not dry_run)
    engine, display = opened.engine, opened.display
    try:
        if dry_run:
            with opened.connect() as conn:
                return plan_mlflow(conn, tracking_uri, experiment, run, tag)
        client = remote.make_client(tracking_uri)
        experiment_id = remote.experiment_id(client, experiment)
        summary = PushSummary(redacted(tracking_uri), experiment, experiment_id)
        where = destination("mlflow", tracking_uri, experiment_id)
        with opened.engine.begin() as conn:
            save_destination(conn, "mlflow", tracking_uri, experiment, where)
            runs = chosen_runs(conn, run, tag)
        tracker = MlflowTracker(client, where, experiment_id, display, batch_size)

        def push(one: RunRow) -> tuple[RunPushed, list[str]]:
            return push_run(tracker, engine, one, progress)

        # MLflow's file and SQLite stores in this process take one writer at a time.
        workers = threads if tracking_uri.startswith(("http://", "https://")) else 1
        with ThreadPoolExecutor(max(1, workers)) as pool:
            results = list(pool.map(push, runs))
        for pushed, warnings in results:
            summary.runs.append(pushed)
            summary.warnings.extend(warnings)
        return summary
    finally:
        opened.close()


def plan_mlflow(
    conn: Connection, tracking_uri: str, experiment: str, run: Globs = None, tag: Globs = None
) -> PushSummary:
    """What :func:`push_mlflow` would send, from the store alone: the marks of the
    destination an earlier push to ``experiment`` at ``tracking_uri`` recorded (none: every
    run is new, with all its params)."""
    where = named_destination(conn, "mlflow", tracking_uri, experiment)
    summary = PushSummary(redacted(tracking_uri), experiment, "", dry_run=True)
    if where is None:
        older = unnamed_destinations(conn, destination("mlflow", tracking_uri, ""))
        if older:
            summary.warnings.append(
                f"this store pushed to {redacted(tracking_uri)} before it recorded experiment "
                f"names: counted as if {experiment!r} held none of its runs (a push records it)"
            )
        # No experiment has an empty id: no mark or run is recorded there.
        where = destination("mlflow", tracking_uri, "")
    else:
        summary.experiment_id = where.rpartition(" experiment ")[2]
    planner = MlflowTracker(None, where, summary.experiment_id, "", 1)
    for one in chosen_runs(conn, run, tag):
        planned = plan_run(conn, planner, one)
        planned.params = len(param_keys(one.params)) if planned.created else 0
        summary.runs.append(planned)
    return summary


class MlflowTracker:
    """MLflow's adapter of the push core (:class:`tbconvert.push.core.Tracker`): every point
    goes, with its wall time; called from the pool's threads."""

    one_point_per_step = False
    skips_unchanged = False
    point_tables: tuple[str, ...] = ("scalars", "images", "audio", "texts", "histograms", "tensors")

    def __init__(
        self, client: Any, where: str, experiment_id: str, store: str, batch_size: int
    ) -> None:
        self.client, self.destination = client, where
        self.experiment_id, self.store, self.batch_size = experiment_id, store, batch_size

    def open_run(self, run: RunRow, known: str | None, warnings: list[str]) -> OpenedRun:
        """The MLflow run of ``run`` (found, or created) and the params it holds."""
        tags = {
            key: remote.clip(value, remote.MAX_TAG_VALUE_LENGTH, f"tag {key}", warnings)
            for key, value in remote.run_tags(run, self.store).items()
        }
        remote_id = known
        if remote_id is None:
            remote_id = remote.find_run(self.client, self.experiment_id, run)
        if remote_id is None:
            created = remote.create_run(self.client, self.experiment_id, run, tags)
            return OpenedRun(created, True, {}, tags)
        found = remote.active_run(self.client, remote_id, run)
        return OpenedRun(remote_id, False, dict(found.data.params), tags)

    def log_params(self, opened: OpenedRun, run: RunRow, warnings: list[str]) -> int:
        """The run's tags (``opened.handle``) and its params MLflow does not hold yet."""
        from mlflow.entities import Param, RunTag

        params: list[Any] = []
        existing = opened.params
        for key, stored in param_keys(run.params).items():
            value = remote.clip(
                "" if stored is None else stored,
                remote.MAX_PARAM_VALUE_LENGTH,
                f"param {key!r} of run {run.run_path!r}",
                warnings,
            )
            if key not in existing:
                params.append(Param(key, value))
            elif existing[key] != value:
                warnings.append(
                    f"param {key!r} of run {run.run_path!r} is {existing[key]!r} in MLflow and "
                    f"{value!r} in the store; MLflow keeps a param's first value"
                )
        tag_list = [RunTag(key, value) for key, value in opened.handle.items()]
        step = remote.MAX_PARAMS_TAGS_PER_BATCH
        with remote.mlflow_errors(f"log the params of {run.run_path!r}"):
            for start in range(0, max(len(params), len(tag_list)), step):
                self.client.log_batch(
                    opened.remote_id,
                    params=params[start : start + step],
                    tags=tag_list[start : start + step],
                )
        return len(params)

    def series_keys(self, run: RunRow) -> dict[int, str]:
        """Metric keys by :func:`tbconvert.push.keys.metric_key`."""
        return {s.id: metric_key(s.context, s.tag) for s in run.series if s.plugin == "scalars"}

    def log_points(
        self, opened: OpenedRun, run: RunRow, keys: dict[int, str], batch: list[Point]
    ) -> None:
        """One ``log_batch`` of metrics (step, wall time in ms, value)."""
        from mlflow.entities import Metric

        metrics = [
            Metric(keys[p.series_id], metric_value(p.value), timestamp_ms(p.wall_time), p.step)
            for p in batch
        ]
        with remote.mlflow_errors(f"log the metrics of {run.run_path!r}"):
            self.client.log_batch(opened.remote_id, metrics=metrics)

    def identity(self, point: Point) -> Identity:
        """Step, timestamp and value (:func:`tbconvert.push.metrics.point_identity`)."""
        return point_identity(point)

    def read_history(self, opened: OpenedRun, key: str) -> list[Identity]:
        """The metric's history."""
        with remote.mlflow_errors("read a metric history"):
            history = self.client.get_metric_history(opened.remote_id, key)
        return [identity(m.step, m.timestamp, m.value) for m in history]

    def log_files(self, opened: OpenedRun, run: RunRow, engine: Engine) -> int:
        """The other plugins as artifacts (:mod:`tbconvert.push.artifacts`)."""

        def upload(root: Path) -> None:
            with remote.mlflow_errors(f"upload the artifacts of {run.run_path!r}"):
                self.client.log_artifacts(opened.remote_id, str(root))

        return push_artifacts(engine, self.destination, run.series, upload)

    def finish_run(self, opened: OpenedRun, run: RunRow) -> None:
        """FINISHED, at the run's last wall time."""
        with remote.mlflow_errors(f"end run {run.run_path!r}"):
            end = None if run.last_wall_time is None else timestamp_ms(run.last_wall_time)
            self.client.set_terminated(opened.remote_id, "FINISHED", end_time=end)
