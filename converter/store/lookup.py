"""Lookups behind the read API: a run by path or id, and point counts per run or series."""

from __future__ import annotations

import difflib
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from converter.errors import UsageError
from converter.rows import POINT_TABLES
from converter.store.results import SeriesRef

_RUNS_SQL = "SELECT * FROM v_runs"
_LAST = "step DESC, file_id DESC, record_offset DESC, value_index DESC"


def resolve_run(conn: Connection, run: str | int, display: str) -> dict[str, Any]:
    """The ``v_runs`` row of a run named by path or id.

    Raises:
        UsageError: no such run, or several runs in different logdirs have that path.
    """
    rows = [dict(row._mapping) for row in conn.execute(text(_RUNS_SQL))]
    found = [row for row in rows if run in (row["run_path"], row["run_id"])]
    if not found and isinstance(run, str) and run.isdigit():
        found = [row for row in rows if row["run_id"] == int(run)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(
            f"run {run!r} exists in several logdirs",
            path=display,
            hint="name it by id: "
            + ", ".join(f"{row['run_id']} ({row['source']})" for row in found),
        )
    close = difflib.get_close_matches(str(run), [row["run_path"] for row in rows], n=3)
    raise UsageError(
        f"no run {run!r} in the store",
        path=display,
        hint=(f"did you mean {', '.join(close)}? " if close else "")
        + "'tbconvert runs' lists the runs",
    )


def point_counts(
    conn: Connection, key: str, run_id: int | None = None
) -> dict[str, dict[int, tuple[int, int, int]]]:
    """table -> run or series id (``key``) -> (points, first step, last step)."""
    where = "" if run_id is None else " WHERE s.run_id = :run"
    result = {}
    for table in POINT_TABLES:
        sql = (
            f"SELECT {key}, count(*), min(p.step), max(p.step) FROM {table} AS p "
            f"JOIN series AS s ON s.id = p.series_id{where} GROUP BY {key}"
        )
        result[table] = {row[0]: tuple(row[1:]) for row in conn.execute(text(sql), {"run": run_id})}
    return result


def series_entry(
    conn: Connection,
    series: SeriesRef,
    counts: dict[str, dict[int, tuple[int, int, int]]],
) -> dict[str, Any]:
    """One series of ``Store.describe``: its table, points, steps and last value."""
    entry: dict[str, Any] = {
        "context": series.context,
        "tag": series.tag,
        "plugin": series.plugin,
        "table": None,
        "points": 0,
        "first_step": None,
        "last_step": None,
    }
    for table, by_series in counts.items():
        # Values a decoder could not read are kept raw, so a series may span two tables.
        if series.id in by_series:
            points, first, last = by_series[series.id]
            if entry["table"] is None:
                entry.update(table=table, first_step=first, last_step=last)
            entry["points"] += points
            entry["first_step"] = min(entry["first_step"], first)
            entry["last_step"] = max(entry["last_step"], last)
    if entry["table"] in ("scalars", "texts"):
        entry["last_value"] = conn.execute(
            text(
                f"SELECT value FROM {entry['table']} WHERE series_id = :id ORDER BY {_LAST}"
                + (", idx DESC" if entry["table"] == "texts" else "")
                + " LIMIT 1"
            ),
            {"id": series.id},
        ).scalar()
    return entry
