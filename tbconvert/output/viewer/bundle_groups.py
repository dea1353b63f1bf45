"""The groups of a published bundle (``publish --group-by/--aggregate-over``): per tag, each
(group, context)'s statistics at every step, by the rule of ``export scalars
--aggregate-over`` (:func:`tbconvert.query.groups.group_statistics`), so that the page draws
the mean and any band offline.

A group carries its mean, std, min and max (base64 float64, NaN where a statistic has too
few values), its runs per step, and Student's t for each count of runs, from which the page
makes the ``std``, ``sem``, ``ci95``, ``minmax`` and ``none`` bands with the arithmetic of
:meth:`tbconvert.query.aggregation.Statistics.band`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tbconvert.filters import Globs
from tbconvert.output.viewer import bundle_encoding as encoding
from tbconvert.query import lookups
from tbconvert.query.aggregation import Statistics, t975
from tbconvert.query.groups import Grouping, group_statistics, run_groups

if TYPE_CHECKING:
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store


def grouping_json(grouping: Grouping | None) -> dict[str, list[str]] | None:
    """The grouping as the page's view names it (``by``, ``over``), or None."""
    if grouping is None:
        return None
    return {"by": list(grouping.by), "over": list(grouping.over)}


def groups_by_tag(
    store: Store,
    grouping: Grouping,
    chosen: Sequence[SeriesRef],
    run: Globs = None,
    step: Callable[[int], Any] | None = None,
) -> Iterator[tuple[str, str]]:
    """Each tag of ``chosen`` with the JSON text of its groups' data file, tag by tag (one
    tag's points in memory at a time)."""
    keys, member_of = run_groups(store, grouping, run)
    members = [series for series in chosen if series.run_id in member_of]
    for tag in sorted({series.tag for series in members}):
        of_tag = [series for series in members if series.tag == tag]
        curves: dict[tuple[Any, ...], dict[int, tuple[list[int], list[float]]]] = {}
        paths: dict[tuple[Any, ...], set[str]] = {}
        for run_id, path, context, _tag, at, _wall, value in lookups.points(
            store, "scalars", of_tag, "current"
        ):
            key = (member_of[run_id], context, tag)
            steps, values = curves.setdefault(key, {}).setdefault(run_id, ([], []))
            steps.append(at)
            values.append(math.nan if value is None else value)
            paths.setdefault(key, set()).add(path)
        found = group_statistics({key: runs.values() for key, runs in curves.items()})
        groups = [_group_json(keys, key, sorted(paths[key]), stats) for key, stats in found]
        if step is not None:
            step(len(of_tag))
        yield tag, encoding.to_json({"tag": tag, "keys": keys, "groups": groups})


def _group_json(
    keys: list[str], key: tuple[Any, ...], runs: list[str], statistics: Statistics
) -> dict[str, Any]:
    group, context, _tag = key
    return {
        "label": ", ".join(f"{k}={v}" for k, v in zip(keys, group, strict=True)),
        "context": context,
        "runs": runs,
        "dx": encoding.step_differences(statistics.steps),
        "count": statistics.runs,
        "t975": [
            t975(count - 1) if count > 1 else None for count in range(max(statistics.runs) + 1)
        ],
        **{
            name: encoding.floats(getattr(statistics, name), narrow=False)["y64"]
            for name in ("mean", "std", "min", "max")
        },
    }
