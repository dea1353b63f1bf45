"""What a push reads from the store: the runs chosen, their series and their params.

Read through the read API's look-ups (:mod:`tbconvert.query.lookups`); the marks are read by
:mod:`tbconvert.push.state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tbconvert.filters import Globs
from tbconvert.query import lookups

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class SeriesRow:
    """One series of a run: its id, context, tag and plugin."""

    id: int
    context: str
    tag: str
    plugin: str


@dataclass
class RunRow:
    """A run of the store with what a push sends of it."""

    run_id: int
    source: str
    logdir: str
    run_path: str
    group_path: str
    first_wall_time: float | None
    last_wall_time: float | None
    series: list[SeriesRow] = field(default_factory=list)
    # context -> key -> value as v_params shows it (text unless read typed; a sidecar's key
    # an event file holds is not there, design §6); the last written wins.
    params: dict[str, dict[str, Any]] = field(default_factory=dict)


def chosen_runs(
    conn: Connection, run: Globs = None, tag: Globs = None, *, typed: bool = False
) -> list[RunRow]:
    """The runs whose path matches ``run`` (:func:`tbconvert.query.lookups.runs`), each with
    its series whose tag matches ``tag`` and its params (``typed``: as Python values, else
    as the text ``v_params`` shows), by logdir and path."""
    chosen = {
        row["run_id"]: RunRow(
            row["run_id"],
            row["source"],
            row["logdir"],
            row["run_path"],
            row["group_path"],
            row["first_wall_time"],
            row["last_wall_time"],
            params=row["params"],
        )
        for row in lookups.runs(conn, run, with_params=True, typed=typed)
    }
    for series in sorted(lookups.series(conn, tag=tag), key=lambda series: series.id):
        if series.run_id in chosen:
            chosen[series.run_id].series.append(
                SeriesRow(series.id, series.context, series.tag, series.plugin)
            )
    return list(chosen.values())
