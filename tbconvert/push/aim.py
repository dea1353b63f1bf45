"""``tbconvert push aim``: a store's runs into an Aim repo (#48).

One Aim run per tbconvert run, under a hash derived from the store and the run
(:mod:`tbconvert.push.aim_repo`); its params as ``run["hparams"]`` (typed), where it came from
(source, group, path) as ``run["tbconvert"]``; each scalar series as an Aim metric named by its
tag in the context ``{"subset": CONTEXT}`` (none for the run directory itself), every point at
its step with its own wall time (:mod:`tbconvert.push.aim_scalars`); images, audio, texts and
histograms as Aim's objects (:mod:`tbconvert.push.aim_objects`).  Incremental and crash-safe
through the store's marks, like ``push mlflow``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.push.aim_metrics import MetricWriter
from tbconvert.push.aim_objects import push_objects
from tbconvert.push.aim_repo import (
    aim_errors,
    index_run,
    open_repo,
    open_run,
    repo_location,
    set_params,
)
from tbconvert.push.aim_scalars import push_scalars
from tbconvert.push.source import RunRow, chosen_runs
from tbconvert.push.state import remote_run, save_run
from tbconvert.query import lookups
from tbconvert.query.store import open_store
from tbconvert.urls import redacted

BATCH_SIZE = 5000  # points per write into Aim (and per move of the marks)


@dataclass
class AimRunPushed:
    """What one run's push did."""

    run_path: str
    run_hash: str
    created: bool = False
    metrics: int = 0  # metric points sent
    resent_skipped: int = 0  # points an interrupted push had sent, found in Aim
    left_out: int = 0  # points Aim cannot hold: earlier attempts, a step's earlier points
    removed: int = 0  # steps removed from Aim: a later attempt of their series went back
    params: int = 0
    objects: int = 0  # images, audio, texts and histograms sent (a record each)


@dataclass
class AimPushSummary:
    """What a push into Aim did: the repo, each run's counts."""

    repo: str
    runs: list[AimRunPushed] = field(default_factory=list)
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
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> AimPushSummary:
    """Push the store's runs (those matching ``run``, with their series matching ``tag``)
    into the Aim repo ``repo`` (a directory, created when missing, or ``aim://HOST:PORT``);
    only what no earlier push to the same repo sent.  ``progress`` is told (runs done, runs
    in all) after each run.

    Raises:
        UsageError: a batch size under 1.
        MissingDependency: aim is not installed.
        PushError: Aim cannot open the repo or write a run.
        StoreError: the store cannot be opened.
    """
    if batch_size < 1:
        raise UsageError(f"batch size {batch_size}", hint="at least 1")
    # The store first: a wrong --store must not leave an Aim repo created behind it.
    opened = open_store(store, upgrade=True)
    try:
        location = repo_location(repo)
        aim_repo = open_repo(location)
        summary = AimPushSummary(redacted(location))
        where = f"aim {redacted(location)}"
        with opened.connect() as conn:
            runs = chosen_runs(conn, run, tag)
            params = lookups.param_sessions(conn, typed=True)
        for one in runs:
            one.params = params.get(one.run_id, {})
            summary.runs.append(
                _push_run(opened.engine, where, aim_repo, one, opened.display, batch_size)
            )
            if progress is not None:
                progress(len(summary.runs), len(runs))
        return summary
    finally:
        opened.close()


def _push_run(
    engine: Engine, where: str, repo: Any, run: RunRow, store: str, batch_size: int
) -> AimRunPushed:
    """Push one run: find or create its Aim run, then params, metrics, objects, the index."""
    with engine.connect() as conn:
        known = remote_run(conn, where, run.run_id)
    aim_run, created = open_run(repo, None if known is None else known[0], run, store)
    pushed = AimRunPushed(run.run_path, str(aim_run.hash), created=created)
    try:
        with engine.begin() as conn:
            save_run(conn, where, run.run_id, pushed.run_hash, pending=True)
        with aim_errors(f"write the run {run.run_path!r}"):
            pushed.params = set_params(aim_run, run.params)
            scalars = push_scalars(
                engine,
                where,
                MetricWriter(aim_run),
                run.series,
                batch_size=batch_size,
                fresh_run=created,
            )
            pushed.objects = push_objects(engine, where, aim_run, run.series, batch_size=batch_size)
    finally:
        aim_run.close()
    pushed.metrics, pushed.resent_skipped = scalars.sent, scalars.found
    pushed.left_out, pushed.removed = scalars.left_out, scalars.removed
    index_run(repo, pushed.run_hash)
    with engine.begin() as conn:
        save_run(conn, where, run.run_id, pushed.run_hash, pending=False)
    return pushed
