"""Choosing runs: ``--run`` globs and ``--where``, then ``--top N --by``, with ``--column``
values; the one selection every read command and ``push`` make (docs/cli.md, "Selecting runs
by expression").

The expressions compile to one SQL query over ``v_runs`` (``query.expression_sql``).  Aggregates
follow ``--resumed``: with ``all`` every point counts; with ``current`` (the default) a series
reads as its last attempt left it, so a series whose steps go back somewhere in write order,
or whose run and context logged a ``SessionLog``, is summarised exactly from its current points
(``query.resumed``) and its values are bound into the query; every other series has one
attempt, and its summary answers.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.filters import Globs, globs, matches
from tbconvert.query import lookups
from tbconvert.query.expression_sql import Compiled, Compiler
from tbconvert.query.expressions import (
    Aggregate,
    ExpressionError,
    Value,
    aggregates_of,
    parse_condition,
    parse_value,
)
from tbconvert.query.results import SeriesRef
from tbconvert.query.resumed import RESUMED, RESUMED_DEFAULT


@dataclass(frozen=True)
class RunSelection:
    """Which runs a command reads, and the values it shows of each.

    Attributes:
        run: Globs on run paths (``--run``).
        where: A condition (``--where``).
        top: Keep the first N runs by ``by`` (``--top``).
        by: A value to order by, descending; a leading ``-`` orders ascending (``--by``).
        columns: ``(name, value expression)`` pairs (``--column NAME=EXPR``).
        resumed: ``current`` or ``all``: which points the aggregates read.
    """

    run: Globs = None
    where: str | None = None
    top: int | None = None
    by: str | None = None
    columns: Sequence[tuple[str, str]] = ()
    resumed: str = RESUMED_DEFAULT

    @property
    def by_expression(self) -> bool:
        """Whether anything beyond globs is asked."""
        return bool(self.where or self.by or self.top is not None or self.columns)


def parse_column(option: str) -> tuple[str, str]:
    """``NAME=EXPR`` (``--column``) as a pair.

    Raises:
        UsageError: no ``=``, or an empty name.
    """
    name, equals, expression = option.partition("=")
    if not equals or not name.strip() or not expression.strip():
        raise UsageError(
            f"--column {option!r}: expected NAME=EXPR", hint='--column "best=min(loss)"'
        )
    return name.strip(), expression


def select_runs(
    conn: Connection, selection: RunSelection, *, with_params: bool = False
) -> list[dict[str, Any]]:
    """The ``v_runs`` rows of the runs a selection chooses, in its order.

    Without ``by``, runs come sorted by logdir, path and id, as :func:`lookups.runs` gives
    them; with it, by its value (descending, or ascending for ``-EXPR``; missing values last,
    ties by path).  Each row gets ``values`` (``{column name: value}``) when columns are
    asked, and ``params`` with ``with_params``.

    Raises:
        ExpressionError: an expression that does not parse or compile (a ``UsageError``).
        UsageError: an aggregate without a context whose tag a run logs in several.
    """
    if selection.resumed not in RESUMED:
        raise UsageError(f"unknown --resumed {selection.resumed!r}", hint="all or current")
    if selection.top is not None and selection.top < 0:
        raise UsageError(f"--top {selection.top}: expected a count of runs, 0 or more")
    rows = lookups.runs(conn, selection.run, with_params=with_params)
    if not selection.by_expression:
        return rows
    values = _query(conn, selection, {row["run_id"] for row in rows})
    chosen = [row for row in rows if row["run_id"] in values]
    for row in chosen:
        by, *columns = values[row["run_id"]]
        row["by"] = by
        if selection.columns:
            row["values"] = dict(zip([name for name, _ in selection.columns], columns, strict=True))
    if selection.by is not None:
        chosen = _ordered(chosen, ascending=selection.by.lstrip().startswith("-"))
    if selection.top is not None:
        chosen = chosen[: selection.top]
    for row in chosen:
        row.pop("by")
    return chosen


def _query(conn: Connection, selection: RunSelection, run_ids: set[int]) -> dict[int, list[Any]]:
    """``{run_id: [by value, column values...]}`` of the runs that meet ``where``."""
    where = parse_condition(selection.where, "--where") if selection.where else None
    by = None
    if selection.by is not None:
        stripped = selection.by.lstrip()
        offset = len(selection.by) - len(stripped) + stripped.startswith("-")
        by = _shifted(parse_value, selection.by[offset:], offset)
    columns = [parse_value(source, f"--column {name}") for name, source in selection.columns]
    labels = ["--where", "--by", *(f"--column {name}" for name, _ in selection.columns)]
    trees: list[Any] = [where, by, *columns]
    labelled = [
        (label, node)
        for label, tree in zip(labels, trees, strict=True)
        if tree is not None
        for node in aggregates_of(tree)
    ]
    _check_contexts(conn, labelled, selection.run)
    found = [node for _, node in labelled]
    exact = {}
    if selection.resumed == "current" and found:
        exact = current_values(conn, sorted({node.tag for node in found}))
    compiler = Compiler(conn.dialect.name, exact)
    condition = compiler.condition(where, "--where") if where else "1 = 1"
    outputs = [compiler.value(by, "--by") if by else Compiled(None, None)]
    outputs += [
        compiler.value(tree, f"--column {name}")
        for tree, (name, _) in zip(columns, selection.columns, strict=True)
    ]
    select = ", ".join(
        f"{part or 'NULL'} AS v{index}_{kind}"
        for index, output in enumerate(outputs)
        for kind, part in zip(("n", "t"), output, strict=True)
    )
    sql = f"SELECT r.run_id, {select} FROM v_runs AS r {compiler.joins()} WHERE {condition}"
    result: dict[int, list[Any]] = {}
    for row in conn.execute(text(sql), compiler.parameters):
        if row[0] in run_ids:
            pairs = zip(row[1::2], row[2::2], strict=True)
            result[row[0]] = [number if number is not None else text_ for number, text_ in pairs]
    return result


def _shifted(parse: Callable[[str, str], Value], source: str, offset: int) -> Value:
    """Parse ``--by``, with an error's column moved right by ``offset`` (a stripped ``-``)."""
    try:
        result = parse(source, "--by")
    except ExpressionError as error:
        label, _, rest = error.message.partition(": column ")
        column = error.column + offset
        raise ExpressionError(label, column, rest.partition(": ")[2], error.hint) from None
    return result


def _ordered(rows: list[dict[str, Any]], *, ascending: bool) -> list[dict[str, Any]]:
    """Rows by their ``by`` value (numbers, then text; missing last), ties by path."""
    rows = sorted(rows, key=lambda row: (row["run_path"], row["logdir"], row["run_id"]))
    numbers = [row for row in rows if isinstance(row["by"], int | float)]
    texts = [row for row in rows if isinstance(row["by"], str)]
    missing = [row for row in rows if row["by"] is None]
    reverse = not ascending
    return [
        *sorted(numbers, key=lambda row: row["by"], reverse=reverse),
        *sorted(texts, key=lambda row: row["by"], reverse=reverse),
        *missing,
    ]


def _check_contexts(conn: Connection, found: list[tuple[str, Aggregate]], run: Globs) -> None:
    """Refuse a tag no scalar series has, and an aggregate without a context whose tag a
    chosen run logs in several contexts and not in its own; ``found``: (label, aggregate)."""
    chosen = globs(run)
    for label, node in found:
        _check_tag(conn, label, node)
    for tag in sorted({node.tag for _, node in found if node.context is None}):
        rows = conn.execute(
            text(
                "SELECT r.run_path, c.name FROM series AS s JOIN runs AS r ON r.id = s.run_id "
                "JOIN contexts AS c ON c.id = s.context_id "
                "WHERE s.plugin = 'scalars' AND s.name = :tag AND s.run_id IN ("
                "SELECT o.run_id FROM series AS o JOIN contexts AS oc ON oc.id = o.context_id "
                "WHERE o.plugin = 'scalars' AND o.name = :tag GROUP BY o.run_id "
                "HAVING count(*) > 1 AND sum(CASE WHEN oc.name = '' THEN 1 ELSE 0 END) = 0)"
            ),
            {"tag": tag},
        ).all()
        contexts: dict[str, list[str]] = {}
        for path, context in rows:
            if matches(path, chosen):
                contexts.setdefault(path, []).append(context)
        if contexts:
            path = min(contexts)
            label, node = next(
                (label, node) for label, node in found if node.tag == tag and node.context is None
            )
            names = ", ".join(repr(name) for name in sorted(contexts[path]))
            raise ExpressionError(
                label,
                node.column,
                f"{node.function}({tag}): run {path!r} logs {tag!r} in contexts {names}",
                hint=f'name one: {node.function}({tag}, context="...")',
            )


def _check_tag(conn: Connection, label: str, node: Aggregate) -> None:
    """Refuse a tag no scalar series of the store has (a typo would select nothing)."""
    found = conn.execute(
        text("SELECT 1 FROM series WHERE plugin = 'scalars' AND name = :tag LIMIT 1"),
        {"tag": node.tag},
    ).first()
    if found is None:
        tags = conn.execute(
            text("SELECT DISTINCT name FROM series WHERE plugin = 'scalars'")
        ).scalars()
        close = difflib.get_close_matches(node.tag, list(tags), n=3)
        raise ExpressionError(
            label,
            node.column,
            f"no scalar series {node.tag!r} in the store",
            hint=f"did you mean {', '.join(close)}?" if close else "tbconvert show RUN lists them",
        )


# Series whose write order has a step lower than the one before it: a new attempt.
_RESTARTED_SQL = (
    "SELECT DISTINCT w.series_id FROM (SELECT p.series_id, p.step, LAG(p.step) OVER ("
    "PARTITION BY p.series_id ORDER BY f.path{collate}, p.record_offset, p.value_index) "
    "AS previous FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id "
    "WHERE p.series_id IN ({series})) AS w WHERE w.step < w.previous"
)
_TAG_SERIES_SQL = "SELECT s.id FROM series AS s WHERE s.plugin = 'scalars' AND s.name IN ({tags})"
# Series in a run and context that logged a SessionLog (a START may drop points).
_LOGGED_SQL = (
    "SELECT s.id FROM series AS s WHERE s.plugin = 'scalars' AND s.name IN ({tags}) "
    "AND EXISTS (SELECT 1 FROM series AS l WHERE l.plugin = 'session_log' "
    "AND l.run_id = s.run_id AND l.context_id = s.context_id)"
)


def current_values(conn: Connection, tags: Sequence[str]) -> dict[int, dict[str, Any]]:
    """The aggregates of every scalar series of ``tags`` that has more than one attempt
    (or may: its run and context logged a ``SessionLog``), over the points its last
    attempt left; ``{series_id: {function: value}}``."""
    names = ", ".join(f":t{index}" for index in range(len(tags)))
    bound = {f"t{index}": tag for index, tag in enumerate(tags)}
    collate = ' COLLATE "C"' if conn.dialect.name == "postgresql" else ""
    series_sql = _TAG_SERIES_SQL.format(tags=names)
    restarted = conn.execute(
        text(_RESTARTED_SQL.format(collate=collate, series=series_sql)), bound
    ).scalars()
    ids = set(restarted) | set(conn.execute(text(_LOGGED_SQL.format(tags=names)), bound).scalars())
    if not ids:
        return {}
    refs = [SeriesRef(i, 0, "", "", "", "scalars") for i in sorted(ids)]
    pinned = _Pinned(conn)
    return {
        ref.id: summarise([(row[4], row[6]) for row in points])
        for ref, points in lookups.points_by_series(pinned, "scalars", refs, "current")
    }


def summarise(points: Sequence[tuple[int, float | None]]) -> dict[str, Any]:
    """Every aggregate of a series' points, ``(step, value or None for NaN)`` by step."""
    values = [(value, step) for step, value in points if value is not None]
    low = min((value for value, _ in values), default=None)
    high = max((value for value, _ in values), default=None)
    return {
        "last": points[-1][1] if points else None,
        "min": low,
        "max": high,
        "count": len(points),
        "mean": sum(value for value, _ in values) / len(values) if values else None,
        "argmin": min((step for value, step in values if value == low), default=None),
        "argmax": min((step for value, step in values if value == high), default=None),
    }


class _Pinned:
    """A connection as the ``Connectable`` ``lookups`` reads through."""

    display = "store"

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def connect(self) -> AbstractContextManager[Connection]:
        return nullcontext(self.conn)


# A glob no run path matches (a path holds no NUL): an empty selection, where no globs
# would mean every run.
NO_RUN = "\x00"


def selected_globs(conn: Connection, selection: RunSelection) -> tuple[str, ...]:
    """The selection as globs on run paths, for the functions that take ``run`` globs: the
    ``--run`` globs alone when no expression is asked, else each chosen run's path escaped
    (a run of another logdir with the same path comes with it)."""
    if not selection.by_expression:
        return globs(selection.run)
    chosen = [_escaped(row["run_path"]) for row in select_runs(conn, selection)]
    return tuple(chosen) or (NO_RUN,)


def _escaped(path: str) -> str:
    return "".join(f"[{char}]" if char in "*?[" else char for char in path)


@dataclass(frozen=True)
class CheckResult:
    """What ``tbconvert check`` found: whether the runs meet the condition, and which do not.

    Attributes:
        met: True when every run meets it (``all``), or one does (``any``); never when the
            globs choose no run.
        mode: ``all`` or ``any``.
        passing: The ``v_runs`` rows of the runs that meet it.
        failing: Those of the runs that do not.
    """

    met: bool
    mode: str
    passing: list[dict[str, Any]]
    failing: list[dict[str, Any]]


def check_runs(
    conn: Connection,
    where: str,
    *,
    run: Globs = None,
    mode: str = "all",
    resumed: str = RESUMED_DEFAULT,
) -> CheckResult:
    """Whether the runs ``run`` chooses meet ``where``: all of them, or any (``mode``).

    Raises:
        UsageError: a bad expression or mode.
    """
    if mode not in ("all", "any"):
        raise UsageError(f"unknown check mode {mode!r}", hint="all or any")
    every = lookups.runs(conn, run)
    chosen = select_runs(conn, RunSelection(run, where, resumed=resumed))
    meeting = {row["run_id"] for row in chosen}
    passing = [row for row in every if row["run_id"] in meeting]
    failing = [row for row in every if row["run_id"] not in meeting]
    met = bool(every) and (not failing if mode == "all" else bool(passing))
    return CheckResult(met, mode, passing, failing)
