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

from tbconvert.errors import UsageError, import_extra
from tbconvert.filters import Globs, globs, matches
from tbconvert.query import inventory, lookups
from tbconvert.query import metrics as metric_rules
from tbconvert.query.metrics import Metric
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


def require_pandas() -> Any:
    """Import pandas, or say which extra installs it.

    Raises:
        MissingDependency: pandas is not installed.
    """
    return import_extra("pandas", "pandas", "a DataFrame")


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
    store: Connectable,
    metrics: Sequence[Metric] = (),
    run: Globs = None,
    agg: str = "last",
    resumed: str = "all",
) -> list[dict[str, Any]]:
    """One row per hparams session: run, context, every param key, then each metric.

    Args:
        store: An open store.
        metrics: Tags, ``CONTEXT:TAG`` texts or ``(context, tag)`` pairs, whose value
            becomes a column.  A tag is looked up in every context of the run: one column
            named by the tag where each row has it in one context at most, else one column
            per context, ``TAG (CONTEXT)``; a row's own session context is ``hparams``
            whatever its directory's name (:mod:`tbconvert.query.metrics`).  A pair gives
            the one column ``TAG (CONTEXT)``.
        run: Globs on run paths.
        agg: ``last`` (the default: highest step, then last written), or ``min`` / ``max``
            of the series' values (NaN points left out; None when every point is NaN), or
            ``best``: the lowest of a metric that looks like a loss or an error
            (:func:`best_direction`), the highest of any other.
        resumed: ``all`` (every point of a metric's series) or ``current`` (the points its
            last attempt left, as ``--resumed current`` reads a resumed run).

    Returns:
        Dicts with ``run_id``, ``run_path``, ``context``, the params (every key the selected
        runs' sessions have, sorted; None where a session lacks one), then the metrics
        (None where not found).

    Raises:
        UsageError: an unknown ``agg``.
    """
    if agg not in AGGREGATES:
        raise UsageError(f"unknown aggregate {agg!r}", hint=f"choose from {', '.join(AGGREGATES)}")
    with store.connect() as conn:
        runs = lookups.runs(conn, run, with_params=True)
    tags = metric_rules.scalar_tags(store) if metrics else set()
    chosen = [metric_rules.parse_metric(metric, tags) for metric in metrics]
    table = []
    owners = []
    for entry in runs:
        by_context = entry["params"]
        for context in sorted(by_context):
            table.append((entry["run_id"], entry["run_path"], context, by_context[context]))
            # The run's other sessions' values are in their own rows.
            others = frozenset(by_context) - {context}
            owners.append(metric_rules.Owner(entry["run_id"], context, others))
    keys = sorted({key for *_, values in table for key in values})
    names, cells = metric_rules.metric_columns(chosen, owners, _values(store, chosen, agg, resumed))
    return [
        {
            "run_id": run_id,
            "run_path": run_path,
            "context": context,
            **{key: values.get(key) for key in keys},
            **dict(zip(names, row_cells, strict=True)),
        }
        for (run_id, run_path, context, values), row_cells in zip(table, cells, strict=True)
    ]


def _values(
    store: Connectable, metrics: Sequence[Metric], agg: str, resumed: str
) -> metric_rules.Values:
    if agg != "best":
        return metric_rules.metric_values(store, metrics, agg, resumed)
    found: metric_rules.Values = {}
    for direction in ("min", "max"):
        chosen = [m for m in metrics if best_direction(metric_rules.tag_of(m)) == direction]
        if chosen:
            found.update(metric_rules.metric_values(store, chosen, direction, resumed))
    return found


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
