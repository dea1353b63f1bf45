"""Queries over a store's public views that the API, exports and the CLI share: long-format
rows, the hparams table, pandas frames.

Long-format rows have the columns of the public views (design §6): ``scalars`` those of
``v_scalars``, ``texts`` of ``v_texts``, ``params`` of ``v_params``.  They are streamed series
by series, so an export needs little memory whatever the store's size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tbconvert.errors import MissingDependency, UsageError, install_hint
from tbconvert.filters import Globs, globs, matches
from tbconvert.query import inventory, lookups
from tbconvert.query.results import Connectable

if TYPE_CHECKING:
    import pandas


KINDS = ("scalars", "params", "texts")
COLUMNS = {
    "scalars": ("run_id", "run_path", "context", "tag", "step", "wall_time", "value"),
    "texts": ("run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "value"),
    "params": ("run_id", "run_path", "context", "key", "value", "value_num", "value_type"),
}
_PLUGIN = {"scalars": "scalars", "texts": "text", "params": "hparams"}
Metric = str | tuple[str, str]


def require_pandas() -> Any:
    """Import pandas, or say which extra installs it.

    Raises:
        MissingDependency: pandas is not installed.
    """
    try:
        import pandas
    except ImportError as error:
        raise MissingDependency(
            "this needs pandas, which is not installed",
            hint=install_hint("pandas"),
        ) from error
    return pandas


def rows(
    store: Connectable,
    kind: str,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    resumed: str = "all",
) -> Iterator[tuple[Any, ...]]:
    """Long-format rows of one kind, in run, context, tag (or key) and step order.

    The filters are checked now; the rows are read as they are consumed.

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` or ``params``.
        run: Globs on run paths.
        tag: Globs on tags (text tags also match without ``/text_summary``); for ``params``,
            on keys.
        context: Globs on contexts.

    Raises:
        UsageError: an unknown kind.
    """
    if kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", hint=f"choose from {', '.join(KINDS)}")
    key_globs = globs(tag) if kind == "params" else ()
    with store.connect() as conn:
        chosen = lookups.series(
            conn, run, None if kind == "params" else tag, context, plugin=_PLUGIN[kind]
        )
    points = lookups.points(store, kind, chosen, resumed)
    return (row for row in points if kind != "params" or matches(row[3], key_globs))


AGGREGATES = ("last", "min", "max", "best")
# Metrics whose best value is their lowest (for ``agg="best"``); any other is best highest.
_LOWER_IS_BETTER = re.compile(
    r"loss|err|perplexity|ppl|mse|mae|rmse|nll|wer|cer|distance|regret|latency|time|cost"
)


def best_direction(tag: str) -> str:
    """``min`` for a metric that looks like a loss or an error, else ``max``."""
    return "min" if _LOWER_IS_BETTER.search(tag.lower()) else "max"


def hparams_table(
    store: Connectable, metrics: Sequence[Metric] = (), run: Globs = None, agg: str = "last"
) -> list[dict[str, Any]]:
    """One row per hparams session: run, context, every param key, then each metric.

    Args:
        store: An open store.
        metrics: Tags, or ``(context, tag)`` pairs, whose last value (highest step, then last
            written) becomes a column named by the tag (``context/tag`` for a pair).  A bare
            tag is looked up in the session's own context, then in the run's ``''`` context,
            then in the only context of the run that has it.
        run: Globs on run paths.
        agg: ``last`` (the default), or ``min`` / ``max`` of the series' values (NaN points
            left out; None when every point is NaN), or ``best``: the lowest of a metric
            that looks like a loss or an error (:func:`best_direction`), the highest of any
            other.

    Returns:
        Dicts with ``run_id``, ``run_path``, ``context``, the params (every key of the store,
        sorted; None where a session lacks one), then the metrics (None where not found).

    Raises:
        UsageError: an unknown ``agg``.
    """
    if agg not in AGGREGATES:
        raise UsageError(f"unknown aggregate {agg!r}", hint=f"choose from {', '.join(AGGREGATES)}")
    with store.connect() as conn:
        sessions = lookups.param_sessions(conn)
        listed = lookups.query(conn, "SELECT run_id, run_path, logdir FROM v_runs")
    found: dict[tuple[Any, ...], Any] = {}
    if agg == "best":
        for direction in ("min", "max"):
            chosen = [m for m in metrics if best_direction(_tag_of(m)) == direction]
            found.update(_metric_values(store, chosen, direction))
    else:
        found = _metric_values(store, metrics, agg)
    keys = sorted(
        {
            key
            for by_context in sessions.values()
            for values in by_context.values()
            for key in values
        }
    )
    table = []
    runs = sorted(
        listed,
        key=lambda run: (run["logdir"], run["run_path"], run["run_id"]),
    )
    for entry in ({"run_id": run["run_id"], "run_path": run["run_path"]} for run in runs):
        if not matches(entry["run_path"], globs(run)):
            continue
        for context, values in sessions.get(entry["run_id"], {}).items():
            row = {**entry, "context": context, **{key: values.get(key) for key in keys}}
            for metric in metrics:
                name = metric if isinstance(metric, str) else "/".join(metric)
                row[name] = _metric_value(found, entry["run_id"], context, metric)
            table.append(row)
    return table


def _metric_values(
    store: Connectable, metrics: Sequence[Metric], agg: str
) -> dict[tuple[Any, ...], Any]:
    # (run_id, context, tag) -> the value of the metric's series under ``agg``.
    if agg == "last":
        sql = "SELECT run_id, context, tag, value FROM v_last_scalars"
        with store.connect() as conn:
            last = lookups.query(conn, sql)
        return {(r["run_id"], r["context"], r["tag"]): r["value"] for r in last}
    tags = sorted({metric if isinstance(metric, str) else metric[1] for metric in metrics})
    if not tags:
        return {}
    names = ", ".join(f":tag{i}" for i in range(len(tags)))
    sql = (
        f"SELECT run_id, context, tag, {agg}(value) AS value FROM v_scalars "
        f"WHERE tag IN ({names}) GROUP BY run_id, context, tag"
    )
    with store.connect() as conn:
        found = lookups.query(conn, sql, {f"tag{i}": tag for i, tag in enumerate(tags)})
    return {(r["run_id"], r["context"], r["tag"]): r["value"] for r in found}


def _tag_of(metric: Metric) -> str:
    return metric if isinstance(metric, str) else metric[1]


def _metric_value(
    last: dict[tuple[Any, ...], Any], run_id: int, context: str, metric: Metric
) -> Any:
    if not isinstance(metric, str):
        return last.get((run_id, *metric))
    for where in (context, ""):
        if (run_id, where, metric) in last:
            return last[(run_id, where, metric)]
    found = [value for (owner, _, tag), value in last.items() if (owner, tag) == (run_id, metric)]
    return found[0] if len(found) == 1 else None


def to_pandas(store: Connectable, kind: str = "scalars", **filters: Any) -> pandas.DataFrame:
    """A pandas DataFrame of ``runs``, ``scalars``, ``texts``, ``params`` or ``hparams``.

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` and ``params`` are long format (the views' columns;
            NaN where a scalar is NULL); ``runs`` is :meth:`Store.runs`; ``hparams`` is
            :func:`hparams_table` (wide: one column per param and metric).
        **filters: Keyword arguments of :func:`rows`, ``Store.runs`` or :func:`hparams_table`.

    Raises:
        MissingDependency: pandas is not installed (``pip install '.[pandas]'``).
        UsageError: an unknown kind.
    """
    library = require_pandas()
    frame: pandas.DataFrame
    if kind == "runs":
        with store.connect() as conn:
            frame = library.DataFrame(inventory.list_runs(conn, **filters))
    elif kind == "hparams":
        frame = library.DataFrame(hparams_table(store, **filters))
    else:
        frame = library.DataFrame.from_records(
            list(rows(store, kind, **filters)), columns=list(COLUMNS[kind])
        )
    if kind == "scalars":
        frame = frame.astype({"step": "int64", "wall_time": "float64", "value": "float64"})
    return frame
