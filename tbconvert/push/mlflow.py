"""``tbconvert push mlflow``: a store's runs into an MLflow tracking server (#39).

One MLflow run per tbconvert run, named by its run path and tagged with where it came from
(:func:`~tbconvert.push.mlflow_remote.run_tags`); its params (:func:`~tbconvert.push.keys
.param_keys`); every scalar point as a metric point under its series' key
(:mod:`tbconvert.push.keys`); images, audio, texts, histograms and other tensors as artifacts
(:mod:`tbconvert.push.artifacts`).  Incremental and crash-safe through the store's marks
(:mod:`tbconvert.push.metrics`).  Runs are pushed concurrently on an HTTP server.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.push import mlflow_remote as remote
from tbconvert.push.artifacts import push_artifacts
from tbconvert.push.keys import metric_key, param_keys
from tbconvert.push.metrics import (
    Marks,
    already_there,
    identity,
    metric_value,
    send_points,
    timestamp_ms,
)
from tbconvert.push.source import RunRow, chosen_runs
from tbconvert.push.state import Point, destination, new_scalars, remote_run, save_run
from tbconvert.query.store import open_store
from tbconvert.urls import redacted

DEFAULT_EXPERIMENT = "tbconvert"
THREADS = 4


@dataclass
class RunPushed:
    """What one run's push did."""

    run_path: str
    remote_id: str
    created: bool = False
    metrics: int = 0  # points sent
    resent_skipped: int = 0  # points a crashed push had sent, found in MLflow
    params: int = 0
    artifacts: int = 0


@dataclass
class PushSummary:
    """What a push did: the destination, each run's counts, the warnings."""

    tracking_uri: str
    experiment: str
    experiment_id: str
    runs: list[RunPushed] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

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
    batch_size: int = remote.MAX_METRICS_PER_BATCH,
    threads: int = THREADS,
) -> PushSummary:
    """Push the store's runs (those matching ``run``, with their series matching ``tag``)
    into the MLflow experiment ``experiment`` at ``tracking_uri``; only what no earlier push
    to the same destination sent.

    Raises:
        UsageError: a batch size outside 1..1000.
        MissingDependency: mlflow is not installed.
        PushError: MLflow is unreachable or refuses (a deleted experiment or run).
        StoreError: the store cannot be opened.
    """
    if not 1 <= batch_size <= remote.MAX_METRICS_PER_BATCH:
        raise UsageError(f"batch size {batch_size}", hint="1 to 1000 (MLflow's limit)")
    # The store first: a wrong --store must not leave an MLflow database created behind it.
    opened = open_store(store, upgrade=True)
    engine, display = opened.engine, opened.display
    try:
        client = remote.make_client(tracking_uri)
        experiment_id = remote.experiment_id(client, experiment)
        summary = PushSummary(redacted(tracking_uri), experiment, experiment_id)
        where = destination("mlflow", tracking_uri, experiment_id)
        with opened.connect() as conn:
            runs = chosen_runs(conn, run, tag)
        pusher = _RunPusher(client, engine, where, experiment_id, display, batch_size)
        # MLflow's file and SQLite stores in this process take one writer at a time.
        workers = threads if tracking_uri.startswith(("http://", "https://")) else 1
        with ThreadPoolExecutor(max(1, workers)) as pool:
            results = list(pool.map(pusher.push, runs))
        for pushed, warnings in results:
            summary.runs.append(pushed)
            summary.warnings.extend(warnings)
        return summary
    finally:
        opened.close()


class _RunPusher:
    """Pushes one run at a time (called from the pool's threads)."""

    def __init__(
        self,
        client: Any,
        engine: Engine,
        where: str,
        experiment_id: str,
        store: str,
        batch_size: int,
    ) -> None:
        self.client, self.engine, self.where = client, engine, where
        self.experiment_id, self.store, self.batch_size = experiment_id, store, batch_size

    def push(self, run: RunRow) -> tuple[RunPushed, list[str]]:
        """Push one run: find or create its MLflow run, then tags, params, metrics."""
        warnings: list[str] = []
        with self.engine.connect() as conn:
            known = remote_run(conn, self.where, run.run_id)
        tags = {
            key: remote.clip(value, remote.MAX_TAG_VALUE_LENGTH, f"tag {key}", warnings)
            for key, value in remote.run_tags(run, self.store).items()
        }
        pushed, existing = self._open_run(run, known, tags)
        # A run found by its tag, not in the store, was created by a push that crashed.
        pending = known[1] if known is not None else not pushed.created
        with self.engine.begin() as conn:
            save_run(conn, self.where, run.run_id, pushed.remote_id, pending=True)
        pushed.params = self._send_tags_and_params(run, pushed.remote_id, tags, existing, warnings)
        pushed.metrics, pushed.resent_skipped = self._send_scalars(run, pushed.remote_id, pending)
        pushed.artifacts = self._send_artifacts(run, pushed.remote_id)
        with remote.mlflow_errors(f"end run {run.run_path!r}"):
            end = None if run.last_wall_time is None else timestamp_ms(run.last_wall_time)
            self.client.set_terminated(pushed.remote_id, "FINISHED", end_time=end)
        with self.engine.begin() as conn:
            save_run(conn, self.where, run.run_id, pushed.remote_id, pending=False)
        return pushed, warnings

    def _open_run(
        self, run: RunRow, known: tuple[str, bool] | None, tags: dict[str, str]
    ) -> tuple[RunPushed, dict[str, str]]:
        """The MLflow run of ``run`` (found, or created) and the params it holds."""
        remote_id = known[0] if known is not None else None
        if remote_id is None:
            remote_id = remote.find_run(self.client, self.experiment_id, run)
        if remote_id is None:
            created = remote.create_run(self.client, self.experiment_id, run, tags)
            return RunPushed(run.run_path, created, created=True), {}
        found = remote.active_run(self.client, remote_id, run)
        return RunPushed(run.run_path, remote_id), dict(found.data.params)

    def _send_tags_and_params(
        self,
        run: RunRow,
        remote_id: str,
        tags: dict[str, str],
        existing: dict[str, str],
        warnings: list[str],
    ) -> int:
        from mlflow.entities import Param, RunTag

        params: list[Any] = []
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
        tag_list = [RunTag(key, value) for key, value in tags.items()]
        step = remote.MAX_PARAMS_TAGS_PER_BATCH
        with remote.mlflow_errors(f"log the params of {run.run_path!r}"):
            for start in range(0, max(len(params), len(tag_list)), step):
                self.client.log_batch(
                    remote_id,
                    params=params[start : start + step],
                    tags=tag_list[start : start + step],
                )
        return len(params)

    def _send_scalars(self, run: RunRow, remote_id: str, pending: bool) -> tuple[int, int]:
        from mlflow.entities import Metric

        keys = {s.id: metric_key(s.context, s.tag) for s in run.series if s.plugin == "scalars"}
        with self.engine.connect() as conn:
            found = new_scalars(conn, self.where, list(keys), covered=pending)
        points = [point for point, _ in found]
        covered = [flag for _, flag in found]
        done = covered
        if pending and not all(covered):
            done = self._already_there(remote_id, keys, points, covered)
        # The marks already cover those: only the rest (a suffix of each file's points) moves.
        fresh = [index for index, flag in enumerate(covered) if not flag]
        points, done = [points[i] for i in fresh], [done[i] for i in fresh]
        skipped = sum(done)

        def send(batch: list[Point]) -> None:
            metrics = [
                Metric(
                    keys[p.series_id],
                    metric_value(p.value),
                    timestamp_ms(p.wall_time),
                    p.step,
                )
                for p in batch
            ]
            with remote.mlflow_errors(f"log the metrics of {run.run_path!r}"):
                self.client.log_batch(remote_id, metrics=metrics)

        marks = Marks(self.engine, self.where, points, done)
        return send_points(marks, send, self.batch_size), skipped

    def _send_artifacts(self, run: RunRow, remote_id: str) -> int:
        def upload(root: Path) -> None:
            with remote.mlflow_errors(f"upload the artifacts of {run.run_path!r}"):
                self.client.log_artifacts(remote_id, str(root))

        return push_artifacts(self.engine, self.where, run.series, upload)

    def _already_there(
        self, remote_id: str, keys: dict[int, str], points: list[Point], covered: list[bool]
    ) -> list[bool]:
        """Which points a crashed push had sent, series by series."""
        there = list(covered)
        by_series: dict[int, list[int]] = {}
        for index, point in enumerate(points):
            by_series.setdefault(point.series_id, []).append(index)
        for series_id, indices in by_series.items():
            if all(covered[i] for i in indices):
                continue
            with remote.mlflow_errors("read a metric history"):
                history = self.client.get_metric_history(remote_id, keys[series_id])
            found = already_there(
                [covered[i] for i in indices],
                [points[i] for i in indices],
                (identity(m.step, m.timestamp, m.value) for m in history),
            )
            for index, value in zip(indices, found, strict=True):
                there[index] = value
        return there
