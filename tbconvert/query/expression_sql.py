"""The selection language's tree (``query.expressions``) compiled to one SQL query over
``v_runs``, the same on SQLite and PostgreSQL.

Each param and each (tag, context) an expression names becomes one ``LEFT JOIN`` on the run:
a param from ``params`` (the rows ``v_params`` shows), an aggregate from ``series_summaries``
(``last``, ``min``, ``max``, ``count``: no point is read) or, for ``mean``, ``argmin`` and
``argmax``, from the points of that series alone.  A value is a pair of SQL expressions, its
number and its text (a param may be either); a comparison compares what both sides have.

Logic is two-valued: every comparison is wrapped in ``COALESCE(..., FALSE)``, so a missing
param or aggregate makes it false, and ``not`` of it true, on both backends (SQL's own
three-valued ``NOT NULL`` would be unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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
from tbconvert.store.params_rule import shown_params

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
# The functions that read the points of their series (the rest read only its summary).
_POINT_READS = {
    "mean_value": "SELECT avg(q.value) FROM scalars AS q WHERE q.series_id = s.id",
    "argmin_step": "SELECT min(q.step) FROM scalars AS q "
    "WHERE q.series_id = s.id AND q.value = m.min_value",
    "argmax_step": "SELECT min(q.step) FROM scalars AS q "
    "WHERE q.series_id = s.id AND q.value = m.max_value",
}


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

    ``exact``: the values of series whose summary does not answer (a resumed run read as
    its last attempt left it), ``{series_id: {function: value}}``, bound into the query.
    """

    dialect: str
    exact: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    series: dict[tuple[str, str | None], SeriesJoin] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)

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
            return Compiled(self.bind(number, _number_type(number)), None)
        if isinstance(node, Field):
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
        """The SQL of one aggregate; series with exact values take them from the query."""
        key = (node.tag, node.context)
        join = self.series.setdefault(key, SeriesJoin(f"a{len(self.series)}", *key))
        column, sql_type = SUMMARY_COLUMN[node.function]
        join.columns.add(column)
        stored = f"{join.alias}.{column}"
        if not self.exact:
            return stored
        cases = " ".join(
            f"WHEN {self.bind(series_id)} THEN {self.bind(values[node.function], sql_type)}"
            for series_id, values in sorted(self.exact.items())
        )
        return f"(CASE {join.alias}.series_id {cases} ELSE {stored} END)"

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
            for aggregate in aggregates_of(node):
                self.required.add(self.series[aggregate.tag, aggregate.context].alias)
            self.required.update(self.params[param.key] for param in params_of(node))

    def joins(self) -> str:
        """The joins of every param and series the compiled trees read: ``LEFT JOIN``s,
        or inner where :meth:`require` found them required."""
        collate = ' COLLATE "C"' if self.dialect == "postgresql" else ""
        parts = []
        for key, alias in self.params.items():
            parts.append(
                f"{self.join_kind(alias)} (SELECT run_id, value, value_num, value_type FROM ("
                "SELECT s.run_id, p.value, p.value_num, p.value_type, ROW_NUMBER() OVER ("
                f"PARTITION BY s.run_id ORDER BY c.name{collate}, p.step DESC, p.file_id DESC, "
                "p.record_offset DESC, p.value_index DESC) AS rank "
                "FROM params AS p JOIN series AS s ON s.id = p.series_id "
                "JOIN contexts AS c ON c.id = s.context_id "
                f"WHERE p.key = {self.bind(key, 'TEXT')} AND {shown_params()}) AS ranked "
                f"WHERE rank = 1) AS {alias} ON {alias}.run_id = r.run_id"
            )
        for join in self.series.values():
            reads = [
                f"({_POINT_READS[column]}) AS {column}"
                for column in sorted(join.columns)
                if column in _POINT_READS
            ]
            parts.append(
                f"{self.join_kind(join.alias)} (SELECT s.run_id, s.id AS series_id, "
                "m.last_value, m.min_value, m.max_value, "
                f"m.points{''.join(', ' + read for read in reads)} "
                "FROM series AS s JOIN contexts AS c ON c.id = s.context_id "
                "JOIN series_summaries AS m ON m.series_id = s.id AND m.point_table = 'scalars' "
                f"WHERE s.plugin = 'scalars' AND s.name = {self.bind(join.tag, 'TEXT')} AND "
                f"{self.context_rule(join.context)}) AS {join.alias} "
                f"ON {join.alias}.run_id = r.run_id"
            )
        return " ".join(parts)

    def join_kind(self, alias: str) -> str:
        return "JOIN" if alias in self.required else "LEFT JOIN"

    def context_rule(self, context: str | None) -> str:
        """Which series of the tag a run's aggregate reads: the named context's, else the
        run's own (context ``''``), else the one context that has the tag."""
        if context is not None:
            return f"c.name = {self.bind(context, 'TEXT')}"
        return (
            "(c.name = '' OR NOT EXISTS (SELECT 1 FROM series AS o WHERE o.run_id = s.run_id "
            "AND o.name = s.name AND o.plugin = 'scalars' AND o.id <> s.id))"
        )


def _number_type(value: float | int) -> str:
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
