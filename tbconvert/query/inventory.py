"""What a store holds, run by run: the listing behind ``tbconvert runs`` and ``show``.

``Store.runs`` and ``Store.describe`` are the API; the counting and the per-run summaries
live here, over one read connection.  Counts, step ranges
and last points come from ``series_summaries`` (one row per series and point table), never
from a count over the point tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.filters import Globs
from tbconvert.query import lookups
from tbconvert.query.selection import RunSelection, select_runs
from tbconvert.rows import POINT_TABLES

if TYPE_CHECKING:
    from tbconvert.query.results import SeriesRef

TREND_BUCKETS = 24
TREND_SAMPLE = 32
TREND_STATEMENT = 200  # series whose trends one statement reads
_FILES_SQL = (
    "SELECT f.path, c.name AS context, f.size, f.offset_consumed, f.records, f.damaged_records, "
    "f.status, f.last_error, f.first_wall_time, f.last_wall_time, f.updated_at "
    "FROM event_files AS f JOIN contexts AS c ON c.id = f.context_id WHERE f.run_id = :run"
)
# Files a run holds that are not whole: damaged records, none valid, or a torn tail.
_FILE_TROUBLE_SQL = (
    "SELECT run_id, status, count(*) FROM event_files "
    "WHERE status IN ('damaged', 'invalid', 'partial'){only} GROUP BY run_id, status"
)
_CONTEXTS_SQL = (
    "SELECT DISTINCT u.run_id, c.name FROM (SELECT run_id, context_id FROM series{only} UNION "
    "SELECT run_id, context_id FROM event_files{only}) AS u "
    "JOIN contexts AS c ON c.id = u.context_id"
)
# Up to this many runs chosen by a selection, the counts are read for those runs alone.
_FEW_RUNS = 500


def list_runs(
    conn: Connection, run: Globs = None, selection: RunSelection | None = None
) -> list[dict[str, Any]]:
    """Every run, or those whose path matches ``run``, sorted by logdir and path; or those a
    selection chooses (``--where``, ``--top``), in its order.

    Returns:
        Dicts with the columns of ``v_runs`` plus ``contexts`` (sorted), ``series``,
        ``points`` (rows per point table, non-zero only), ``scalar_points``, ``params``
        (``{context: {key: value}}``: one entry per hparams session) and ``file_problems``
        (files that are not whole, by status: ``damaged``, ``invalid``, ``partial``); with
        a selection's columns, ``values`` (``{name: value}``).
    """
    if selection is not None:
        rows = select_runs(conn, selection, with_params=True)
    else:
        rows = lookups.runs(conn, run, with_params=True)
    # A selection of a few runs counts theirs only, not every run's of a big store.
    few = selection is not None and len(rows) <= _FEW_RUNS
    ids = ", ".join(str(int(row["run_id"])) for row in rows) or "NULL"
    only = f" WHERE run_id IN ({ids})" if few else ""
    counts = _counts(conn, "s.run_id", runs=f"s.run_id IN ({ids})" if few else None)
    series: dict[int, int] = {
        row[0]: row[1]
        for row in conn.execute(text(f"SELECT run_id, count(*) FROM series{only} GROUP BY run_id"))
    }
    contexts: dict[int, list[str]] = {}
    for run_id, name in conn.execute(text(_CONTEXTS_SQL.format(only=only))):
        contexts.setdefault(run_id, []).append(name)
    for names in contexts.values():
        names.sort()
    trouble: dict[int, dict[str, int]] = {}
    trouble_sql = _FILE_TROUBLE_SQL.format(only=only.replace("WHERE", "AND"))
    for run_id, status, count in conn.execute(text(trouble_sql)):
        trouble.setdefault(run_id, {})[status] = count
    for row in rows:
        run_id = row["run_id"]
        row["contexts"] = contexts.get(run_id, [])
        row["series"] = series.get(run_id, 0)
        row["points"] = {
            table: by_run[run_id][0] for table, by_run in counts.items() if run_id in by_run
        }
        row["scalar_points"] = row["points"].get("scalars", 0)
        row["params"] = row.pop("params")  # after the counts, as the listing shows them
        row["file_problems"] = trouble.get(run_id, {})
        if "values" in row:
            row["values"] = row.pop("values")  # the columns asked for, last
    return rows


def describe_run(conn: Connection, run: str | int, display: str) -> dict[str, Any]:
    """One run in full: its ``v_runs`` row, series, params and event files.

    Returns:
        ``{"run": {...}, "series": [...], "params": {context: {key: value}},
        "files": [...]}``.  Each series has its plugin, the table holding its points,
        the number of points, first and last step, and for scalars and texts the last
        value (highest step, then last written); a scalar series also its ``trend``: for each of
        up to 24 equal step ranges, the mean of its first 32 points (None where there is no
        value), for sparklines;
        each file its read state.

    Raises:
        UsageError: no run (or several runs in different logdirs) has that path.
    """
    row = lookups.resolve_run(conn, run, display)
    run_id = row["run_id"]
    counts = _counts(conn, "m.series_id", run_id)
    chosen = lookups.series(conn, run=run_id)
    series = [_series_entry(conn, s, counts) for s in chosen]
    scalar = {s.id: entry for s, entry in zip(chosen, series, strict=True) if "trend" in entry}
    for series_id, trend in _trends(conn, scalar).items():
        scalar[series_id]["trend"] = trend
    files = sorted(
        (dict(file._mapping) for file in conn.execute(text(_FILES_SQL), {"run": run_id})),
        key=lambda file: file["path"],
    )
    params = lookups.param_sessions(conn, run_id).get(run_id, {})
    return {"run": row, "series": series, "params": params, "files": files}


def _counts(
    conn: Connection, key: str, run_id: int | None = None, runs: str | None = None
) -> dict[str, dict[int, tuple[Any, ...]]]:
    # table -> run or series id -> (points, first step, last step, last point's key and
    # scalar value); the last point means something per series only.  ``runs``: a condition
    # on ``s.run_id``, instead of one run.
    where = "" if run_id is None else " WHERE s.run_id = :run"
    if runs is not None:
        where = f" WHERE {runs}"
    sql = (
        f"SELECT m.point_table, {key}, sum(m.points), min(m.first_step), max(m.last_step), "
        "min(m.last_file_id), min(m.last_record_offset), min(m.last_value_index), "
        "min(m.last_value) "
        f"FROM series_summaries AS m JOIN series AS s ON s.id = m.series_id{where} "
        f"GROUP BY m.point_table, {key}"
    )
    result: dict[str, dict[int, tuple[Any, ...]]] = {table: {} for table in POINT_TABLES}
    for table, owner, *numbers in conn.execute(text(sql), {"run": run_id}):
        result[table][owner] = (int(numbers[0]), *numbers[1:])
    return result


def _series_entry(
    conn: Connection,
    series: SeriesRef,
    counts: dict[str, dict[int, tuple[Any, ...]]],
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "context": series.context,
        "tag": series.tag,
        "plugin": series.plugin,
        "table": None,
        "points": 0,
        "first_step": None,
        "last_step": None,
    }
    last_point = last_value = None
    for table, by_series in counts.items():
        # Values a decoder could not read are kept raw, so a series may span two tables.
        if series.id in by_series:
            points, first, last, *key, value = by_series[series.id]
            if entry["table"] is None:
                entry.update(table=table, first_step=first, last_step=last)
                last_point = (last, *key)
                last_value = value
            entry["points"] += points
            entry["first_step"] = min(entry["first_step"], first)
            entry["last_step"] = max(entry["last_step"], last)
    if entry["table"] == "scalars":
        entry["last_value"] = last_value
    elif entry["table"] == "texts" and last_point is not None:
        entry["last_value"] = _last_text(conn, series.id, last_point)
    if entry["table"] == "scalars":
        entry["trend"] = []  # filled for all the run's scalar series at once (_trends)
    return entry


def _trends(conn: Connection, entries: dict[int, dict[str, Any]]) -> dict[int, list[float | None]]:
    """Per scalar series (id -> its entry, with first and last step): for each of
    ``TREND_BUCKETS`` equal step ranges, the mean of its first (up to) ``TREND_SAMPLE``
    points (None: no value in it, or only NaN).

    One index seek and a few rows per range, so a sparkline costs the same for a series of
    ten points or ten million (a mean over every point cost a scan of the series).  The
    ranges of ``TREND_STATEMENT`` series go in one statement: a statement per series cost a
    round trip and a plan each, most of ``tbconvert show``'s time on a server.
    """
    ranges: list[tuple[int, int, int, int]] = []
    for series_id, entry in entries.items():
        first, last = entry["first_step"], entry["last_step"]
        width = -(-(last - first + 1) // TREND_BUCKETS)  # ceiling division, >= 1
        buckets = (last - first) // width + 1
        ranges += [
            (series_id, b, first + b * width, first + (b + 1) * width) for b in range(buckets)
        ]
    means: dict[tuple[int, int], Any] = {}
    per_statement = TREND_STATEMENT * TREND_BUCKETS
    for start in range(0, len(ranges), per_statement):
        # Integers from the store and from arithmetic on them: written into the SQL as such.
        chunk = ranges[start : start + per_statement]
        values = ", ".join(f"({s}, {b}, {low}, {high})" for s, b, low, high in chunk)
        sql = (
            f"WITH k (series_id, bucket, low, high) AS (VALUES {values}) "
            "SELECT k.series_id, k.bucket, (SELECT avg(q.value) FROM (SELECT p.value "
            "FROM scalars AS p WHERE p.series_id = k.series_id AND p.step >= k.low "
            f"AND p.step < k.high ORDER BY step LIMIT {TREND_SAMPLE}) AS q) FROM k"
        )
        means.update(((row[0], row[1]), row[2]) for row in conn.execute(text(sql)))
    trends: dict[int, list[float | None]] = {series_id: [] for series_id in entries}
    for series_id, bucket, _low, _high in ranges:
        mean = means.get((series_id, bucket))
        trends[series_id].append(None if mean is None else float(mean))
    return trends


def _last_text(conn: Connection, series_id: int, key: tuple[Any, ...]) -> Any:
    """The last element of the series' last text (its summary holds the point's key)."""
    step, file_id, offset, index = key
    return conn.execute(
        text(
            "SELECT value FROM texts WHERE series_id = :id AND step = :step "
            "AND file_id = :file AND record_offset = :offset AND value_index = :index "
            "ORDER BY idx DESC LIMIT 1"
        ),
        {"id": series_id, "step": step, "file": file_id, "offset": offset, "index": index},
    ).scalar_one_or_none()
