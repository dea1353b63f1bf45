"""What the viewer's page asks for, as JSON-ready dicts: the same for ``serve`` (per request)
and ``publish`` (once, into files).

A chart's lines come thinned on the store's side (:mod:`tbconvert.query.thinning`): the
visible x range cut into one bucket per pixel column, each bucket's first, last, lowest and
highest point drawn and its NaN marked, so no spike or NaN hides; a range holding few enough
points comes whole.  Every value a page shows is data, never markup: the page writes names
with ``textContent`` (see ``static/viewer.js``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text

from tbconvert.errors import UsageError
from tbconvert.output.choices import X_AXES
from tbconvert.query import lookups, thinning
from tbconvert.query.aggregation import aggregate
from tbconvert.query.groups import Grouping, run_groups
from tbconvert.query.results import SeriesRef

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from tbconvert.query.attempts import LastAttempt
    from tbconvert.query.store import Store

MAX_BUCKETS = 4000
_SUMMARIES_SQL = (
    "SELECT s.id, m.points, m.first_step, m.last_step, m.first_wall_time, m.last_wall_time, "
    "m.last_value, m.min_value, m.max_value FROM series AS s "
    "JOIN series_summaries AS m ON m.series_id = s.id AND m.point_table = 'scalars' "
    "WHERE s.plugin = 'scalars'"
)
# The scalar series of one tag in chosen runs, in the order of ``lookups.series``.
_TAG_SERIES_SQL = (
    "SELECT s.id, s.run_id, r.run_path, c.name, s.name, s.plugin, r.logdir FROM series AS s "
    "JOIN runs AS r ON r.id = s.run_id JOIN contexts AS c ON c.id = s.context_id "
    "WHERE s.plugin = 'scalars' AND s.name = :tag AND s.run_id IN ({runs})"
)


def make_read_only(store: Store) -> None:
    """Make every connection of ``store`` refuse writes (SQLite's ``query_only``, a
    PostgreSQL session of read-only transactions), whatever the page asks."""

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if store.engine.dialect.name == "sqlite":
            cursor.execute("PRAGMA query_only = ON")
        else:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_connection.commit()
        cursor.close()

    event.listen(store.engine, "connect", on_connect)
    store.engine.dispose()  # connections made before the listener are not reused


def overview(store: Store, run: Sequence[str] = ()) -> dict[str, Any]:
    """The runs table and the scalar tags: each run's path, logdir, group, contexts,
    params (all sessions together) and, per scalar series, its last value, min and max.

    Returns:
        ``{"runs": [...], "tags": [...], "params": [...], "metrics": [...]}``, the params'
        keys and the metrics' names sorted; a metric is ``TAG``, or ``CONTEXT:TAG`` for a
        series in a sub-directory of its run.
    """
    with store.connect() as conn:
        runs = lookups.runs(conn, list(run) or None, with_params=True)
        chosen = lookups.series(conn, list(run) or None, plugin="scalars")
        summaries = {row[0]: row[1:] for row in conn.execute(text(_SUMMARIES_SQL))}
    by_run: dict[int, dict[str, Any]] = {}
    for row in runs:
        params = {
            k: v for context in sorted(row["params"]) for k, v in row["params"][context].items()
        }
        by_run[row["run_id"]] = {
            "id": row["run_id"],
            "run": row["run_path"],
            "logdir": row["logdir"],
            "group": row["group_path"],
            "contexts": [],
            "params": {key: _plain(value) for key, value in params.items()},
            "metrics": {},
        }
    for series in chosen:
        entry = by_run.get(series.run_id)
        if entry is None:
            continue
        if series.context not in entry["contexts"]:
            entry["contexts"].append(series.context)
        summary = summaries.get(series.id)
        if summary is not None:
            entry["metrics"][metric_name(series)] = {
                "last": _number(summary[5]),
                "min": _number(summary[6]),
                "max": _number(summary[7]),
                "points": summary[0],
            }
    return {
        "runs": list(by_run.values()),
        "tags": sorted({series.tag for series in chosen}),
        "params": sorted({key for entry in by_run.values() for key in entry["params"]}),
        "metrics": sorted({name for entry in by_run.values() for name in entry["metrics"]}),
    }


def metric_name(series: SeriesRef) -> str:
    """How the runs table names a series' column: its tag, after its context if it has one."""
    return f"{series.context}:{series.tag}" if series.context else series.tag


def chart(
    store: Store,
    tag: str,
    run_ids: Sequence[int],
    x: str = "step",
    low: float | None = None,
    high: float | None = None,
    buckets: int = 1000,
    attempts: dict[int, LastAttempt] | None = None,
) -> dict[str, Any]:
    """One chart's lines: every scalar series of ``tag`` in the chosen runs, over the x range
    ``low..high`` (all of it when left out), in at most ``buckets`` buckets.

    Args:
        store: The store (opened read-only by the caller).
        tag: The scalar tag, exactly as logged.
        run_ids: The runs drawn.
        x: ``step``, ``relative`` (seconds since the series' first point) or ``wall``.
        low, high: The visible x range, in the units of ``x``.
        buckets: Pixel columns of the chart: each bucket drawn as its min and max.
        attempts: Each series' last attempt as an earlier chart read it, kept up to date
            here: a series unchanged since is not scanned again (``serve`` keeps one).

    Returns:
        ``{"tag", "x", "lines": [{"run_id", "run", "context", "x", "y", "nan", "thinned",
        "points"}]}``: ``x`` and ``y`` the points drawn (a thinned bucket's first, last,
        lowest and highest), ``y`` None and ``x`` in ``nan`` for a NaN or infinite point,
        ``points`` the points in range.

    Raises:
        UsageError: an unknown x axis or a bucket count out of range.
    """
    if x not in X_AXES:
        raise UsageError(f"unknown x axis {x!r}", hint=f"one of {', '.join(X_AXES)}")
    if not 1 <= buckets <= MAX_BUCKETS:
        raise UsageError(f"{buckets} buckets", hint=f"between 1 and {MAX_BUCKETS}")
    column = "step" if x == "step" else "wall_time"
    lines = []
    with store.connect() as conn:
        chosen = tag_series(conn, tag, run_ids)
        starts = {}
        if x == "relative":
            starts = {row[0]: row[4] for row in conn.execute(text(_SUMMARIES_SQL))}
        shifts = {s.id: (starts.get(s.id) or 0.0) if x == "relative" else 0.0 for s in chosen}
        found = thinning.thin_many(
            conn,
            [series.id for series in chosen],
            buckets,
            lo=low,
            hi=high,
            x=column,
            attempts=attempts,
            shifts=shifts,
        )
    for series in chosen:
        answer = found[series.id]
        if attempts is not None and answer.attempt is not None:
            attempts[series.id] = answer.attempt
        lines.append(
            {
                "run_id": series.run_id,
                "run": series.run_path,
                "context": series.context,
                **_line(answer, column, shifts[series.id]),
            }
        )
    return {"tag": tag, "x": x, "lines": lines}


def tag_series(conn: Connection, tag: str, run_ids: Sequence[int]) -> list[SeriesRef]:
    """The scalar series of ``tag`` (exactly) in the runs ``run_ids``, sorted as
    :func:`tbconvert.query.lookups.series` sorts them: one statement for what a chart draws,
    not every series of the store filtered by globs."""
    if not run_ids:
        return []
    runs = ", ".join(str(int(run_id)) for run_id in run_ids)
    found = conn.execute(text(_TAG_SERIES_SQL.format(runs=runs)), {"tag": tag})
    ordered = sorted(found, key=lambda row: (row[6], *row[2:6], row[0]))
    return [SeriesRef(*row[:6]) for row in ordered]


def _line(found: thinning.Thinned, column: str, offset: float) -> dict[str, Any]:
    xs: list[float] = []
    ys: list[float | None] = []
    nan: list[float] = []
    for point in found.points:
        at: float = point.step if column == "step" else (point.wall_time or 0.0) - offset
        value = _number(point.value)
        if value is None:
            nan.append(at)
        xs.append(at)
        ys.append(value)
    return {"x": xs, "y": ys, "nan": nan, "thinned": not found.exact, "points": found.total}


def groups(
    store: Store,
    tag: str,
    grouping: Grouping,
    run_ids: Sequence[int],
    band: str = "std",
) -> dict[str, Any]:
    """One chart's groups: for each (group, context) the mean and band of its runs' series
    of ``tag`` at every step, by :func:`tbconvert.query.aggregation.aggregate` (the numbers
    of ``export scalars --aggregate-over``).

    Returns:
        ``{"tag", "keys", "groups": [{"label", "values", "context", "runs", "steps", "mean",
        "low", "high", "count"}]}`` (None where a statistic has too few values).
    """
    keys, member_of = run_groups(store, grouping)
    with store.connect() as conn:
        chosen = [s for s in tag_series(conn, tag, run_ids) if s.run_id in member_of]
    members: dict[tuple[Any, ...], dict[int, tuple[list[int], list[float]]]] = {}
    paths: dict[tuple[Any, ...], set[str]] = {}
    for run_id, path, context, _tag, step, _wall, value in lookups.points(
        store, "scalars", chosen, "current"
    ):
        key = (member_of[run_id], context)
        steps, values = members.setdefault(key, {}).setdefault(run_id, ([], []))
        steps.append(step)
        values.append(math.nan if value is None else value)
        paths.setdefault(key, set()).add(path)
    found = []
    for (group, context), runs in sorted(members.items(), key=lambda item: repr(item[0])):
        statistics = aggregate(list(runs.values()))
        low, high = statistics.band(band, statistics.mean)
        found.append(
            {
                "label": ", ".join(f"{k}={v}" for k, v in zip(keys, group, strict=True)),
                "values": [_plain(value) for value in group],
                "context": context,
                "runs": sorted(paths[(group, context)]),
                "steps": statistics.steps,
                "mean": [_number(value) for value in statistics.mean],
                "low": [_number(value) for value in low],
                "high": [_number(value) for value in high],
                "count": statistics.runs,
            }
        )
    return {"tag": tag, "keys": keys, "groups": found}


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
