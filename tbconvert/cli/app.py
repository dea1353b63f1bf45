"""The ``tbconvert`` app (the click group every command is registered on) and what its commands
share: options, error translation, output.

Kept apart from ``tbconvert/cli/__init__.py`` so the command modules import it without importing
their own package (which imports them: a cycle ``tests/test_layers.py`` rejects).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from tbconvert.errors import ConverterError, UsageError
from tbconvert.output.choices import RESUMED, RESUMED_DEFAULT
from tbconvert.store.engine import DEFAULT_STORE, STORE_ENV
from tbconvert.version import __version__

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
EXIT_CODES_EPILOG = (
    "\b\nExit codes: 0 success, 1 failure, 2 usage error, "
    "3 finished but damaged records or unreadable files were skipped."
)


class Failure(click.ClickException):
    """A library error shown as one line (exit 1)."""

    exit_code = 1


def store_option(function: F) -> F:
    """``--store``, shared by every command that opens a store."""
    return click.option(
        "--store",
        envvar=STORE_ENV,
        default=DEFAULT_STORE,
        show_default=True,
        metavar="PATH|URL",
        help="SQLite file, or a SQLAlchemy URL such as postgresql+psycopg://user@host/db.",
    )(function)


def json_option(function: F) -> F:
    """``--json``: machine-readable output on stdout."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(function)


_FORMAT_HELP = {
    "table": "an aligned table",
    "md": "a Markdown table",
    "csv": "CSV",
    "json": "one JSON array",
    "jsonl": "JSON lines",
}


def format_option(choices: tuple[str, ...]) -> Callable[[F], F]:
    """``--format``: how a command prints its rows on stdout, the first of ``choices`` by
    default (``table`` and ``md`` rendered by ``render.render_rows``)."""
    described = ", ".join(_FORMAT_HELP.get(choice, choice) for choice in choices)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=choices[0],
        show_default=True,
        help=f"Print {described}.",
    )


def output_file(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """An ``-o FILE`` value; a directory there is a failure naming it (exit 1, as a missing
    logdir is: SPEC §2), not click's usage error."""
    if value and value != "-" and os.path.isdir(os.path.expanduser(os.path.expandvars(value))):
        raise Failure(f"{value}: is a directory (give the name of the file to write)")
    return value


def run_library(verbose: int, call: Callable[[], Any], *, quiet_warnings: bool = False) -> Any:
    """Call into the library; its errors become one-line messages unless -vv.

    Other libraries' own logging is silenced unless -v (tbconvert logs nothing itself): gcsfs
    logs every retry with its traceback, some 50 lines before an unreachable endpoint's
    one-line error, and MLflow logs the set-up of its database.  ``quiet_warnings`` silences
    their Python warnings too (object stores' clients, MLflow's).
    """
    if verbose < 2:
        _silence_driver_warnings()
    with contextlib.ExitStack() as quiet:
        if not verbose:
            previous = logging.root.manager.disable
            logging.disable(logging.CRITICAL)
            quiet.callback(logging.disable, previous)
            if quiet_warnings:
                quiet.enter_context(warnings.catch_warnings())
                warnings.simplefilter("ignore")
        try:
            return call()
        except UsageError as error:
            raise click.UsageError(str(error)) from error
        except ConverterError as error:
            if verbose >= 2:
                traceback.print_exc()
            raise Failure(str(error)) from error


def _silence_driver_warnings() -> None:
    """psycopg logs a warning of its own when it cannot end a COPY on a connection already
    lost, beside the error that then reaches the command: a second line where SPEC §2
    promises one (issue #44).  Its logger gets a handler that drops what it says, so
    Python's last-resort handler no longer prints it; -vv shows it with the traceback."""
    driver = logging.getLogger("psycopg")
    if not any(isinstance(handler, logging.NullHandler) for handler in driver.handlers):
        driver.addHandler(logging.NullHandler())


@click.group(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.version_option(__version__, prog_name="tbconvert")
def cli() -> None:
    """Convert TensorBoard event logs into a queryable SQLite or PostgreSQL run store.

    \b
    Example:
      tbconvert tf --logdir runs/ --store runs.db
      sqlite3 runs.db "SELECT * FROM v_last_scalars"
    """
    if os.environ.get("NO_COLOR"):
        click.get_current_context().color = False


def end_process(code: int) -> NoReturn:
    """End the command's own process with ``code``, skipping the interpreter's teardown.

    Freeing every module's objects at exit (SQLAlchemy's and NumPy's above all) took about
    20 ms after a conversion, 2% of a small one.  Nothing is left to it: stores are closed
    and workers joined by the commands, the exit handlers still run (logging, Pillow's
    cache, weakref finalizers) and the output is flushed.  While another thread runs, or
    when the output cannot be flushed (a reader gone away), the interpreter ends as usual.
    """
    if threading.active_count() == 1:
        atexit._run_exitfuncs()
        atexit._clear()  # run once, whichever way the process ends
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


T = TypeVar("T")


def read_store(store: str, read: Callable[[Any], T]) -> T:
    """Open the store, call ``read`` with it, close it; library errors become exit codes."""
    from tbconvert.query.store import open_store

    def call() -> T:
        with open_store(store) as opened:
            return read(opened)

    result: T = run_library(0, call)
    return result


def echo_data(text: str) -> None:
    """Data on stdout; a reader that goes away early (``| head``) ends the command quietly."""
    try:
        click.echo(text)
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (tests): nothing will be flushed
        sys.exit(0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), descriptor)
    sys.exit(0)


def run_option(function: F) -> F:
    """``--run GLOB``, repeatable: only runs whose path matches."""
    return click.option(
        "--run",
        "run_globs",
        multiple=True,
        metavar="GLOB",
        help="Only runs whose path matches (repeatable).",
    )(function)


def grouping_options(what: str) -> Callable[[F], F]:
    """``--group-by KEY`` and ``--aggregate-over KEY`` (repeatable): ``what`` says what a
    group gives (one line per group, rows aggregated per group...)."""

    def decorate(function: F) -> F:
        function = click.option(
            "--aggregate-over",
            "aggregate_over",
            multiple=True,
            metavar="KEY",
            help=f"{what}, for runs equal in every hyper-parameter but KEY (seeds, say).",
        )(function)
        return click.option(
            "--group-by",
            "group_by",
            multiple=True,
            metavar="KEY",
            help=f"{what}, for runs with equal KEY: a hyper-parameter, or run:REGEX whose "
            "first group names the group (repeatable).",
        )(function)

    return decorate


def resumed_option(function: F) -> F:
    """``--resumed current|all``: which points of a resumed run's scalar series are read."""
    return click.option(
        "--resumed",
        type=click.Choice(RESUMED),
        default=RESUMED_DEFAULT,
        show_default=True,
        help="Scalars: each series as its last attempt left it (a resumed run's earlier points "
        "at or after the step it went back to left out), or every record in write order.",
    )(function)


def grouping_of(group_by: tuple[str, ...], aggregate_over: tuple[str, ...]) -> Any:
    """The :class:`~tbconvert.query.groups.Grouping` the options ask for, or None."""
    if not group_by and not aggregate_over:
        return None
    from tbconvert.query.groups import Grouping

    return Grouping(group_by, aggregate_over)


def selection_options(example: str, *, columns: bool = False) -> Callable[[F], F]:
    """``--where``, ``--top`` and ``--by`` (and ``--column`` for the commands that print a
    table): runs chosen by expression (docs/cli.md, "Selecting runs by expression");
    ``example`` is a ``--where`` the help shows."""

    def decorate(function: F) -> F:
        if columns:
            function = click.option(
                "--column",
                "columns",
                multiple=True,
                metavar="NAME=EXPR",
                help='A column of each run\'s value of EXPR (repeatable): "best=min(loss)".',
            )(function)
        function = click.option(
            "--by",
            metavar="EXPR",
            help="Order by EXPR, highest first (-EXPR: lowest first), ties by run path; "
            "with --top, the first N.",
        )(function)
        function = click.option(
            "--top",
            type=click.IntRange(min=0),
            metavar="N",
            help="Only the first N runs by --by.",
        )(function)
        return click.option(
            "--where",
            metavar="EXPR",
            help=f"Only runs that meet EXPR, e.g. {example}",
        )(function)

    return decorate


def selection_of(
    run_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    columns: tuple[str, ...] = (),
    resumed: str = RESUMED_DEFAULT,
) -> Any:
    """The :class:`~tbconvert.query.selection.RunSelection` the options ask for."""
    from tbconvert.query.selection import RunSelection, parse_column

    if top is not None and by is None:
        raise click.UsageError("--top N needs --by EXPR: the value the first N have most of")
    pairs = tuple(run_library(0, lambda: [parse_column(option) for option in columns]))
    return RunSelection(run_globs, where, top, by, pairs, resumed)


def selected_runs(store: Any, selection: Any) -> tuple[str, ...]:
    """The runs a selection chooses, as globs on run paths, for the commands whose library
    takes ``--run`` globs."""
    from tbconvert.query.selection import selected_globs

    if not selection.by_expression:
        return tuple(selection.run)
    with store.connect() as conn:
        found: tuple[str, ...] = selected_globs(conn, selection)
    return found
