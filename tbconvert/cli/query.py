"""``tbconvert query``: one read-only SQL statement, its rows printed as a table, CSV, JSON,
JSON lines or Markdown (the work is :mod:`tbconvert.query.sql`)."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    Failure,
    cli,
    echo_data,
    format_option,
    read_store,
    silence_stdout,
    store_option,
)

QUERY_FORMATS = ("table", "csv", "json", "jsonl", "md")


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("sql")
@store_option
@format_option(QUERY_FORMATS)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A value for :NAME in the statement, passed as text (repeatable).",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    metavar="N",
    help="Print at most N rows (stderr says when there were more).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress or row count on stderr.")
def query(
    sql: str, store: str, fmt: str, params: tuple[str, ...], max_rows: int | None, quiet: bool
) -> None:
    """Run one read-only SQL statement on the store and print its rows.

    SQL is the statement, '-' to read it from stdin, or @FILE to read it from a file.  Only
    statements that read run (SELECT, WITH, VALUES, EXPLAIN, SQLite's PRAGMA, PostgreSQL's
    TABLE and SHOW), on a read-only connection: a write or a second statement is refused
    (exit 2).  An error the database reports (syntax, unknown table) exits 1.

    \b
    Example:
      tbconvert query "SELECT run_path, tag, value FROM v_last_scalars" --store runs.db
      tbconvert query "SELECT * FROM v_runs WHERE run_path LIKE :p" --param p='sweep/%' --format md
      tbconvert query @best.sql --store runs.db --format csv > best.csv
    """
    statement, parameters = _statement(sql), _parameters(params)
    count, more = read_store(
        store,
        lambda opened: _print_rows(opened, statement, parameters, fmt, max_rows, quiet),
    )
    if not quiet:
        shown = f"{count} row{'' if count == 1 else 's'}"
        click.echo(shown + (f"; more not shown (--max-rows {max_rows})" if more else ""), err=True)


def _statement(sql: str) -> str:
    """The statement itself, from the argument, stdin (``-``) or a file (``@FILE``)."""
    if sql == "-":
        stdin: str = sys.stdin.read()
        return stdin
    if not sql.startswith("@"):
        return sql
    path = sql[1:]
    try:
        with open(path, encoding="utf-8") as source:
            return source.read()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise Failure(f"{path}: cannot read the SQL statement ({reason})") from None


def _parameters(params: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for param in params:
        name, equals, value = param.partition("=")
        if not equals or not name.isidentifier():
            raise click.BadParameter(f"{param!r} is not NAME=VALUE", param_hint="'--param'")
        values[name] = value
    return values


def _print_rows(
    opened: Any,
    sql: str,
    parameters: dict[str, str],
    fmt: str,
    max_rows: int | None,
    quiet: bool,
) -> tuple[int, bool]:
    """Print the statement's rows on stdout; return how many, and whether there were more."""
    from tbconvert.cli.tables import TABLE_FORMATS, exact_cell, render_rows
    from tbconvert.query.sql import read_only_rows

    table = fmt in TABLE_FORMATS
    with read_only_rows(opened, sql, parameters) as (columns, rows):
        # A table is printed once every row is in: its counter never cuts a line of it.
        counted = _progress(rows, quiet or (not table and sys.stdout.isatty()))
        capped = _Capped(counted, max_rows, base64_blobs=not table)
        if table:
            kept = list(capped)
        else:
            _write_stream(columns, capped, fmt)
    if table:
        echo_data(render_rows(columns, kept, fmt, null="NULL", cell=exact_cell))
    return capped.count, capped.more


class _Capped:
    """Rows up to a limit, counting them and noticing one more."""

    def __init__(
        self, rows: Iterable[tuple[Any, ...]], limit: int | None, *, base64_blobs: bool
    ) -> None:
        self.rows, self.limit, self.base64_blobs = rows, limit, base64_blobs
        self.count, self.more = 0, False

    def __iter__(self) -> Iterator[Sequence[Any]]:
        for count, row in enumerate(self.rows):
            if count == self.limit:
                self.more = True
                return
            self.count = count + 1
            # JSON and CSV have no bytes: a blob is written in base64.
            if self.base64_blobs and bytes in map(type, row):
                yield [_base64(value) for value in row]
            else:
                yield row


def _base64(value: Any) -> Any:
    return base64.b64encode(value).decode() if isinstance(value, bytes) else value


def _progress(rows: Iterator[tuple[Any, ...]], hidden: bool) -> Iterable[tuple[Any, ...]]:
    """A row counter on stderr while rows stream into a file or pipe (none on a terminal's
    stdout, whose lines it would cut)."""
    if hidden:
        return rows
    from tqdm import tqdm

    counted: Iterable[tuple[Any, ...]] = tqdm(
        rows, unit=" rows", disable=None, leave=False, file=sys.stderr
    )
    return counted


def _write_stream(columns: tuple[str, ...], rows: Iterable[Sequence[Any]], fmt: str) -> None:
    from tbconvert.output.export import write_rows

    try:
        write_rows(columns, rows, sys.stdout, fmt)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
