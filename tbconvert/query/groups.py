"""Runs in groups, and their scalar curves aggregated step by step (``--group-by``).

A group key is a hyper-parameter key (runs with equal values of it form a group) or
``run:REGEX`` (runs whose path gives the same first capture group: ``run:(.*)_seed\\d+``).
``aggregate_over`` names keys to aggregate over: the runs are grouped by every other key of
their params (the usual "over seeds").  A run's params are those of all its sessions.

Aggregated rows: one per (group, context, tag, step), by the one rule of
:mod:`tbconvert.query.aggregation` (steps exact, NaN points left out and counted in ``nan``);
``runs`` is the number of values aggregated, ``std`` the sample standard deviation (ddof=1),
None when ``runs`` is 1; ``mean``, ``min``, ``max`` are None when ``runs`` is 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.query import lookups
from tbconvert.query.aggregation import RunCurve, Statistics, aggregate
from tbconvert.query.results import Connectable
from tbconvert.query.resumed import RESUMED_DEFAULT

STAT_COLUMNS = ("context", "tag", "step", "runs", "nan", "mean", "std", "min", "max")
_RUN_PREFIX = "run:"


@dataclass(frozen=True)
class Grouping:
    """How runs form groups: ``by`` keys (hyper-parameters or ``run:REGEX``), or every
    hyper-parameter but the ``over`` keys."""

    by: tuple[str, ...] = ()
    over: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.by and not self.over:
            raise UsageError("no grouping", hint="give --group-by KEY or --aggregate-over KEY")
        for key in self.by:
            if key.startswith(_RUN_PREFIX):
                try:
                    pattern = re.compile(key[len(_RUN_PREFIX) :])
                except re.error as error:
                    raise UsageError(
                        f"{key!r} is not a regular expression ({error})",
                        hint="run:REGEX, e.g. run:'(.*)_seed\\d+'",
                    ) from error
                if pattern.groups < 1:
                    raise UsageError(
                        f"{key!r} has no capture group",
                        hint="the first group names the runs' group: run:'(.*)_seed\\d+'",
                    )


def run_groups(
    store: Connectable, grouping: Grouping, run: Globs = None
) -> tuple[list[str], dict[int, tuple[Any, ...]]]:
    """The key columns, and each chosen run's group (a tuple of key values, None where a run
    has no such param; runs whose path does not match a ``run:REGEX`` are left out).

    The key columns are the ``by`` keys, then (``over``) every other hyper-parameter key of
    the chosen runs, sorted."""
    chosen = _chosen_runs(store, run)
    keys = list(grouping.by)
    if grouping.over:
        others = {key for _path, params in chosen.values() for key in params}
        keys += sorted(others - set(grouping.over) - set(grouping.by))
    groups: dict[int, tuple[Any, ...]] = {}
    for run_id, (run_path, params) in chosen.items():
        values = []
        for key in keys:
            if key.startswith(_RUN_PREFIX):
                found = re.search(key[len(_RUN_PREFIX) :], run_path)
                if found is None:
                    break
                values.append(found.group(1))
            else:
                values.append(params.get(key))
        else:
            groups[run_id] = tuple(values)
    return keys, groups


def scalars_grouped(
    store: Connectable,
    grouping: Grouping,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    resumed: str = RESUMED_DEFAULT,
) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """Scalars aggregated over the runs of each group: the key columns then
    :data:`STAT_COLUMNS`, one row per (group, context, tag, step), sorted."""
    keys, groups = run_groups(store, grouping, run)
    with store.connect() as conn:
        chosen = [
            series
            for series in lookups.series(conn, run, tag, context, plugin="scalars")
            if series.run_id in groups
        ]
    # (group, context, tag) -> run -> its steps and values, in step then write order.
    members: dict[tuple[Any, ...], dict[int, tuple[list[int], list[float]]]] = {}
    points = lookups.points(store, "scalars", chosen, resumed)  # one snapshot, all series
    for run_id, _path, series_context, series_tag, step, _wall, value in points:
        at = members.setdefault((groups[run_id], series_context, series_tag), {})
        steps, values = at.setdefault(run_id, ([], []))
        steps.append(step)
        values.append(math.nan if value is None else value)
    return [*keys, *STAT_COLUMNS], _export_rows(members)


def group_statistics(
    members: Mapping[tuple[Any, ...], Iterable[RunCurve]],
) -> list[tuple[tuple[Any, ...], Statistics]]:
    """Each group's statistics (:func:`~tbconvert.query.aggregation.aggregate`), keyed by
    ``(group, context, tag)`` with its runs' curves, in the order the grouped export writes
    them: by group (values of any type), then context, then tag."""
    return [
        (key, aggregate(list(curves)))
        for key, curves in sorted(members.items(), key=lambda item: _order(item[0]))
    ]


def _export_rows(
    members: dict[tuple[Any, ...], dict[int, tuple[list[int], list[float]]]],
) -> Iterator[tuple[Any, ...]]:
    for (group, context, tag), statistics in group_statistics(
        {key: runs.values() for key, runs in members.items()}
    ):
        for row in statistics.rows():
            yield (*group, context, tag, *row)


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    # Group values of any types (None, numbers, text) sort by type name, then value.
    group, context, tag = key
    return (tuple((type(value).__name__, value) for value in group), context, tag)


def _chosen_runs(store: Connectable, run: Globs) -> dict[int, tuple[str, dict[str, Any]]]:
    """Each chosen run's path and params, all its sessions together (a later session's
    value wins)."""
    with store.connect() as conn:
        chosen = lookups.runs(conn, run, with_params=True)
    return {
        row["run_id"]: (
            row["run_path"],
            {
                key: value
                for context in sorted(row["params"])
                for key, value in row["params"][context].items()
            },
        )
        for row in chosen
    }
