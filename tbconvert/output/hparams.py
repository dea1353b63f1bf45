"""The hparams comparison behind ``tbconvert hparams``: sessions as rows, sorted, checked.

:func:`tbconvert.query.tables.hparams_table` builds the table (one row per hparams session,
one column per hyper-parameter and metric); this adds what a user comparing runs needs on
top: metrics that exist nowhere are an error naming the tags that do (a typo would otherwise
give an empty column), and rows sorted on any column, missing values last.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.output.export import table_of
from tbconvert.query.metrics import SESSION, Metric, column_name, parse_metric, tag_of
from tbconvert.query.resumed import RESUMED_DEFAULT
from tbconvert.query.selection import RunSelection, select_runs, selected_globs

if TYPE_CHECKING:
    from tbconvert.query.store import Store


def hparams_rows(
    store: Store,
    metrics: Sequence[Metric] = (),
    run: Globs = None,
    agg: str = "last",
    sort: str | None = None,
    selection: RunSelection | None = None,
    resumed: str = RESUMED_DEFAULT,
) -> tuple[list[str], list[list[Any]]]:
    """The hparams table as columns and rows, optionally sorted.

    Args:
        store: An open store.
        metrics: Scalar tags, ``CONTEXT:TAG`` or ``(context, tag)`` pairs to add as columns
            (one per context where a run logged the tag in several:
            :func:`tbconvert.query.tables.hparams_table`).
        run: Globs on run paths.
        agg: ``last``, ``min``, ``max`` or ``best`` of each metric's series.
        sort: A column to sort on, ascending; ``-column`` for descending.  A metric's
            column may also be named ``CONTEXT:TAG``.
        selection: The runs chosen by expression (``--where``, ``--top``, ``--by``), in
            place of ``run``: rows in its order unless ``sort`` is given, and a column for
            each of its ``columns``.
        resumed: ``current`` (the default): each metric's series as its last attempt left
            it; ``all``: every point it holds.

    Raises:
        UsageError: a metric no scalar series has, or an unknown sort column.
    """
    check_metrics(store, metrics)
    chosen: list[dict[str, Any]] | None = None
    ordered = False
    if selection is not None and selection.by_expression:
        ordered = not sort and selection.by is not None
        with store.connect() as conn:
            chosen = select_runs(conn, selection)
            run = selected_globs(conn, selection)
    columns, data = table_of(store, "hparams", run, metrics=metrics, agg=agg, resumed=resumed)
    columns, rows = list(columns), [list(row) for row in data]
    if chosen is not None:
        columns, rows = _selected(columns, rows, chosen, ordered=ordered)
    return columns, sort_rows(columns, rows, sort) if sort else rows


def _selected(
    columns: list[str], rows: list[list[Any]], chosen: list[dict[str, Any]], *, ordered: bool
) -> tuple[list[str], list[list[Any]]]:
    """The rows of the chosen runs (column 0 is ``run_id``), in their order when
    ``ordered``, each with the values of the selection's columns."""
    order = {row["run_id"]: index for index, row in enumerate(chosen)}
    values = {row["run_id"]: row.get("values", {}) for row in chosen}
    names = list(chosen[0].get("values", {})) if chosen else []
    kept = [row for row in rows if row[0] in order]
    if ordered:
        kept.sort(key=lambda row: order[row[0]])
    return columns + names, [row + [values[row[0]][name] for name in names] for row in kept]


def check_metrics(store: Store, metrics: Sequence[Metric]) -> None:
    """Fail on a metric that no scalar series of the store has, naming the close ones.

    A ``CONTEXT:TAG`` (or pair) needs the tag in that context of some run; the context
    ``hparams`` also means any hparams session's own context, whatever its name.

    Raises:
        UsageError: naming the first unknown metric and what exists.
    """
    series = store.series(plugin="scalars")
    tags = sorted({s.tag for s in series})
    chosen = [parse_metric(metric, tags) for metric in metrics]
    pairs = {(s.context, s.tag) for s in series}
    if any(not isinstance(metric, str) and metric[0] == SESSION for metric in chosen):
        sessions = {(s.run_id, s.context) for s in store.series(plugin="hparams")}
        pairs |= {(SESSION, s.tag) for s in series if (s.run_id, s.context) in sessions}
    for metric in chosen:
        known = metric in tags if isinstance(metric, str) else metric in pairs
        if known:
            continue
        tag = tag_of(metric)
        close = difflib.get_close_matches(tag, tags, n=3)
        raise UsageError(
            f"no scalar series {tag!r} in the store"
            + ("" if isinstance(metric, str) else f" in context {metric[0]!r}"),
            path=store.display,
            hint=f"did you mean {', '.join(close)}?"
            if close
            else f"its scalar tags: {', '.join(tags[:20]) or '(none)'}",
        )


def sort_rows(columns: list[str], rows: list[list[Any]], sort: str) -> list[list[Any]]:
    """Rows sorted on one column (``-name``: descending); None and NaN always come last.

    Raises:
        UsageError: no such column.
    """
    descending = sort.startswith("-") and sort not in columns
    name = sort[1:] if descending else sort
    if name not in columns and ":" in name:
        # CONTEXT:TAG, as --metric takes it, names the column TAG (CONTEXT).
        context, tag = name.split(":", 1)
        name = column_name(tag, context) if column_name(tag, context) in columns else name
    if name not in columns:
        raise UsageError(f"no column {name!r} to sort on", hint=f"choose from {', '.join(columns)}")
    position = columns.index(name)
    present = [row for row in rows if not _missing(row[position])]
    missing = [row for row in rows if _missing(row[position])]
    # Numbers before text when a column mixes them; each in its own order.
    present.sort(key=lambda row: _order(row[position]), reverse=descending)
    return present + missing


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _order(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value))
