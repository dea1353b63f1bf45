"""Choosing runs: ``--run`` globs and ``--where``, then ``--top N --by``, with ``--column``
values; the one selection every read command and ``push`` make (docs/cli.md, "Selecting runs
by expression").

The expressions compile to one SQL query over ``v_runs`` (``query.expression_sql``), led by a
series the condition requires where there is one; ``--top N`` asks first for the N runs among
those that have the ``--by`` value, and for every run only when fewer have it.  Aggregates
follow ``--resumed``: with ``all`` every point counts; with ``current`` (the default) a series
reads as its last attempt left it, so a series whose steps go back somewhere in write order,
or whose run and context logged a ``SessionLog``, reads the aggregates of its current points
the writer keeps (``current_summaries``); every other series has one attempt, and its summary
answers.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tbconvert.errors import UsageError
from tbconvert.filters import ChosenRun, Globs, globs, matches, run_matches
from tbconvert.query import lookups
from tbconvert.query.expression_sql import Compiled, Compiler, number_type
from tbconvert.query.expressions import (
    Aggregate,
    Condition,
    ExpressionError,
    Value,
    aggregates_of,
    parse_condition,
    parse_value,
)
from tbconvert.query.resumed import ANY_SESSION_LOG_SQL, RESUMED, RESUMED_DEFAULT


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
    lookups.plan_for_few_runs(conn)
    if not selection.by_expression:
        return lookups.runs(conn, selection.run, with_params=with_params)
    chosen = _query(conn, selection)
    if selection.by is not None:
        chosen = _ordered(chosen, ascending=selection.by.lstrip().startswith("-"))
    if selection.top is not None:
        chosen = chosen[: selection.top]
    rows = _rows_of(conn, [entry["run_id"] for entry in chosen], with_params=with_params)
    if selection.columns:
        names = [name for name, _ in selection.columns]
        for row, entry in zip(rows, chosen, strict=True):
            row["values"] = dict(zip(names, entry["values"], strict=True))
    return rows


def _query(conn: Connection, selection: RunSelection) -> list[dict[str, Any]]:
    """The runs that meet ``where`` and the globs, by logdir, path and id: ``run_id``,
    ``run_path``, ``logdir``, the ``by`` value and the columns' ``values``."""
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
    current = selection.resumed == "current" and bool(found)
    logged = current and conn.execute(text(ANY_SESSION_LOG_SQL)).first() is not None
    query = _SelectionQuery(conn.dialect.name, current, logged, where, by, columns, selection)
    with _joins_by_hash(conn):
        if by is not None and selection.top is not None and not selection.run:
            ascending = (selection.by or "").lstrip().startswith("-")
            # The first runs by a value are runs that have it, whenever that many have it:
            # asked first, the planner starts from the value's series, not from every run.
            found_rows = query.first(conn, ascending, selection.top, valued=True)
            if len(found_rows) < selection.top:
                found_rows = query.first(conn, ascending, selection.top)
        else:
            found_rows = query.run(conn)
    chosen = globs(selection.run)
    paths = _run_paths(conn, [row[0] for row in found_rows])
    result = []
    for run_id, *values in found_rows:
        path, logdir = paths[run_id]
        if run_matches(run_id, path, chosen):
            pairs = zip(values[::2], values[1::2], strict=True)
            by_value, *shown = [number if number is not None else text_ for number, text_ in pairs]
            entry = {"run_id": run_id, "run_path": path, "logdir": logdir, "by": by_value}
            result.append(entry | {"values": shown})
    result.sort(key=lambda entry: (entry["logdir"], entry["run_path"], entry["run_id"]))
    return result


@contextlib.contextmanager
def _joins_by_hash(conn: Connection) -> Iterator[None]:
    """Within: on PostgreSQL, no nested-loop join.  A selection joins whole tags' series by
    run; unable to guess how many rows a condition on a summary keeps, the planner took a
    few and probed one tag's index per run of another, 100,000 times (docs/performance.md,
    "Run selection")."""
    if conn.dialect.name != "postgresql":
        yield
        return
    conn.execute(text("SET LOCAL enable_nestloop = off"))
    try:
        yield
    finally:
        conn.execute(text("SET LOCAL enable_nestloop TO DEFAULT"))


@dataclass(frozen=True)
class _SelectionQuery:
    """The parsed trees of a selection, compiled on demand into one statement."""

    dialect: str
    current: bool
    session_logs: bool
    where: Condition | None
    by: Value | None
    columns: Sequence[Value]
    selection: RunSelection

    def first(
        self, conn: Connection, ascending: bool, top: int, *, valued: bool = False
    ) -> list[Any]:
        """The rows of the first ``top`` runs by ``by``, and of every run whose value ties
        with the last of them (their order is by path, which :func:`_ordered` reads).

        The database sorts by value alone, keeping ``top + 1`` rows; the ties, when the
        last two are one, are a second statement.  Joining every run for its path before
        sorting cost PostgreSQL a hash of every run, and a sort with ties the whole sort."""
        rows = self.run(conn, top=(ascending, top + 1), valued=valued)
        if len(rows) <= top or top == 0 or rows[top - 1][1:3] != rows[top][1:3]:
            return rows[:top]
        tied = self.run(conn, valued=valued, tied=tuple(rows[top - 1][1:3]))
        kept = {row[0] for row in rows[:top]}
        return rows[:top] + [row for row in tied if row[0] not in kept]

    def run(
        self,
        conn: Connection,
        *,
        top: tuple[bool, int] | None = None,
        valued: bool = False,
        tied: tuple[Any, Any] | None = None,
    ) -> list[Any]:
        """The rows (run id, then a number and a text per value): with ``top``
        (ascending, count), the first runs by ``by``'s value (ties in any order); with
        ``valued``, only runs that have a ``by`` value (its joins inner); with ``tied`` (a
        number and a text), only runs whose ``by`` value is that."""
        compiler = Compiler(self.dialect, self.current, session_logs=self.session_logs)
        condition = "1 = 1"
        if self.where is not None:
            condition = compiler.condition(self.where, "--where")
            compiler.require(self.where)
        outputs = [compiler.value(self.by, "--by") if self.by else Compiled(None, None)]
        outputs += [
            compiler.value(tree, f"--column {name}")
            for tree, (name, _) in zip(self.columns, self.selection.columns, strict=True)
        ]
        if valued and self.by is not None:
            compiler.require_value(self.by)
            condition += " AND " + " OR ".join(
                f"{part} IS NOT NULL" for part in outputs[0] if part is not None
            )
        if tied is not None:
            condition += f" AND {_equal_sql(compiler, outputs[0], tied)}"
        select = ", ".join(
            f"{part or 'NULL'} AS v{index}_{kind}"
            for index, output in enumerate(outputs)
            for kind, part in zip(("n", "t"), output, strict=True)
        )
        source, link, run_id = compiler.source()
        sql = f"SELECT {run_id} AS run_id, {select} FROM {source} WHERE {link} AND {condition}"
        if top is not None:
            sql = _top_sql(sql, self.dialect, *top, kinds=outputs[0], valued=valued)
        return list(conn.execute(text(sql), compiler.parameters))


# Up to this many runs, the chosen runs' rows are read by id; more, and the whole view is.
_FEW_RUNS = 500


def _run_paths(conn: Connection, run_ids: list[int]) -> dict[int, tuple[str, str]]:
    """``{run id: (run path, logdir)}`` of some runs (at least)."""
    sql = "SELECT id, run_path, logdir FROM runs"
    if len(run_ids) <= _FEW_RUNS:
        if not run_ids:
            return {}
        sql += f" WHERE id IN ({lookups.id_list(run_ids)})"
    return {run_id: (path, logdir) for run_id, path, logdir in conn.execute(text(sql))}


def _rows_of(conn: Connection, run_ids: list[int], *, with_params: bool) -> list[dict[str, Any]]:
    """The ``v_runs`` rows of some runs, in the order given (with ``params``)."""
    if len(run_ids) > _FEW_RUNS:
        every = {row["run_id"]: row for row in lookups.runs(conn, None, with_params=with_params)}
        return [every[run_id] for run_id in run_ids]
    if not run_ids:
        return []
    marks = lookups.id_list(run_ids)
    found = {
        row["run_id"]: row
        for row in lookups.query(conn, f"{lookups.RUNS_SQL} WHERE run_id IN ({marks})")
    }
    rows = [found[run_id] for run_id in run_ids]
    if with_params:
        sessions = lookups.param_sessions(conn, run_ids=run_ids)
        for row in rows:
            row["params"] = sessions.get(row["run_id"], {})
    return rows


def _shifted(parse: Callable[[str, str], Value], source: str, offset: int) -> Value:
    """Parse ``--by``, with an error's column moved right by ``offset`` (a stripped ``-``)."""
    try:
        result = parse(source, "--by")
    except ExpressionError as error:
        label, _, rest = error.message.partition(": column ")
        column = error.column + offset
        raise ExpressionError(label, column, rest.partition(": ")[2], error.hint) from None
    return result


def _top_sql(
    sql: str, dialect: str, ascending: bool, top: int, *, kinds: Compiled, valued: bool
) -> str:
    """The first ``top`` rows of ``sql`` by the ``by`` value in :func:`_ordered`'s order
    (numbers, then text, then none), sorted by the database: a store of many runs sends a
    few rows, not one per run.  ``kinds``: the value's SQL, whose parts say whether it may
    be a number, a text or both; ``valued``: every row has a value.  A sort key less per
    row where they leave nothing to order by it."""
    direction = "ASC" if ascending else "DESC"
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    keys = []
    if (kinds.number is not None and kinds.text is not None) or not valued:
        keys.append("CASE WHEN v0_n IS NOT NULL THEN 0 WHEN v0_t IS NOT NULL THEN 1 ELSE 2 END")
    if kinds.number is not None:
        keys.append(f"v0_n {direction}")
    if kinds.text is not None:
        keys.append(f"v0_t{collate} {direction}")
    # OFFSET 0 keeps the selection a query of its own: asked for a few rows in value order,
    # PostgreSQL would walk one join in that order, probing the others for every row.
    fence = " OFFSET 0" if dialect == "postgresql" else ""
    order = f" ORDER BY {', '.join(keys)}" if keys else ""
    return f"SELECT * FROM ({sql}{fence}) AS chosen{order} LIMIT {int(top)}"


def _equal_sql(compiler: Compiler, value: Compiled, found: tuple[Any, Any]) -> str:
    """SQL true where ``value`` is ``found`` (a number and a text, as a row holds them)."""
    number, text_ = found
    if number is not None:
        return f"{value.number} = {compiler.bind(number, number_type(number))}"
    if text_ is not None:
        bound = compiler.bind(text_, "TEXT")
        return f"{compiler.collated(value.text or 'NULL')} = {compiler.collated(bound)}"
    return f"{value.number or 'NULL'} IS NULL AND {value.text or 'NULL'} IS NULL"


def _ordered(rows: list[dict[str, Any]], *, ascending: bool) -> list[dict[str, Any]]:
    """Runs by their ``by`` value (numbers, then text; missing last), ties by path."""
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
        if not _outside_own_context(conn, tag):
            continue
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


def _outside_own_context(conn: Connection, tag: str) -> bool:
    """Whether any run logs ``tag`` in a context of its own (where several may hold it)."""
    # From the few contexts: a probe of the tag's index each, not a pass over its series.
    found = conn.execute(
        text(
            "SELECT 1 FROM contexts AS c WHERE c.name <> '' AND EXISTS (SELECT 1 FROM series "
            "AS s WHERE s.name = :tag AND s.plugin = 'scalars' AND s.context_id = c.id) LIMIT 1"
        ),
        {"tag": tag},
    ).first()
    return found is not None


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


# A glob no run path matches (a path holds no NUL): an empty selection, where no globs
# would mean every run.
NO_RUN = "\x00"


def selected_globs(conn: Connection, selection: RunSelection) -> tuple[str, ...]:
    """The selection as ``run`` globs, for the functions that take them: the ``--run`` globs
    alone when no expression is asked, else each chosen run by id (:class:`ChosenRun`)."""
    if not selection.by_expression:
        return globs(selection.run)
    chosen = [ChosenRun(row["run_path"], row["run_id"]) for row in select_runs(conn, selection)]
    return tuple(chosen) or (NO_RUN,)


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
