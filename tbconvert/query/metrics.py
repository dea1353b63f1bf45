"""Metrics next to hyper-parameters: which series fill which column of an hparams table.

Writers put a run's metrics in contexts more often than in the run directory itself:
``add_scalars('loss', {'train': .., 'val': ..})`` (contexts ``train``, ``val``), Keras and
the TF2 hparams API (``train/``, ``validation/``), ``add_hparams``' own session directory.
So a metric named by its tag is looked up in every context of the run:

- where every row has it in at most one context, it is one column named by the tag;
- else one column per context, ``TAG (CONTEXT)`` (the run directory's own context ``''`` is
  the bare ``TAG``), and a row's cell is empty where it did not log the tag in that context.

A row's hparams session context is labelled ``hparams`` whatever its directory is called
(torch and tensorboardX name it by ``time.time()``), so that the runs of a sweep line up; the
sessions of the run other than the row's own are left out (their values are their rows').
A metric may also name one context: ``CONTEXT:TAG``, or the pair ``(context, tag)``.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from tbconvert.query import lookups
from tbconvert.query.current_aggregates import current_values
from tbconvert.query.results import Connectable

Metric = str | tuple[str, str]
# (owner, context, tag) -> the value of that series under the aggregate.
Values = dict[tuple[Any, str, str], Any]
SESSION = "hparams"


@dataclass(frozen=True)
class Owner:
    """A row of a table with metric columns: a run (or one of its hparams sessions)."""

    key: Hashable
    session: str | None = None  # the row's hparams session context, labelled ``hparams``
    excluded: frozenset[str] = frozenset()  # contexts of the run whose values are not the row's


def parse_metric(metric: Metric, tags: Collection[str]) -> Metric:
    """A tag, or a ``(context, tag)`` pair from ``CONTEXT:TAG``.

    A text that is a scalar tag of the store stays a tag, colons and all; else the first
    split at a ``:`` whose right side is a tag gives the pair.
    """
    if not isinstance(metric, str):
        return (metric[0], metric[1])
    if metric in tags:
        return metric
    parts = metric.split(":")
    for cut in range(1, len(parts)):
        tag = ":".join(parts[cut:])
        if tag in tags:
            return (":".join(parts[:cut]), tag)
    return metric


def tag_of(metric: Metric) -> str:
    """The tag a metric names."""
    return metric if isinstance(metric, str) else metric[1]


def column_name(tag: str, context: str) -> str:
    """``TAG (CONTEXT)``; the bare tag for the run directory's own context ``''``."""
    return f"{tag} ({context})" if context else tag


def scalar_tags(store: Connectable) -> set[str]:
    """Every scalar tag of the store."""
    sql = "SELECT DISTINCT name FROM series WHERE plugin = 'scalars'"
    with store.connect() as conn:
        return {row["name"] for row in lookups.query(conn, sql)}


def metric_values(
    store: Connectable, metrics: Sequence[Metric], agg: str, resumed: str = "all"
) -> Values:
    """``(run_id, context, tag)`` -> the value of each series of the metrics' tags.

    ``agg`` is ``last`` (highest step, then last written), ``min`` or ``max`` (NaN points left
    out; None when every point is NaN); ``resumed`` is ``all`` (every point the series holds)
    or ``current`` (the points its last attempt left: :mod:`tbconvert.query.resumed`).
    """
    if not metrics:
        return {}
    tags = sorted({tag_of(metric) for metric in metrics})
    if agg == "last":
        sql = "SELECT run_id, context, tag, value FROM v_last_scalars"
        with store.connect() as conn:
            found = lookups.query(conn, sql)
    else:
        names = ", ".join(f":tag{i}" for i in range(len(tags)))
        sql = (
            f"SELECT run_id, context, tag, {agg}(value) AS value FROM v_scalars "
            f"WHERE tag IN ({names}) GROUP BY run_id, context, tag"
        )
        with store.connect() as conn:
            found = lookups.query(conn, sql, {f"tag{i}": tag for i, tag in enumerate(tags)})
    values = {(r["run_id"], r["context"], r["tag"]): r["value"] for r in found}
    if resumed == "current":
        values.update(_current_values(store, tags, agg))
    return values


# The run, context and tag of some series, as the views name them.
_SERIES_KEYS_SQL = (
    "SELECT s.id, s.run_id, c.name, s.name FROM series AS s "
    "JOIN contexts AS c ON c.id = s.context_id WHERE s.id IN ({series})"
)


def _current_values(store: Connectable, tags: Sequence[str], agg: str) -> Values:
    """The values of the series of ``tags`` that may have several attempts, over their last
    attempt's points (every other series' points are all its last attempt's)."""
    with store.connect() as conn:
        current = current_values(conn, tags)
        if not current:
            return {}
        marks = ", ".join(str(int(series_id)) for series_id in current)
        keys = conn.execute(text(_SERIES_KEYS_SQL.format(series=marks))).all()
    return {(run_id, context, tag): current[i][agg] for i, run_id, context, tag in keys}


def metric_columns(
    metrics: Sequence[Metric], owners: Sequence[Owner], values: Mapping[tuple[Any, str, str], Any]
) -> tuple[list[str], list[list[Any]]]:
    """The metric columns of a table, and each owner's cells (see the module's rules).

    Args:
        metrics: Tags or ``(context, tag)`` pairs, in column order.
        owners: The table's rows.
        values: ``(owner key, context, tag)`` -> value (:func:`metric_values`).

    Returns:
        The column names (each once), and per owner its cells in that order.
    """
    by_tag: dict[tuple[Hashable, str], dict[str, Any]] = {}
    for (key, context, tag), value in values.items():
        by_tag.setdefault((key, tag), {})[context] = value
    columns: list[str] = []
    cells: list[list[Any]] = [[] for _ in owners]
    for metric in metrics:
        found = [_labelled(owner, by_tag.get((owner.key, tag_of(metric)), {})) for owner in owners]
        chosen: list[tuple[str, str | None]]
        if not isinstance(metric, str):
            chosen = [(column_name(metric[1], metric[0]), metric[0])]
        elif all(len(by_label) <= 1 for by_label in found):
            chosen = [(metric, None)]  # whichever one context each row has
        else:
            labels = sorted({label for by_label in found for label in by_label})
            chosen = [(column_name(metric, label), label) for label in labels]
        for name, label in chosen:
            if name in columns:
                continue
            columns.append(name)
            for row, by_label in zip(cells, found, strict=True):
                row.append(
                    next(iter(by_label.values()), None) if label is None else by_label.get(label)
                )
    return columns, cells


def _labelled(owner: Owner, by_context: dict[str, Any]) -> dict[str, Any]:
    # The session's own context last, so that it wins over a context named "hparams".
    found: dict[str, Any] = {}
    for context in sorted(by_context, key=lambda name: name == owner.session):
        if context in owner.excluded:
            continue
        label = SESSION if owner.session and context == owner.session else context
        found[label] = by_context[context]
    return found
