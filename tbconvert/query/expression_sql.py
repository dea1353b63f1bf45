"""The selection language's tree (``query.expressions``) compiled to one SQL query over
``v_runs``, the same on SQLite and PostgreSQL.

Each param and each (tag, context) an expression names becomes one ``LEFT JOIN`` on the run:
a param from ``run_params`` (the value the writer keeps per run and key, of the rows
``v_params`` shows; revision 0018), an aggregate from ``series_summaries``,
or, with ``--resumed current``, from ``current_summaries`` where a series has a row there (it
may hold several attempts; revision 0016): no point is read.  A value is a pair of SQL
expressions, its number and its text (a param may be either); a comparison compares what both
sides have.

Logic is two-valued: every comparison is wrapped in ``COALESCE(..., FALSE)``, so a missing
param or aggregate makes it false, and ``not`` of it true, on both backends (SQL's own
three-valued ``NOT NULL`` would be unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tbconvert.plugins.names import SESSION_LOG_TAG
from tbconvert.query.expressions import (
    FIELDS,
    Aggregate,
    Comparison,
    Condition,
    ExpressionError,
    Field,
    Literal,
    Logical,
    Not,
    Param,
    Value,
    aggregates_of,
    params_of,
)

# The columns of v_runs a selection reads that are the runs table's own.
RUN_COLUMNS = ("logdir", "run_path", *sorted({*FIELDS.values()} - {"logdir", "run_path"}))
# The column of an aggregate's join each function reads, and the SQL type of its values.
SUMMARY_COLUMN = {
    "last": ("last_value", "DOUBLE PRECISION"),
    "min": ("min_value", "DOUBLE PRECISION"),
    "max": ("max_value", "DOUBLE PRECISION"),
    "count": ("points", "BIGINT"),
    "mean": ("mean_value", "DOUBLE PRECISION"),
    "argmin": ("argmin_step", "BIGINT"),
    "argmax": ("argmax_step", "BIGINT"),
}
# The columns of a series' summary a join selects, by the name its aggregates read, from the
# summary ``{t}`` (both summary tables have these columns).  The mean of values with an
# infinity is that infinity (NaN, so missing, with both), as SQL's avg().
_SUMMARY_READS = {
    "last_value": "{t}.last_value",
    "min_value": "{t}.min_value",
    "max_value": "{t}.max_value",
    "points": "{t}.points",
    "mean_value": "CASE WHEN {t}.min_value = {minus} AND {t}.max_value = {plus} THEN NULL "
    "WHEN {t}.max_value = {plus} THEN {t}.max_value "
    "WHEN {t}.min_value = {minus} THEN {t}.min_value "
    "ELSE {t}.value_sum / NULLIF({t}.value_count, 0) END",
    "argmin_step": "{t}.argmin_step",
    "argmax_step": "{t}.argmax_step",
}
_INFINITY = {"postgresql": "CAST('Infinity' AS DOUBLE PRECISION)", "sqlite": "9e999"}


class Compiled(NamedTuple):
    """A value in SQL: its number and its text (None where it has none)."""

    number: str | None
    text: str | None


@dataclass
class SeriesJoin:
    """One (tag, context) an expression reads, joined as ``alias``."""

    alias: str
    tag: str
    context: str | None
    columns: set[str] = field(default_factory=set)


@dataclass
class Compiler:
    """Compiles the trees of one query, collecting its joins and bound parameters.

    ``current``: aggregates read each series as its last attempt left it (``current_summaries``
    where a series has a row, ``series_summaries`` elsewhere), else over every point.
    """

    dialect: str
    current: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)
    series: dict[tuple[str, str | None], SeriesJoin] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    fields: bool = False  # whether a run field is read (the runs are joined)
    session_logs: bool = True  # whether the store may hold a SessionLog (with ``current``)
    # The comparisons of a param's number with a number that the ``where`` cannot be true
    # without, by the param's alias: copied into its join, they are a range of the index of
    # the key's values, from which the plan may start.
    narrowed: dict[str, list[str]] = field(default_factory=dict)

    def bind(self, value: Any, sql_type: str | None = None) -> str:
        """A bound parameter holding ``value`` (cast, where PostgreSQL cannot infer it)."""
        name = f"w{len(self.parameters)}"
        self.parameters[name] = value
        return f"CAST(:{name} AS {sql_type})" if sql_type else f":{name}"

    def condition(self, node: Condition, label: str) -> str:
        """A condition as a SQL boolean that is never NULL."""
        if isinstance(node, Logical):
            joined = f" {node.operator.upper()} ".join(
                self.condition(operand, label) for operand in node.operands
            )
            return f"({joined})"
        if isinstance(node, Not):
            return f"(NOT {self.condition(node.operand, label)})"
        return self.comparison(node, label)

    def value(self, node: Value, label: str) -> Compiled:
        """A value as SQL."""
        if isinstance(node, Literal):
            if isinstance(node.value, str):
                return Compiled(None, self.bind(node.value, "TEXT"))
            number = int(node.value) if isinstance(node.value, bool) else node.value
            return Compiled(self.bind(number, number_type(number)), None)
        if isinstance(node, Field):
            self.fields = True
            return Compiled(None, f"r.{FIELDS[node.name]}")
        if isinstance(node, Param):
            alias = self.params.setdefault(node.key, f"p{len(self.params)}")
            return Compiled(
                f"{alias}.value_num",
                f"CASE WHEN {alias}.value_type = 'string' THEN {alias}.value END",
            )
        if isinstance(node, Aggregate):
            return Compiled(self.aggregate(node), None)
        left, right = self.value(node.left, label), self.value(node.right, label)
        if left.number is None or right.number is None:
            raise ExpressionError(label, node.column, "arithmetic on text")
        if node.operator == "/":
            result = f"CAST({left.number} AS DOUBLE PRECISION) / NULLIF({right.number}, 0)"
        else:
            result = f"{left.number} {node.operator} {right.number}"
        if self.dialect == "postgresql":
            # NaN (inf - inf) is missing, as SQLite makes it NULL: PostgreSQL orders NaN
            # above every number, and its NaN equals NaN.
            result = f"NULLIF({result}, CAST('NaN' AS DOUBLE PRECISION))"
        return Compiled(f"({result})", None)

    def aggregate(self, node: Aggregate) -> str:
        """The SQL of one aggregate: a column of its series' join."""
        key = (node.tag, node.context)
        join = self.series.setdefault(key, SeriesJoin(f"a{len(self.series)}", *key))
        column, _sql_type = SUMMARY_COLUMN[node.function]
        join.columns.add(column)
        return f"{join.alias}.{column}"

    def number(self, value: float | None) -> str:
        """A number as an SQL literal (NaN as NULL)."""
        if value is None or value != value:
            return "NULL"
        if isinstance(value, float) and math.isinf(value):
            plus = _INFINITY.get(self.dialect, _INFINITY["sqlite"])
            return plus if value > 0 else f"-{plus}"
        return repr(int(value) if isinstance(value, bool) else value)

    def comparison(self, node: Comparison, label: str) -> str:
        left = self.value(node.left, label)
        if node.operator == "%":
            assert isinstance(node.right, Literal) and isinstance(node.right.value, str)
            if left.text is None:
                raise ExpressionError(label, node.column, "a glob matches text, not a number")
            return f"COALESCE({left.text} {self.glob(node.right.value)}, FALSE)"
        if isinstance(node.right, tuple):
            text = isinstance(node.right[0].value, str)
            side = left.text if text else left.number
            if side is None:
                kinds = ("text", "a number") if text else ("numbers", "text")
                raise ExpressionError(
                    label, node.column, f"a list of {kinds[0]} for a value that is {kinds[1]}"
                )
            items = ", ".join(str(self.value(item, label)[1 if text else 0]) for item in node.right)
            return f"COALESCE({side} {node.operator.upper()} ({items}), FALSE)"
        right = self.value(node.right, label)
        operator = {"==": "=", "!=": "<>"}.get(node.operator, node.operator)
        parts = []
        if left.number is not None and right.number is not None:
            parts.append(f"COALESCE({left.number} {operator} {right.number}, FALSE)")
        if left.text is not None and right.text is not None:
            parts.append(
                f"COALESCE({self.collated(left.text)} {operator} {self.collated(right.text)}, "
                "FALSE)"
            )
        if not parts:
            raise ExpressionError(label, node.column, "compares text with a number")
        return parts[0] if len(parts) == 1 else f"({' OR '.join(parts)})"

    def collated(self, sql: str) -> str:
        """Text compared by code point, as SQLite and Python compare it."""
        return f'({sql}) COLLATE "C"' if self.dialect == "postgresql" else sql

    def glob(self, pattern: str) -> str:
        """The SQL that matches a glob (``fnmatch``'s rules, case-sensitive)."""
        if self.dialect == "postgresql":
            # LIKE where it can say the same: about a tenth of a regular expression's time.
            like = glob_to_like(pattern)
            if like is not None:
                return f"LIKE {self.bind(like, 'TEXT')} ESCAPE '\\'"
            return f"~ {self.bind(glob_to_regex(pattern), 'TEXT')}"
        return f"GLOB {self.bind(glob_to_sqlite(pattern))}"

    def require(self, node: Condition) -> None:
        """Mark the joins a compiled ``where`` cannot be true without: those a comparison
        reads, unless it is under ``or`` or ``not`` (a missing value makes it false).  They
        become inner joins, which a planner may start from (the series of one tag) rather
        than from every run."""
        if isinstance(node, Logical) and node.operator == "and":
            for operand in node.operands:
                self.require(operand)
        elif isinstance(node, Comparison):
            self.require_value(node)
            self.narrow(node)

    def narrow(self, node: Comparison) -> None:
        """Copy a required comparison of a param with a number into the param's join."""
        param, other, operator = node.left, node.right, node.operator
        if isinstance(other, Param) and isinstance(param, Literal):
            param, other, operator = other, param, _FLIPPED.get(operator, operator)
        items = other if isinstance(other, tuple) else (other,)
        numbers = [
            item for item in items if isinstance(item, Literal) and not isinstance(item.value, str)
        ]
        if (
            not isinstance(param, Param)
            or operator not in _NARROWING
            or not numbers
            or len(numbers) < len(items)
        ):
            return
        bound = ", ".join(str(self.value(item, "").number) for item in numbers)
        compared = f"IN ({bound})" if operator == "in" else f"{_NARROWING[operator]} {bound}"
        self.narrowed.setdefault(self.params[param.key], []).append(f"value_num {compared}")

    def require_value(self, node: Value | Comparison) -> None:
        """Mark every join a value reads as required: the value is missing without any."""
        for aggregate in aggregates_of(node):
            self.required.add(self.series[aggregate.tag, aggregate.context].alias)
        self.required.update(self.params[param.key] for param in params_of(node))

    def source(self) -> tuple[str, str, str]:
        """The ``FROM`` clause: the join of every param and series the compiled trees read
        (``LEFT JOIN``s, inner where :meth:`require` found them required) and of the runs
        where a run field is read; the condition that links the first join when it leads;
        and the column of the run id.

        A param narrowed to a range of its values (:meth:`narrow`), else a required series
        join, where there is one, leads: the other joins are looked up for each run it
        passes, not each series for every run (docs/performance.md, "Run selection").  The
        runs are joined only for a run field, after it by a ``CROSS JOIN`` (which SQLite never
        reorders): PostgreSQL, unable to guess how few runs a condition keeps, hashed every
        run to join them."""
        joins = self.subqueries()
        series = {join.alias for join in self.series.values()}
        driving = next(iter(self.narrowed), None) or next(
            (alias for alias in joins if alias in series & self.required), None
        )
        run_id = "r.run_id" if driving is None or self.fields else f"{driving}.run_id"
        rest = " ".join(
            f"{self.join_kind(alias)} {subquery} AS {alias} ON {alias}.run_id = {run_id}"
            for alias, subquery in joins.items()
            if alias != driving
        )
        if driving is None:
            return f"v_runs AS r {rest}", "1 = 1", run_id
        if not self.fields:
            return f"{joins[driving]} AS {driving} {rest}", "1 = 1", run_id
        # A run with a series (a param is a row of one) is one v_runs shows (its rule keeps
        # every run that has one): the runs table's row, without the rule's look-ups per run.
        runs = f"(SELECT id AS run_id, {', '.join(RUN_COLUMNS)} FROM runs)"
        return (
            f"{joins[driving]} AS {driving} CROSS JOIN {runs} AS r {rest}",
            f"{driving}.run_id = r.run_id",
            run_id,
        )

    def subqueries(self) -> dict[str, str]:
        """The subquery of every param and series join, by alias: a row per run."""
        parts = {}
        for key, alias in self.params.items():
            # The row the rule of store.params_rule ranks first, which the writer keeps.
            conditions = [f"key = {self.bind(key, 'TEXT')}", *self.narrowed.get(alias, [])]
            parts[alias] = (
                "(SELECT run_id, value, value_num, value_type FROM run_params "
                f"WHERE {' AND '.join(conditions)})"
            )
        plus = _INFINITY.get(self.dialect, _INFINITY["sqlite"])
        # A series' row there replaces its summary.  Only a series that may have several
        # attempts, or shares its run and context with a SessionLog, has one (the writer's
        # rule, store.attempts_rule): the others, read from the index, look up nothing.
        may_have = "m.maybe_resumed"
        if self.session_logs:
            may_have += (
                " OR (m.run_id, m.context_id) IN (SELECT l.run_id, l.context_id FROM series "
                f"AS l WHERE l.name = '{SESSION_LOG_TAG}' AND l.plugin = 'session_log')"
            )
        current = ""
        if self.current:
            current = (
                " LEFT JOIN current_summaries AS x ON x.series_id = "
                f"CASE WHEN {may_have} THEN m.series_id END"
            )
        for join in self.series.values():
            reads = []
            for column in sorted(join.columns):
                read = _SUMMARY_READS[column].format(t="m", plus=plus, minus=f"-{plus}")
                if current:
                    exact = _SUMMARY_READS[column].format(t="x", plus=plus, minus=f"-{plus}")
                    read = f"CASE WHEN x.series_id IS NULL THEN {read} ELSE {exact} END"
                reads.append(f", {read} AS {column}")
            # The tag's summaries are one range of ix_series_summaries_tag, which carries
            # each series' key.
            parts[join.alias] = (
                f"(SELECT m.run_id, m.series_id{''.join(reads)} FROM series_summaries AS m"
                f"{current} WHERE m.point_table = 'scalars' AND m.plugin = 'scalars' AND "
                f"m.name = {self.bind(join.tag, 'TEXT')} AND {self.context_rule(join.context)})"
            )
        return parts

    def join_kind(self, alias: str) -> str:
        return "JOIN" if alias in self.required else "LEFT JOIN"

    def context_rule(self, context: str | None) -> str:
        """Which series of the tag a run's aggregate reads: the named context's, else the
        run's own (context ``''``), else the one context that has the tag."""
        # The context's id, found once, rather than each series' context looked up: with the
        # tag and plugin, it is a key of ix_series_summaries_tag.
        if context is not None:
            named = self.bind(context, "TEXT")
            return f"m.context_id = (SELECT c.id FROM contexts AS c WHERE c.name = {named})"
        return (
            "(m.context_id = (SELECT c.id FROM contexts AS c WHERE c.name = '') OR NOT EXISTS "
            "(SELECT 1 FROM series AS o WHERE o.run_id = m.run_id AND o.name = m.name "
            "AND o.plugin = 'scalars' AND o.id <> m.series_id))"
        )


# The comparisons a param's join takes (SQL's spelling), and each one's mirror image.
_NARROWING = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "in": "IN"}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def number_type(value: float | int) -> str:
    return "BIGINT" if isinstance(value, int) and abs(value) < 2**63 else "DOUBLE PRECISION"


def glob_parts(pattern: str) -> list[tuple[str, str]]:
    """A glob as (kind, text) parts: ``star``, ``one``, ``class`` (its members, ``!`` first
    when negated) and ``char``, by the rules of ``fnmatch.translate``."""
    parts: list[tuple[str, str]] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            if not parts or parts[-1] != ("star", "*"):
                parts.append(("star", "*"))
        elif char == "?":
            parts.append(("one", "?"))
        elif char == "[":
            end = index + (pattern[index : index + 1] == "!")
            end += pattern[end : end + 1] == "]"
            end = pattern.find("]", end)
            if end < 0:
                parts.append(("char", "["))
            else:
                parts.append(("class", pattern[index:end]))
                index = end + 1
        else:
            parts.append(("char", char))
    return parts


def glob_to_sqlite(pattern: str) -> str:
    """A glob for SQLite's ``GLOB`` (``[^...]`` negates; special characters in brackets)."""
    out = []
    for kind, value in glob_parts(pattern):
        if kind == "class":
            out.append("[^" + value[1:] + "]" if value.startswith("!") else f"[{value}]")
        elif kind == "char" and value in "*?[":
            out.append(f"[{value}]")
        else:
            out.append(value)
    return "".join(out)


def glob_to_like(pattern: str) -> str | None:
    """A glob as a ``LIKE`` pattern (escaped by ``\\``), or None for one with a class of
    characters, which ``LIKE`` cannot say."""
    out = []
    for kind, value in glob_parts(pattern):
        if kind == "class":
            return None
        if kind == "star":
            out.append("%")
        elif kind == "one":
            out.append("_")
        else:
            out.append("\\" + value if value in "%_\\" else value)
    return "".join(out)


def glob_to_regex(pattern: str) -> str:
    """A glob as an anchored POSIX regular expression (PostgreSQL's ``~``)."""
    out = ["^"]
    for kind, value in glob_parts(pattern):
        if kind == "star":
            out.append(".*")
        elif kind == "one":
            out.append(".")
        elif kind == "class":
            negated = value.startswith("!")
            members = value[1:] if negated else value
            escaped = "".join("\\" + c if c in "\\[]^" else c for c in members)
            out.append(("[^" if negated else "[") + escaped + "]")
        else:
            out.append(value if value.isalnum() or value in "/_- " else "\\" + value)
    out.append("$")
    return "".join(out)
