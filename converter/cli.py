"""The ``tbconvert`` command line: parse, call the library, render.  Nothing else lives here.

Exit codes: 0 success (warnings allowed), 1 failure, 2 usage error, 3 finished but damaged
records or unreadable files were skipped.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from converter import __version__
from converter.errors import ConverterError, UsageError

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
EXIT_CODES_EPILOG = (
    "\b\nExit codes: 0 success, 1 failure, 2 usage error, "
    "3 finished but damaged records or unreadable files were skipped."
)
# Kept in step with converter.plugins.KNOWN_PLUGINS by a test; importing the plugins here
# would slow down every start-up.
PLUGIN_NAMES = ("audio", "histograms", "hparams", "images", "scalars", "text", "tensors")


class Failure(click.ClickException):
    """A library error shown as one line (exit 1)."""

    exit_code = 1


def store_option(function: F) -> F:
    """``--store``, shared by every command that opens a store."""
    return click.option(
        "--store",
        envvar="TBCONVERT_STORE",
        default="tbconvert.db",
        show_default=True,
        metavar="PATH|URL",
        help="SQLite file, or a SQLAlchemy URL such as postgresql+psycopg://user@host/db.",
    )(function)


def json_option(function: F) -> F:
    """``--json``: machine-readable output on stdout."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON document on stdout.")(function)


def run_library(verbose: int, call: Callable[[], Any]) -> Any:
    """Call into the library; its errors become one-line messages unless -vv."""
    try:
        return call()
    except UsageError as error:
        raise click.UsageError(str(error)) from error
    except ConverterError as error:
        if verbose >= 2:
            traceback.print_exc()
        raise Failure(str(error)) from error


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


def _tf_command(name: str, hidden: bool = False) -> click.Command:
    @cli.command(name, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG,
                 hidden=hidden)
    @click.option("--logdir", required=True, type=click.Path(file_okay=False, path_type=str),
                  help="The TensorBoard log directory to convert.")
    @store_option
    @click.option("--flat", is_flag=True,
                  help="Every directory holding event files is a run (no contexts).")
    @click.option("--dry-run", is_flag=True,
                  help="Print the classification and what would be read; write nothing.")
    @click.option("--full", is_flag=True,
                  help="Read every file again from its start (no duplicates result).")
    @click.option("--plugins", metavar="LIST",
                  help="Comma-separated plugins to convert (default: all): "
                  + ", ".join(PLUGIN_NAMES) + " (everything kept raw).")
    @click.option("--run", "runs", multiple=True, metavar="GLOB",
                  help="Only runs whose path matches (repeatable).")
    @click.option("--tag", "tags", multiple=True, metavar="GLOB",
                  help="Only tags that match (repeatable).")
    @click.option("--exclude-tag", "exclude_tags", multiple=True, metavar="GLOB",
                  help="Skip tags that match (repeatable).")
    @click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
                  help="Decode files in this many worker processes (one writer); 2 pays on a machine "
                  "with a core to spare.")
    @click.option("--source", envvar="TBCONVERT_SOURCE", metavar="NAME",
                  help="The logdir's name in the store (default: its absolute path). Runs are "
                  "(source, run path): give each machine's logdir its own name on a shared "
                  "server, and the same name to one directory mounted at different paths.")
    @click.option("--upgrade-store", is_flag=True,
                  help="Upgrade an older PostgreSQL store's schema first (SQLite files are "
                  "upgraded anyway, after a backup). Only when no older converter writes to it.")
    @click.option("--watch", is_flag=True,
                  help="Convert again every --interval seconds until Ctrl-C, then summarise.")
    @click.option("--interval", type=click.FloatRange(min=0.0), default=5.0, show_default=True,
                  metavar="SECONDS", help="Pause between passes with --watch.")
    @json_option
    @click.option("-q", "--quiet", is_flag=True, help="No progress, warnings or summary.")
    @click.option("-v", "--verbose", count=True, help="-v more detail, -vv tracebacks.")
    def tf(logdir: str, store: str, flat: bool, dry_run: bool, full: bool, plugins: str | None,
           runs: tuple[str, ...], tags: tuple[str, ...], exclude_tags: tuple[str, ...],
           jobs: int, source: str | None, upgrade_store: bool, watch: bool, interval: float, as_json: bool, quiet: bool,
           verbose: int) -> None:
        """Convert a TensorBoard logdir into the store (incremental: re-run any time).

        Directories are classified as groups, runs and contexts with Aim's rules
        (or --flat); event files directly in the logdir or in a group are orphans,
        listed in warnings and not converted. --plugins and the tag filters decide
        what is stored from the bytes read now; use --full later to read them again.

        \b
        Example:
          tbconvert tf --logdir ~/logs --store ~/logs.db
          tbconvert tf --logdir ~/logs --store ~/logs.db --run 'sweep*' --dry-run
          tbconvert tf --logdir ~/logs --store ~/logs.db --watch --interval 30
          tbconvert tf --logdir /data/tb --source gpu1 --store postgresql://me@db/tb
        """
        from converter import conversion as library

        if watch and dry_run:
            raise click.UsageError("--watch and --dry-run do not go together")
        options = dict(
            flat=flat, dry_run=dry_run, full=full, plugins=_parse_plugins(plugins), runs=runs,
            tags=tags, exclude_tags=exclude_tags, jobs=jobs, source=source,
            upgrade_store=upgrade_store, progress=False if quiet else None,
            notify=None if quiet else lambda line: click.echo(line, err=True))
        if watch:
            summary = run_library(verbose, lambda: library.watch(
                logdir, store, interval=interval, **options))
        else:
            summary = run_library(verbose, lambda: library.convert(logdir, store, **options))
        _report(summary, as_json=as_json, quiet=quiet)
        sys.exit(summary.exit_code)

    return tf


def _parse_plugins(plugins: str | None) -> list[str] | None:
    if plugins is None:
        return None
    names = [name.strip() for name in plugins.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PLUGIN_NAMES))
    if unknown or not names:
        raise click.BadParameter(
            f"unknown plugin {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(PLUGIN_NAMES)}", param_hint="--plugins")
    return names


def _report(summary: Any, *, as_json: bool, quiet: bool) -> None:
    if not quiet:
        for orphan in summary.orphans:
            click.echo(f"warning: orphan event file ignored (in the logdir root or a group): "
                       f"{orphan}", err=True)
        for warning in summary.warnings:
            click.echo(f"warning: {warning}", err=True)
        click.echo(summary.render(), err=True)
    elif summary.problems:
        for problem in summary.problems[:10]:
            click.echo(f"error: {problem}", err=True)
    if as_json:
        click.echo(summary.to_json())


tf_command = _tf_command("tf")
tensorboard_command = _tf_command("tensorboard")


T = TypeVar("T")
# Kept in step with converter.export.KINDS and FORMATS by a test (imported lazily for speed).
EXPORT_KINDS = ("scalars", "params", "texts")
EXPORT_FORMATS = ("csv", "jsonl")


def read_store(store: str, read: Callable[[Any], T]) -> T:
    """Open the store, call ``read`` with it, close it; library errors become exit codes."""
    from converter.store.reader import open_store

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
        _silence_stdout()


def _silence_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        descriptor = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (tests): nothing will be flushed
        sys.exit(0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), descriptor)
    sys.exit(0)


def run_option(function: F) -> F:
    """``--run GLOB``, repeatable: only runs whose path matches."""
    return click.option("--run", "run_globs", multiple=True, metavar="GLOB",
                        help="Only runs whose path matches (repeatable).")(function)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@json_option
def runs(store: str, run_globs: tuple[str, ...], as_json: bool) -> None:
    """List the runs of a store: group, contexts, series and point counts, params.

    \b
    Example:
      tbconvert runs --store logs.db
      tbconvert runs --store logs.db --run 'sweep/*' --json | jq '.[].run_path'
    """
    from converter import export

    rows = read_store(store, lambda opened: opened.runs(run_globs))
    echo_data(export.dumps(rows) if as_json else export.render_runs(rows))


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("run")
@store_option
@json_option
def show(run: str, store: str, as_json: bool) -> None:
    """Show one run: series per plugin with step ranges and last values, params, files.

    RUN is the run's path relative to its logdir (as `tbconvert runs` lists it), or its id.

    \b
    Example:
      tbconvert show group_1/run_2 --store logs.db
      tbconvert show run_1 --store logs.db --json | jq '.series[] | {tag, last_value}'
    """
    from converter import export

    detail = read_store(store, lambda opened: opened.describe(run))
    echo_data(export.dumps(detail) if as_json else export.render_run(detail))


@cli.command("export", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("kind", type=click.Choice(EXPORT_KINDS))
@store_option
@run_option
@click.option("--tag", "tag_globs", multiple=True, metavar="GLOB",
              help="Only tags that match (for params: keys) (repeatable).")
@click.option("--context", "context_globs", multiple=True, metavar="GLOB",
              help="Only contexts that match ('' is the run directory itself) (repeatable).")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS),
              help="Output format [default: jsonl for -o *.jsonl/*.ndjson/*.json, else csv].")
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Write to FILE (created once complete) instead of stdout.")
def export_command(kind: str, store: str, run_globs: tuple[str, ...],
                   tag_globs: tuple[str, ...], context_globs: tuple[str, ...],
                   fmt: str | None, output: str) -> None:
    """Export scalars, params or texts in long format (the views' columns) as CSV or JSON lines.

    NaN values are empty CSV cells and JSON nulls; infinities are inf / 1e999.

    \b
    Example:
      tbconvert export scalars --store logs.db --tag loss > loss.csv
      tbconvert export scalars --run 'sweep/*' --tag 'eval/*' -o evals.jsonl
      tbconvert export params --store logs.db --format jsonl
    """
    from converter import export

    def write(opened: Any) -> int:
        return export.export(opened, kind, output, fmt, run=run_globs, tag=tag_globs,
                             context=context_globs)

    try:
        count = read_store(store, write)
    except BrokenPipeError:
        _silence_stdout()
        return
    if output != "-":
        click.echo(f"{count} rows written to {output}", err=True)


@cli.command("datasette-metadata", context_settings=CONTEXT_SETTINGS,
             epilog=EXIT_CODES_EPILOG)
@store_option
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Write to FILE instead of stdout.")
def datasette_metadata(store: str, output: str) -> None:
    """Write a datasette metadata file: labels, facets, and the SQL cookbook as canned queries.

    \b
    Example:
      tbconvert datasette-metadata --store runs.db -o metadata.json
      datasette runs.db -m metadata.json
    """
    from converter import datasette, export

    def write(opened: Any) -> None:
        document = datasette.metadata_for(opened)
        with export.open_output(output) as out:
            out.write(export.dumps(document, indent=2) + "\n")

    read_store(store, write)


@cli.group(context_settings=CONTEXT_SETTINGS)
def db() -> None:
    """Manage the store's schema (Alembic migrations shipped with tbconvert).

    \b
    Example:
      tbconvert db current --store logs.db
      tbconvert db upgrade --store postgresql+psycopg://me@server/tb
    """


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def upgrade(store: str) -> None:
    """Create the store, or upgrade it to this version's schema.

    \b
    Example:
      tbconvert db upgrade --store logs.db
    """
    from converter.store import schema

    click.echo(run_library(0, lambda: schema.upgrade_store(store)))


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def current(store: str) -> None:
    """Print the store's schema revision and this version's.

    \b
    Example:
      tbconvert db current --store logs.db
    """
    from converter.store import schema

    click.echo(run_library(0, lambda: schema.describe_store(store)))


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def check(store: str) -> None:
    """Fail when the models and the migrations disagree (schema drift).

    \b
    Example:
      tbconvert db check --store /tmp/check.db
    """
    from converter.store import schema

    click.echo(run_library(0, lambda: schema.check_store(store)))
