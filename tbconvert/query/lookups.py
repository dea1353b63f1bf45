"""Look-ups over one read connection that the read API's modules share: runs by path, id or
globs (with their params), series by globs, params by session, and long-format points.

Everything here takes a connection, or a ``Connectable`` (``results``; a ``Store`` is one),
so that ``store``, ``inventory`` and ``tables`` call down into it and nothing calls back up
into ``Store``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.filters import Globs, globs, matches, run_matches
from tbconvert.query.results import Connectable, SeriesRef, typed_param
from tbconvert.query.resumed import (
    ANY_SESSION_LOG_SQL,
    RESUMED,
    STARTS_SQL,
    WRITE_ORDER_SQL,
    is_start,
    last_attempt,
)
from tbconvert.store.params_rule import shown_params

# Text is sorted in Python: a server's collation may order it otherwise than SQLite does.
RUNS_SQL = "SELECT * FROM v_runs"
WRITTEN = "file_id, record_offset, value_index"
POINT_SQL = {
    "scalars": f"SELECT step, wall_time, value FROM scalars WHERE series_id = :id "
    f"ORDER BY step, {WRITTEN}",
    "texts": f"SELECT step, wall_time, idx, value FROM texts WHERE series_id = :id "
    f"ORDER BY step, {WRITTEN}, idx",
    # As ``v_params`` shows them: a sidecar's keys that an event file holds are left out.
    "params": "SELECT p.key, p.value, p.value_num, p.value_type FROM params AS p "
    f"JOIN series AS s ON s.id = p.series_id WHERE p.series_id = :id AND {shown_params()} "
    "ORDER BY p.key, p.step, p.file_id, p.record_offset, p.value_index",
}
_SERIES_SQL = (
    "SELECT s.id, s.run_id, r.run_path, c.name, s.name, s.plugin, r.logdir "
    "FROM series AS s JOIN runs AS r ON r.id = s.run_id "
    "JOIN contexts AS c ON c.id = s.context_id"
)


def query(
    conn: Connection, sql: str, parameters: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Rows of one SQL statement (named ``:parameters``) as dicts."""
    return [dict(row._mapping) for row in conn.execute(text(sql), parameters or {})]


def series(
    conn: Connection,
    run: Globs | int = None,
    tag: Globs = None,
    context: Globs = None,
    plugin: Globs = None,
) -> list[SeriesRef]:
    """The series matching the filters (globs; an int ``run`` is a run id), sorted.

    Text tags also match without the ``/text_summary`` suffix torch and tensorboardX add.
    """
    ordered = sorted(conn.execute(text(_SERIES_SQL)), key=lambda row: (row[6], *row[2:6], row[0]))
    found = [SeriesRef(*row[:6]) for row in ordered]
    if isinstance(run, int):
        found, run = [s for s in found if s.run_id == run], None
    runs, tags, contexts, plugins = (globs(g) for g in (run, tag, context, plugin))
    return [
        s
        for s in found
        if run_matches(s.run_id, s.run_path, runs)
        and matches(s.context, contexts)
        and matches(s.tag, tags, s.tag.removesuffix("/text_summary"))
        and matches(s.plugin, plugins)
    ]


def runs(
    conn: Connection, run: Globs = None, *, with_params: bool = False, typed: bool = True
) -> list[dict[str, Any]]:
    """The ``v_runs`` rows of every run, or of those whose path matches ``run``, sorted by
    logdir, path and id.

    Args:
        conn: A read connection.
        run: Globs on run paths.
        with_params: Add ``params`` to each row: ``{context: {key: value}}``, one entry per
            hparams session (:func:`param_sessions`).
        typed: The params as Python values; False: as the text ``v_params`` shows.
    """
    chosen = globs(run)
    found = [
        row for row in query(conn, RUNS_SQL) if run_matches(row["run_id"], row["run_path"], chosen)
    ]
    found.sort(key=lambda row: (row["logdir"], row["run_path"], row["run_id"]))
    if with_params:
        sessions = param_sessions(conn, typed=typed)
        for row in found:
            row["params"] = sessions.get(row["run_id"], {})
    return found


def param_sessions(
    conn: Connection,
    run_id: int | None = None,
    *,
    typed: bool = True,
    run_ids: Sequence[int] | None = None,
) -> dict[int, dict[str, dict[str, Any]]]:
    """Params of every run (or one, or those of ``run_ids``) as ``{run_id: {context: {key:
    value}}}``.

    Each context holds one hparams session, as every writer lays them out; should one
    hold several, the last written value of a key wins.  The rows are those ``v_params``
    shows (``store.params_rule``); a value is typed (:func:`~tbconvert.query.results
    .typed_param`), or with ``typed=False`` the text ``v_params`` shows.
    """
    source = "params AS p JOIN series AS s ON s.id = p.series_id"
    if run_ids is not None and conn.dialect.name == "postgresql":
        # Some runs' params, series by series (OFFSET 0 keeps the subquery one): PostgreSQL
        # would otherwise scan every param to hash them.
        source = (
            "series AS s CROSS JOIN LATERAL (SELECT * FROM params AS q "
            "WHERE q.series_id = s.id OFFSET 0) AS p"
        )
    sql = (
        "SELECT s.run_id, c.name, p.key, p.value, p.value_num, p.value_type "
        f"FROM {source} JOIN contexts AS c ON c.id = s.context_id WHERE {shown_params()}"
        + ("" if run_id is None else " AND s.run_id = :run")
        + ("" if run_ids is None else f" AND s.run_id IN ({id_list(run_ids)})")
        + " ORDER BY s.run_id, c.name, p.step, p.file_id, p.record_offset, p.key"
    )
    result: dict[int, dict[str, dict[str, Any]]] = {}
    for owner, context, key, value, value_num, value_type in conn.execute(
        text(sql), {"run": run_id}
    ):
        session = result.setdefault(owner, {}).setdefault(context, {})
        session[key] = typed_param(value, value_num, value_type) if typed else value
    return result


def plan_for_few_runs(conn: Connection) -> None:
    """On PostgreSQL, plan this transaction's statements for reading a few runs of a big
    store: without JIT, whose compiling took longer than the statements, and with an index
    probe priced as a read from the cache, not from a disk (``random_page_cost``), or the
    planner scans whole tables for a few hundred runs (docs/performance.md, "Run
    selection")."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET LOCAL jit = off"))
        conn.execute(text("SET LOCAL random_page_cost = 1.1"))


def id_list(ids: Sequence[int]) -> str:
    """Ids as the items of an SQL ``IN`` list (never empty: no id is 0)."""
    return ", ".join(str(int(i)) for i in ids) or "0"


def points(
    store: Connectable,
    table: str,
    chosen: Sequence[SeriesRef],
    resumed: str = "all",
    written: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """Long-format rows of ``scalars``, ``texts`` or ``params`` (the views' columns).

    Rows are streamed series by series, all from one snapshot of the store.  ``resumed``:
    ``all`` (every record) or, for scalars, ``current`` (each series as its last attempt
    left it: :mod:`tbconvert.query.resumed`).  Each series' rows come by step, or with
    ``written`` (scalars, ``all``) in the order they were written, so that a resumed run's
    steps go back where it was resumed, as TensorBoard draws them.
    """
    with _series_reader(store, table, resumed, written) as read:
        for one in chosen:
            yield from read(one)


def points_by_series(
    store: Connectable,
    table: str,
    chosen: Sequence[SeriesRef],
    resumed: str = "all",
    written: bool = False,
) -> Iterator[tuple[SeriesRef, list[tuple[Any, ...]]]]:
    """Each chosen series, in order, with its rows as :func:`points` gives them, all from
    one snapshot of the store."""
    with _series_reader(store, table, resumed, written) as read:
        for one in chosen:
            yield one, list(read(one))


@contextmanager
def _series_reader(
    store: Connectable, table: str, resumed: str, written: bool
) -> Iterator[Callable[[SeriesRef], Iterator[tuple[Any, ...]]]]:
    """A function streaming one series' long-format rows, over one connection."""
    if resumed not in RESUMED:
        raise UsageError(f"unknown --resumed {resumed!r}", hint="all or current")
    with store.connect() as conn:
        # Session starts are read per series only where the store holds any session log.
        current = resumed == "current" and table == "scalars"
        logged = current and conn.execute(text(ANY_SESSION_LOG_SQL)).first() is not None
        conn = conn.execution_options(stream_results=True)  # PostgreSQL: server cursor

        def read(one: SeriesRef) -> Iterator[tuple[Any, ...]]:
            owner: tuple[Any, ...] = (one.run_id, one.run_path, one.context)
            owner += () if table == "params" else (one.tag,)
            if current:
                found = conn.execute(text(WRITE_ORDER_SQL), {"id": one.id}).all()
                starts = [
                    (step, path, offset)
                    for step, path, offset, data in (
                        conn.execute(text(STARTS_SQL), {"id": one.id}) if logged else ()
                    )
                    if is_start(data)
                ]
                for row in last_attempt(found, starts):
                    yield (*owner, *row[:3])
            elif written and table == "scalars":
                for row in conn.execute(text(WRITE_ORDER_SQL), {"id": one.id}):
                    yield (*owner, *row[:3])
            else:
                for row in conn.execute(text(POINT_SQL[table]), {"id": one.id}):
                    yield (*owner, *row)

        yield read


def resolve_run(conn: Connection, run: str | int, display: str) -> dict[str, Any]:
    """The ``v_runs`` row of a run named by path or id (``display`` names the store).

    Raises:
        UsageError: no such run, or several (in different logdirs) with that path.
    """
    rows = [dict(row._mapping) for row in conn.execute(text(RUNS_SQL))]
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
