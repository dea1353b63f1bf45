"""The table formats every command that prints a table shares: aligned text and Markdown
(``--format table`` and ``md``), and how a value reads in a cell."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

TABLE_FORMATS = ("table", "md")


def render_table(
    columns: Sequence[str],
    data: Sequence[Sequence[Any]],
    indent: str = "",
    *,
    null: str = "-",
    rule: bool = False,
    cell: Callable[[Any], str] | None = None,
) -> str:
    """An aligned plain-text table: numbers right-aligned, text left-aligned.

    Args:
        null: How a NULL cell reads.
        rule: Underline the header with dashes.
        cell: How a value reads (default: floats to 6 significant digits).
    """
    # A line break in a value would break the table's lines: it reads as \n.
    cells, widths, numeric = _layout(
        columns, data, null, lambda value: _one_line((cell or _cell)(value))
    )
    lines = [list(columns), *([["-" * width for width in widths]] if rule else []), *cells]
    return "\n".join(
        indent
        + "  ".join(
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(line, widths, numeric, strict=True)
        ).rstrip()
        for line in lines
    )


def render_markdown(
    columns: Sequence[str],
    data: Sequence[Sequence[Any]],
    *,
    null: str = "-",
    cell: Callable[[Any], str] | None = None,
) -> str:
    """The same table as :func:`render_table`, as a GitHub-flavoured Markdown table: numbers
    right-aligned; a pipe or backslash in a value escaped with a backslash, a line break
    written ``<br>``."""
    cells, widths, numeric = _layout(
        [escape_markdown(name) for name in columns],
        data,
        null,
        lambda value: escape_markdown((cell or _cell)(value)),
    )
    header = [escape_markdown(name) for name in columns]
    rule = [
        ("-" * max(width, 3))[:-1] + ":" if right else "-" * max(width, 3)
        for width, right in zip(widths, numeric, strict=True)
    ]
    widths = [max(width, 3) for width in widths]
    return "\n".join(
        "| "
        + " | ".join(
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(line, widths, numeric, strict=True)
        )
        + " |"
        for line in [header, rule, *cells]
    )


def render_rows(
    columns: Sequence[str],
    data: Sequence[Sequence[Any]],
    fmt: str,
    *,
    null: str = "-",
    cell: Callable[[Any], str] | None = None,
) -> str:
    """Rows as a ``table`` (aligned text) or ``md`` (Markdown): the one renderer of every
    command that prints a table."""
    if fmt == "md":
        return render_markdown(columns, data, null=null, cell=cell)
    return render_table(columns, data, null=null, cell=cell)


def _layout(
    columns: Sequence[str],
    data: Sequence[Sequence[Any]],
    null: str,
    cell: Callable[[Any], str],
) -> tuple[list[list[str]], list[int], list[bool]]:
    """The cells of a table, each column's width, and which columns are numbers."""
    cells = [[null if value is None else cell(value) for value in row] for row in data]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(columns)]
    numeric = [
        bool(data) and all(isinstance(row[i], (int, float)) or row[i] is None for row in data)
        for i in range(len(columns))
    ]
    return cells, widths, numeric


def _one_line(text: str) -> str:
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


def escape_markdown(text: str) -> str:
    """Text safe in a Markdown table cell: pipes and backslashes escaped, line breaks ``<br>``."""
    escaped = text.replace("\\", "\\\\").replace("|", "\\|")
    return escaped.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")


def exact_cell(value: Any) -> str:
    """A value as ``tbconvert query`` shows it: floats in full (the shortest text that reads
    back as the same number), NaN as ``NaN``, bytes as ``<N bytes>``."""
    if isinstance(value, float):
        return "NaN" if value != value else repr(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
