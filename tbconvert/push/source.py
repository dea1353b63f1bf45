"""What a push reads from the store: the runs chosen, their series and their params.

Read with plain SQL on the public views and the series table; the marks are read by
:mod:`tbconvert.push.state`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from tbconvert.filters import Globs, globs, matches
from tbconvert.store.engine import (
    create_store_engine,
    require_existing,
    store_display,
    store_url,
)
from tbconvert.store.errors import translate_errors
from tbconvert.store.migrate import ensure_schema
from tbconvert.store.params_rule import shown_params


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
    # context -> key -> value as v_params shows it (text: a sidecar's key an event file holds
    # is not there, design §6); the last written wins.
    params: dict[str, dict[str, str | None]] = field(default_factory=dict)


def open_for_push(store: str | os.PathLike[str]) -> tuple[Engine, str]:
    """An engine on an existing store whose schema is brought to this version's (a SQLite
    file is upgraded after a backup, as ``tbconvert tf`` does).

    Raises:
        StoreError: there is no store there, or it cannot be upgraded.
    """
    url = store_url(store)
    display = store_display(url)
    require_existing(url)
    engine = create_store_engine(url)
    try:
        with translate_errors(display):
            ensure_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine, display


def chosen_runs(conn: Connection, run: Globs = None, tag: Globs = None) -> list[RunRow]:
    """The runs whose path matches ``run``, each with its series whose tag matches ``tag``
    and its params, by logdir and path."""
    runs = {
        row.run_id: RunRow(
            row.run_id,
            row.source,
            row.logdir,
            row.run_path,
            row.group_path,
            row.first_wall_time,
            row.last_wall_time,
        )
        for row in conn.execute(
            text(
                "SELECT run_id, source, logdir, run_path, group_path, first_wall_time, "
                "last_wall_time FROM v_runs"
            )
        )
        if matches(row.run_path, globs(run))
    }
    tags = globs(tag)
    for series_id, run_id, context, name, plugin in conn.execute(
        text(
            "SELECT s.id, s.run_id, c.name, s.name, s.plugin FROM series AS s "
            "JOIN contexts AS c ON c.id = s.context_id ORDER BY s.id"
        )
    ):
        if run_id in runs and matches(name, tags, name.removesuffix("/text_summary")):
            runs[run_id].series.append(SeriesRow(series_id, context, name, plugin))
    for run_id, context, key, value in conn.execute(
        text(
            "SELECT s.run_id, c.name, p.key, p.value FROM params AS p "
            "JOIN series AS s ON s.id = p.series_id JOIN contexts AS c ON c.id = s.context_id "
            f"WHERE {shown_params()} "
            "ORDER BY s.run_id, c.name, p.step, p.file_id, p.record_offset, p.key"
        )
    ):
        if run_id in runs:
            runs[run_id].params.setdefault(context, {})[key] = value
    return sorted(runs.values(), key=lambda r: (r.logdir, r.run_path, r.run_id))
