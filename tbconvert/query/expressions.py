"""The run selection language of ``--where``, ``--by`` and ``--column``: text to a small typed
tree (docs/cli.md#selecting-runs-by-expression).

An expression is parsed by Python's own parser (``ast``, never evaluated) and every node is
checked against a whitelist, so that what the language accepts is exactly what this module
turns into the tree below; everything else is an :class:`ExpressionError` naming the column
where it starts.  ``query.selection`` compiles the tree to SQL.

``val:loss`` is not Python, so an aggregate names its context by keyword:
``min(loss, context="val")``; a tag that is not an identifier is a string: ``min("val/loss")``.
Globs match with ``%`` (``run % "sweep/*"``): Python has no match operator, and ``%`` reads as
SQL's ``LIKE`` wildcard.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

from tbconvert.errors import UsageError

# Run fields: the name in an expression, the ``v_runs`` column it reads.
FIELDS = {
    "run": "run_path",
    "group": "group_path",
    "name": "name",
    "logdir": "logdir",
    "source": "source",
}
AGGREGATES = ("last", "min", "max", "mean", "count", "argmin", "argmax")
COMPARISONS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}
ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class ExpressionError(UsageError):
    """An expression that cannot be parsed or compiled, at a column (1-based)."""

    def __init__(self, label: str, column: int, message: str, hint: str | None = None) -> None:
        """Say what is wrong, where: ``--where: column 7: unknown function 'mni'``."""
        super().__init__(f"{label}: column {column}: {message}", hint=hint)
        self.column = column


@dataclass(frozen=True)
class Literal:
    """A number, string or bool written in the expression."""

    value: float | int | str | bool
    column: int


@dataclass(frozen=True)
class Field:
    """A run field (``run``, ``group``, ``name``, ``logdir``, ``source``): text."""

    name: str
    column: int


@dataclass(frozen=True)
class Param:
    """A param of the run: ``lr`` or ``params["opt/name"]``."""

    key: str
    column: int


@dataclass(frozen=True)
class Aggregate:
    """``FUNCTION(TAG[, context=NAME])`` over a scalar series of the run."""

    function: str
    tag: str
    context: str | None
    column: int


@dataclass(frozen=True)
class Arithmetic:
    """``left OP right`` on numbers (``+ - * /``); ``-x`` is ``0 - x``."""

    operator: str
    left: Value
    right: Value
    column: int


@dataclass(frozen=True)
class Comparison:
    """``left OP right``: ``== != < <= > >=``, ``in``/``not in`` a list, ``%`` a glob."""

    operator: str
    left: Value
    right: Value | tuple[Literal, ...]
    column: int


@dataclass(frozen=True)
class Logical:
    """``and``/``or`` of conditions."""

    operator: str
    operands: tuple[Condition, ...]


@dataclass(frozen=True)
class Not:
    """``not`` a condition."""

    operand: Condition


Value = Literal | Field | Param | Aggregate | Arithmetic
Condition = Comparison | Logical | Not


def parse_condition(text: str, label: str = "--where") -> Condition:
    """Parse a condition (``--where``, ``check``).

    Raises:
        ExpressionError: the text is not a condition of the language.
    """
    node = _Parser(text, label).parse()
    if not isinstance(node, Comparison | Logical | Not):
        raise ExpressionError(
            label, _column_of(node), "expected a condition", hint="for example: lr < 1e-3"
        )
    return node


def parse_value(text: str, label: str = "--by") -> Value:
    """Parse a value (``--by``, ``--column``).

    Raises:
        ExpressionError: the text is not a value of the language.
    """
    node = _Parser(text, label).parse()
    if isinstance(node, Comparison | Logical | Not):
        raise ExpressionError(
            label, _column_of(node), "expected a value, not a condition", hint="min(loss)"
        )
    return node


def aggregates_of(node: Value | Condition | tuple[Literal, ...]) -> list[Aggregate]:
    """Every aggregate in a tree, in the order they are written."""
    return [found for found in _leaves(node) if isinstance(found, Aggregate)]


def params_of(node: Value | Condition | tuple[Literal, ...]) -> list[Param]:
    """Every param in a tree, in the order they are written."""
    return [found for found in _leaves(node) if isinstance(found, Param)]


def _leaves(node: Value | Condition | tuple[Literal, ...]) -> list[Value]:
    if isinstance(node, tuple):
        return list(node)
    if isinstance(node, Arithmetic | Comparison):
        return _leaves(node.left) + _leaves(node.right)
    if isinstance(node, Logical):
        return [found for operand in node.operands for found in _leaves(operand)]
    if isinstance(node, Not):
        return _leaves(node.operand)
    return [node]


def _column_of(node: Value | Condition) -> int:
    if isinstance(node, Logical):
        return _column_of(node.operands[0])
    if isinstance(node, Not):
        return _column_of(node.operand)
    return node.column


class _Parser:
    """One expression's text to the tree, every node checked against the whitelist."""

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label

    def fail(self, node: ast.AST, message: str, hint: str | None = None) -> ExpressionError:
        return ExpressionError(self.label, self.column(node), message, hint)

    def column(self, node: ast.AST) -> int:
        # ``col_offset`` counts UTF-8 bytes; the user counts characters.
        return len(self.text.encode()[: getattr(node, "col_offset", 0)].decode(errors="ignore")) + 1

    def parse(self) -> Value | Condition:
        if not self.text.strip():
            raise ExpressionError(self.label, 1, "empty expression")
        if "\n" in self.text or "\r" in self.text:
            raise ExpressionError(self.label, self.text.find("\n") + 1, "one line expected")
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as error:
            if not error.offset:  # Python reports an unexpected end at offset 0
                raise ExpressionError(
                    self.label, len(self.text) + 1, "unexpected end of expression"
                ) from None
            message = (error.msg or "invalid syntax").split(". ")[0]
            raise ExpressionError(self.label, error.offset, message) from None
        return self.node(tree.body)

    def node(self, node: ast.expr) -> Value | Condition:
        if isinstance(node, ast.BoolOp):
            operator = "and" if isinstance(node.op, ast.And) else "or"
            return Logical(operator, tuple(self.condition(value) for value in node.values))
        if isinstance(node, ast.UnaryOp):
            return self.unary(node)
        if isinstance(node, ast.Compare):
            return self.comparison(node)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        return self.value(node)

    def condition(self, node: ast.expr) -> Condition:
        found = self.node(node)
        if not isinstance(found, Comparison | Logical | Not):
            raise self.fail(node, "expected a condition", hint="compare it: lr < 1e-3")
        return found

    def number(self, node: ast.expr) -> Value:
        found = self.node(node)
        if isinstance(found, Comparison | Logical | Not):
            raise self.fail(node, "expected a value, not a condition")
        if isinstance(found, Literal) and isinstance(found.value, str):
            raise self.fail(node, "arithmetic on text")
        if isinstance(found, Field):
            raise self.fail(node, f"arithmetic on text (the run field '{found.name}')")
        return found

    def unary(self, node: ast.UnaryOp) -> Value | Condition:
        if isinstance(node.op, ast.Not):
            return Not(self.condition(node.operand))
        if isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.number(node.operand)
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(operand, Literal) and not isinstance(operand.value, bool | str):
                return Literal(-operand.value, self.column(node))
            return Arithmetic("-", Literal(0, self.column(node)), operand, self.column(node))
        raise self.fail(node, "unsupported operator", hint="use not, -, +")

    def binary(self, node: ast.BinOp) -> Value | Condition:
        if isinstance(node.op, ast.Mod):
            left = self.node(node.left)
            if isinstance(left, Comparison | Logical | Not):
                raise self.fail(node.left, "expected text to match, not a condition")
            pattern = node.right
            if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
                raise self.fail(pattern, "a glob is a quoted string", hint='run % "sweep/*"')
            return Comparison("%", left, Literal(pattern.value, self.column(pattern)), left.column)
        operator = ARITHMETIC.get(type(node.op))
        if operator is None:
            raise self.fail(node, "unsupported operator", hint="use + - * / or % (glob)")
        left, right = self.number(node.left), self.number(node.right)
        return Arithmetic(operator, left, right, self.column(node))

    def comparison(self, node: ast.Compare) -> Condition:
        values = [node.left, *node.comparators]
        parts: list[Condition] = []
        for index, op in enumerate(node.ops):
            operator = COMPARISONS.get(type(op))
            if operator is None:
                raise self.fail(values[index + 1], "unsupported comparison", hint="is: use ==")
            left = self.operand(values[index])
            right: Value | tuple[Literal, ...]
            if operator in ("in", "not in"):
                right = self.listing(values[index + 1])
            else:
                right = self.operand(values[index + 1])
            parts.append(Comparison(operator, left, right, self.column(values[index])))
        return parts[0] if len(parts) == 1 else Logical("and", tuple(parts))

    def operand(self, node: ast.expr) -> Value:
        found = self.node(node)
        if isinstance(found, Comparison | Logical | Not):
            raise self.fail(node, "expected a value, not a condition", hint="add parentheses")
        return found

    def listing(self, node: ast.expr) -> tuple[Literal, ...]:
        if not isinstance(node, ast.List | ast.Tuple | ast.Set) or not node.elts:
            raise self.fail(node, "'in' takes a list of literals", hint='opt in ["adam", "sgd"]')
        items = [self.value(element) for element in node.elts]
        literals = [item for item in items if isinstance(item, Literal)]
        if len(literals) < len(items):
            raise self.fail(node, "'in' takes a list of literals", hint='opt in ["adam", "sgd"]')
        if len({isinstance(item.value, str) for item in literals}) > 1:
            raise self.fail(node, "a list of both text and numbers", hint="one kind of value")
        return tuple(literals)

    def value(self, node: ast.expr) -> Value:
        column = self.column(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool | int | float | str):
                return Literal(node.value, column)
            raise self.fail(node, f"unsupported literal {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in FIELDS:
                return Field(node.id, column)
            if node.id == "params":
                raise self.fail(node, 'a param is params["KEY"]', hint='params["opt/name"]')
            return Param(node.id, column)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            raise self.fail(node, "a list only follows 'in'")
        raise self.fail(node, "unsupported syntax", hint="docs/cli.md lists the language")

    def subscript(self, node: ast.Subscript) -> Param:
        key = node.slice
        if not (isinstance(node.value, ast.Name) and node.value.id == "params"):
            raise self.fail(node, "only params[...] takes a subscript")
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise self.fail(key, "a param's key is a quoted string", hint='params["opt/name"]')
        return Param(key.value, self.column(node))

    def call(self, node: ast.Call) -> Aggregate:
        function = node.func.id if isinstance(node.func, ast.Name) else None
        if function not in AGGREGATES:
            close = difflib.get_close_matches(function or "", AGGREGATES, n=1)
            name = f"'{function}'" if function else "call"
            raise self.fail(
                node,
                f"unknown function {name}",
                hint=f"did you mean {close[0]}?" if close else ", ".join(AGGREGATES),
            )
        usage = f'{function}(TAG) or {function}(TAG, context="val")'
        if len(node.args) != 1:
            raise self.fail(node, f"{function}() takes one tag", hint=usage)
        argument = node.args[0]
        if isinstance(argument, ast.Name):
            tag = argument.id
        elif isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            tag = argument.value
        else:
            raise self.fail(argument, "a tag is a name or a quoted string", hint=usage)
        context = None
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg != "context":
                raise self.fail(keyword, f"unknown argument {keyword.arg!r}", hint=usage)
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise self.fail(value, "a context is a quoted string", hint=usage)
            context = value.value
        return Aggregate(function, tag, context, self.column(node))
