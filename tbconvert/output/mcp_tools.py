"""The answers of ``tbconvert mcp``'s tools, as plain JSON values: what an agent asks of a
store (which runs, one run, a series, runs side by side, the hparams table, SQL), read-only,
exact, and bounded in size.

Every answer is capped (the caps below, stated in each tool's description) and says when it
was cut (``truncated`` and the full count); nothing is sampled: a long series is thinned
by :mod:`tbconvert.query.thinning`, which keeps each bucket's first, last, lowest, highest and
NaN points, and the answer says so.  JSON has no NaN or infinity, so they are written as the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``; bytes as ``{"bytes": length}``.

This module imports nothing of the MCP SDK: :mod:`tbconvert.output.mcp_server` serves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.query import lookups
from tbconvert.query.current_aggregates import current_values
from tbconvert.query.resumed import RESUMED_DEFAULT
from tbconvert.query.selection import RunSelection
from tbconvert.query.sql import run_read_only
from tbconvert.query.thinning import KEPT_PER_BUCKET

if TYPE_CHECKING:
    from tbconvert.query.attempts import LastAttempt
    from tbconvert.query.store import Store

MAX_RUNS = 200  # runs in a list_runs answer
MAX_SERIES = 500  # series in a describe_run answer
MAX_FILES = 100  # event files in a describe_run answer
DEFAULT_POINTS = 500  # points of get_series unless asked
MAX_POINTS = 5000  # points a get_series answer may ask for
MIN_POINTS = KEPT_PER_BUCKET + 1  # one bucket's first, last, lowest, highest and NaN point
MAX_COMPARED = 200  # (run, context, tag) rows in a compare_runs answer
MAX_HPARAMS_ROWS = 200  # rows of an hparams_table answer
DEFAULT_ROWS = 100  # rows of a query answer unless asked
MAX_ROWS = 1000  # rows a query answer may ask for
MAX_TEXT = 2000  # characters of one text value (a longer one is cut, and counted)


def list_runs(
    store: Store,
    where: str | None = None,
    top: int | None = None,
    by: str | None = None,
    run: str | None = None,
) -> dict[str, Any]:
    """The runs that meet ``where`` (docs/cli.md, "Selecting runs by expression"), the first
    ``top`` by ``by``, with their group, times and params."""
    rows = store.select_runs(where, run=run, top=top, by=by, with_params=True)
    runs = [
        {
            "run": row["run_path"],
            "run_id": row["run_id"],
            "group": row["group_path"],
            "logdir": row["logdir"],
            "first_wall_time": row["first_wall_time"],
            "last_wall_time": row["last_wall_time"],
            "params": row["params"],
        }
        for row in rows[:MAX_RUNS]
    ]
    return plain({"runs": runs, **_count(len(rows), MAX_RUNS)})


def describe_run(store: Store, run: str) -> dict[str, Any]:
    """One run: its series (points, steps, a scalar's last value and trend), params and
    event files."""
    described = store.describe(run)
    series, files = described["series"], described["files"]
    answer = {
        "run": described["run"],
        "params": described["params"],
        "series": series[:MAX_SERIES],
        "series_count": len(series),
        "files": files[:MAX_FILES],
        "files_count": len(files),
        "truncated": len(series) > MAX_SERIES or len(files) > MAX_FILES,
    }
    return plain(answer)


def get_series(
    store: Store,
    run: str,
    tag: str,
    context: str | None = None,
    max_points: int = DEFAULT_POINTS,
    first_step: int | None = None,
    last_step: int | None = None,
    resumed: str = RESUMED_DEFAULT,
    attempts: dict[tuple[str, str, str | None], LastAttempt] | None = None,
) -> dict[str, Any]:
    """One scalar series, every point when at most ``max_points`` are in the range, else
    thinned to at most ``max_points`` that keep its shape.  ``attempts``: the series' last
    attempts as earlier calls read them, kept by the caller (the server) so that a zoom into
    the same series skips reading it again (read anew when the series changed)."""
    if not MIN_POINTS <= max_points <= MAX_POINTS:
        raise UsageError(f"max_points must be {MIN_POINTS} to {MAX_POINTS}, not {max_points}")
    buckets = max_points // MIN_POINTS
    known = attempts.get((run, tag, context)) if attempts is not None else None
    result = store.thinned(
        run, tag, context, buckets, lo=first_step, hi=last_step, resumed=resumed,
        exact_up_to=max_points, attempt=known,
    )  # fmt: skip
    if attempts is not None and result.attempt is not None:
        attempts[(run, tag, context)] = result.attempt
    points = [[p.step, p.wall_time, p.value, *([list(p.roles)] * (not result.exact))]
              for p in result.points]  # fmt: skip
    columns = ["step", "wall_time", "value"] + ([] if result.exact else ["kept_as"])
    answer = {
        "run": run,
        "tag": tag,
        "context": context,
        "resumed": resumed,
        "first_step": result.lo,
        "last_step": result.hi,
        "total_points": result.total,
        "nan_points": result.nan,
        "exact": result.exact,
        "columns": columns,
        "points": points,
        "note": "every point of the range"
        if result.exact
        else f"thinned from {result.total} points into {buckets} equal step ranges, keeping "
        "each one's first and last point, its lowest and highest value and its first NaN: "
        "min, max and NaN are never hidden; ask a narrower first_step..last_step for detail",
    }
    return plain(answer)


def compare_runs(
    store: Store, runs: Sequence[str], tags: Sequence[str] = (), resumed: str = RESUMED_DEFAULT
) -> dict[str, Any]:
    """Runs side by side: for each scalar series of theirs whose tag matches ``tags`` (globs;
    all when empty), its point count and last, lowest and highest value."""
    with store.connect() as conn:
        chosen = lookups.runs(conn, list(runs) or None)
        ids = {row["run_id"] for row in chosen}
        found = [s for s in lookups.series(conn, None, list(tags) or None, None, "scalars")
                 if s.run_id in ids]  # fmt: skip
        shown = found[:MAX_COMPARED]
        summaries = _summaries(conn, [s.id for s in shown])
        if resumed == "current" and shown:
            summaries.update(current_values(conn, sorted({s.tag for s in shown})))
    rows = [
        [s.run_path, s.context, s.tag, *(summaries.get(s.id, {}).get(k) for k in _COMPARED)]
        for s in shown
    ]
    answer = {
        "runs": [row["run_path"] for row in chosen],
        "resumed": resumed,
        "columns": ["run", "context", "tag", "points", "last", "min", "max"],
        "rows": rows,
        **_count(len(found), MAX_COMPARED),
    }
    return plain(answer)


_COMPARED = ("count", "last", "min", "max")
_SUMMARY_SQL = (
    "SELECT series_id, points, last_value, min_value, max_value FROM series_summaries "
    "WHERE point_table = 'scalars' AND series_id IN ({ids})"
)


def _summaries(conn: Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Every point's count and last, lowest and highest value, as the writer keeps them."""
    if not ids:
        return {}
    sql = _SUMMARY_SQL.format(ids=", ".join(str(int(i)) for i in ids))
    return {row[0]: dict(zip(_COMPARED, row[1:], strict=True)) for row in conn.execute(text(sql))}


def hparams_table(
    store: Store,
    where: str | None = None,
    metrics: Sequence[str] = (),
    top: int | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """The hparams table of the runs that meet ``where``: a row per run, a column per param
    and per metric (its last value; ``CONTEXT:TAG`` names a context)."""
    from tbconvert.output.hparams import hparams_rows

    selection = RunSelection(where=where, top=top, by=by)
    columns, rows = hparams_rows(store, list(metrics), selection=selection)
    answer = {"columns": columns, "rows": rows[:MAX_HPARAMS_ROWS]}
    return plain({**answer, **_count(len(rows), MAX_HPARAMS_ROWS)})


def query(store: Store, sql: str, max_rows: int = DEFAULT_ROWS) -> dict[str, Any]:
    """One read-only SQL statement's rows (a write is refused: :mod:`tbconvert.query.sql`)."""
    if not 0 <= max_rows <= MAX_ROWS:
        raise UsageError(f"max_rows must be 0 to {MAX_ROWS}, not {max_rows}")
    result = run_read_only(store, sql, max_rows=max_rows)
    answer = {"columns": list(result.columns), "rows": result.rows, "truncated": result.truncated}
    if result.truncated:
        answer["note"] = f"only the first {max_rows} rows: narrow the statement or raise max_rows"
    return plain(answer)


def _count(count: int, cap: int) -> dict[str, Any]:
    return {"count": count, "truncated": count > cap}


def plain(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` as JSON can hold it exactly: non-finite floats as strings, bytes as their
    length, text longer than :data:`MAX_TEXT` cut (``"cut_texts"`` counts them)."""
    cut = [0]
    result: dict[str, Any] = _plain(answer, cut)
    if cut[0]:
        result["cut_texts"] = cut[0]
        result["truncated"] = True
    return result


def _plain(value: Any, cut: list[int]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": len(value)}
    if isinstance(value, str) and len(value) > MAX_TEXT:
        cut[0] += 1
        return value[:MAX_TEXT] + f"... ({len(value) - MAX_TEXT} more characters)"
    if isinstance(value, dict):
        return {str(key): _plain(item, cut) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, cut) for item in value]
    return value
