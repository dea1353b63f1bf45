"""The MLflow side of a push: the client, the experiment, finding a run again, and MLflow's
errors as one-line :class:`~tbconvert.errors.PushError`.

A pushed run is found again by its ``tbconvert.run_id`` tag (with its source and run path,
so that two stores pushing into one experiment never take each other's runs), never by its
name: a crash between creating it and recording its id leaves nothing else to find it by.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tbconvert.errors import PushError, import_extra
from tbconvert.push.source import RunRow
from tbconvert.store.engine import sqlite_path
from tbconvert.urls import redacted

RUN_ID_TAG = "tbconvert.run_id"
# MLflow 3.x's limits (mlflow.utils.validation): per log_batch call 1,000 metrics, 100 params
# and 100 tags, 1,000 entities in all; a param value 6,000 characters, a tag value 8,000.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
_PROBE_SECONDS = 10
# Tracking URIs that name a database MLflow itself creates and migrates (SQLAlchemy URLs).
_DATABASE_SCHEMES = re.compile(r"(sqlite|postgresql|mysql|mssql)[+a-z0-9]*:", re.IGNORECASE)


def make_client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` for ``tracking_uri``, after checking that a server answers.

    Raises:
        MissingDependency: mlflow is not installed.
        PushError: an HTTP tracking server does not answer.
    """
    MlflowClient = import_extra("mlflow.tracking", "mlflow", "pushing to MLflow").MlflowClient
    if tracking_uri.startswith(("http://", "https://")):
        _probe(tracking_uri)
    # Ending a run prints its web address on stdout, which carries data only (--json).
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    if _DATABASE_SCHEMES.match(tracking_uri):
        return _open_database(MlflowClient, tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri)


def _open_database(client_class: Any, tracking_uri: str) -> Any:
    """A client of MLflow's tracking database, opened now, so that one that MLflow's own
    set-up left half made is said in one line with its fix, not as a traceback of its
    migrations.

    MLflow creates a new tracking database in several hundred statements, not one
    transaction: stopped midway (a first push killed), every later opening fails ("table ...
    already exists", "duplicate column", or an out-of-date schema), and ``mlflow db upgrade``
    fails the same way.  Nothing reached such a database, since its set-up never ended:
    removing it is the fix.
    """
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    try:
        client = client_class(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)  # some MLflow versions open it lazily
    except (SQLAlchemyError, MlflowException) as error:
        raise _opening_error(error, tracking_uri) from error
    return client


def _opening_error(error: Exception, tracking_uri: str) -> PushError:
    message = str(getattr(error, "message", error)).splitlines()[0]
    where = sqlite_path(tracking_uri) or redacted(tracking_uri)
    if "already exists" in message or "duplicate column" in message:
        what = (
            "is half made: MLflow creates it in many steps, and a first push (or other "
            "MLflow use) was stopped midway"
        )
        hint = _half_made_fix(tracking_uri, upgrade=False)
    elif "out-of-date database schema" in message:
        what = (
            "has an older schema than this MLflow: an older MLflow wrote it, or MLflow's own "
            "set-up of it was stopped midway"
        )
        hint = _half_made_fix(tracking_uri, upgrade=True)
    else:
        return PushError(f"MLflow cannot open its tracking database ({message})", path=where)
    return PushError(f"MLflow's tracking database {what}", path=where, hint=hint)


def _half_made_fix(tracking_uri: str, *, upgrade: bool) -> str:
    path = sqlite_path(tracking_uri)
    empty = path is not None and _holds_no_runs(path)
    upgrade_it = f"back it up and run mlflow db upgrade {redacted(tracking_uri)}"
    if not upgrade:
        if empty:
            return f"it holds no runs: remove it (rm {path}) and push again"
        return "restore it from a backup: mlflow db upgrade cannot finish it"
    if empty:
        return (
            f"if its set-up was stopped (no runs in it), remove it (rm {path}); else {upgrade_it}"
        )
    return upgrade_it


def _holds_no_runs(path: str) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            [(count,)] = db.execute("SELECT count(*) FROM runs").fetchall()
    except sqlite3.Error:
        return False
    return bool(count == 0)


def _probe(tracking_uri: str) -> None:
    # MLflow's client retries a refused connection for minutes before it gives up.
    url = tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=_PROBE_SECONDS):
            return
    except urllib.error.HTTPError:
        return  # a server answered (behind a proxy, /health may not be routed)
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise PushError(
            f"cannot reach the MLflow tracking server at {redacted(tracking_uri)} ({reason})",
            hint="is it running? check --tracking-uri",
        ) from error


@contextmanager
def mlflow_errors(what: str) -> Iterator[None]:
    """MLflow's exceptions while doing ``what`` as one-line PushErrors."""
    from mlflow.exceptions import MlflowException

    try:
        yield
    except MlflowException as error:
        message = str(getattr(error, "message", error)).splitlines()[0]
        raise PushError(f"MLflow refused to {what}: {message}") from error


def experiment_id(client: Any, name: str) -> str:
    """The id of the experiment ``name``, created when missing.

    Raises:
        PushError: the experiment is deleted (MLflow keeps its name until it is purged).
    """
    with mlflow_errors(f"find experiment {name!r}"):
        found = client.get_experiment_by_name(name)
        if found is None:
            return str(client.create_experiment(name))
    if found.lifecycle_stage == "deleted":
        raise PushError(
            f"the MLflow experiment {name!r} is deleted",
            hint=f"restore it (mlflow experiments restore --experiment-id "
            f"{found.experiment_id}) or choose another --experiment",
        )
    return str(found.experiment_id)


def run_tags(run: RunRow, store: str) -> dict[str, str]:
    """The tags that say where a run came from."""
    return {
        RUN_ID_TAG: str(run.run_id),
        "tbconvert.run_path": run.run_path,
        "tbconvert.source": run.source,
        "tbconvert.logdir": run.logdir,
        "tbconvert.group": run.group_path,
        "tbconvert.store": store,
    }


def active_run(client: Any, remote_id: str, run: RunRow) -> Any:
    """The MLflow run a run was pushed to before.

    Raises:
        PushError: it was deleted in MLflow meanwhile.
    """
    from mlflow.exceptions import MlflowException

    hint = (
        f"restore it (mlflow runs restore --run-id {remote_id}), or push into another --experiment"
    )
    try:
        found = client.get_run(remote_id)
    except MlflowException as error:
        if getattr(error, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
            raise PushError(
                f"run {run.run_path!r} was pushed to MLflow run {remote_id}, which no longer "
                "exists",
                hint="push into another --experiment",
            ) from error
        raise PushError(f"MLflow refused to read run {remote_id}: {error}") from error
    if found.info.lifecycle_stage == "deleted":
        raise PushError(
            f"run {run.run_path!r} was pushed to MLflow run {remote_id}, which is deleted",
            hint=hint,
        )
    return found


def find_run(client: Any, experiment: str, run: RunRow) -> str | None:
    """The id of the MLflow run tagged as ``run``'s (one a crash left unrecorded), if any."""
    from mlflow.entities import ViewType

    with mlflow_errors("search runs"):
        found = client.search_runs(
            [experiment],
            filter_string=f"tags.`{RUN_ID_TAG}` = '{run.run_id}'",
            run_view_type=ViewType.ALL,
        )
    for candidate in found:
        tags = candidate.data.tags
        if (tags.get("tbconvert.source"), tags.get("tbconvert.run_path")) == (
            run.source,
            run.run_path,
        ):
            if candidate.info.lifecycle_stage == "deleted":
                active_run(client, candidate.info.run_id, run)  # says so
            return str(candidate.info.run_id)
    return None


def create_run(client: Any, experiment: str, run: RunRow, tags: dict[str, str]) -> str:
    """A new MLflow run for ``run``, named by its path, started at its first wall time."""
    start = None if run.first_wall_time is None else round(run.first_wall_time * 1000)
    with mlflow_errors(f"create a run for {run.run_path!r}"):
        created = client.create_run(experiment, start_time=start, tags=tags, run_name=run.run_path)
    return str(created.info.run_id)


def clip(value: str, limit: int, what: str, warnings: list[str]) -> str:
    """``value`` cut to ``limit`` characters, with a warning when it was longer."""
    if len(value) <= limit:
        return value
    warnings.append(f"{what} is {len(value)} characters; MLflow keeps {limit}: cut")
    return value[:limit]
