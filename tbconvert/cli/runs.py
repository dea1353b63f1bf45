"""``tbconvert runs`` and ``tbconvert show``: what a store holds, run by run."""

from __future__ import annotations

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    echo_data,
    format_option,
    json_option,
    read_store,
    resumed_option,
    run_option,
    selection_of,
    selection_options,
    store_option,
)

# ``json`` is the whole document (as --json); ``table`` and ``md`` the listing.
SHOW_FORMATS = ("table", "md", "json")


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@selection_options('"lr < 1e-3 and min(loss) < 0.2"', columns=True)
@resumed_option
@format_option(SHOW_FORMATS)
@json_option
def runs(
    store: str,
    run_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    columns: tuple[str, ...],
    resumed: str,
    fmt: str,
    as_json: bool,
) -> None:
    """List the runs of a store: group, contexts, series and point counts, params.

    \b
    Example:
      tbconvert runs --store logs.db
      tbconvert runs --store logs.db --run 'sweep/*' --json | jq '.[].run_path'
      tbconvert runs --store logs.db --where 'min(loss, context="val") < 0.2' \\
          --top 5 --by=-min(loss) --column best=min(loss) --column at=argmin(loss)
      tbconvert runs --store logs.db --format md >> notes.md
    """
    from tbconvert.cli.render import render_runs
    from tbconvert.output import export

    selection = selection_of(run_globs, where, top, by, columns, resumed)
    chosen = selection if selection.by_expression else None
    rows = read_store(store, lambda opened: opened.runs(run_globs, chosen))
    fmt = _json_or(fmt, as_json)
    echo_data(export.dumps(rows) if fmt == "json" else render_runs(rows, fmt))


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("run")
@store_option
@format_option(SHOW_FORMATS)
@json_option
def show(run: str, store: str, fmt: str, as_json: bool) -> None:
    """Show one run: series per plugin with step ranges and last values, params, files.

    RUN is the run's path relative to its logdir (as `tbconvert runs` lists it), or its id.

    \b
    Example:
      tbconvert show group_1/run_2 --store logs.db
      tbconvert show run_1 --store logs.db --json | jq '.series[] | {tag, last_value}'
      tbconvert show run_1 --store logs.db --format md >> notes.md
    """
    from tbconvert.cli.render import render_run
    from tbconvert.output import export

    detail = read_store(store, lambda opened: opened.describe(run))
    fmt = _json_or(fmt, as_json)
    echo_data(export.dumps(detail) if fmt == "json" else render_run(detail, fmt))


def _json_or(fmt: str, as_json: bool) -> str:
    """``--json`` is ``--format json``; with another ``--format`` it is a usage error."""
    if as_json and fmt not in ("table", "json"):
        raise click.UsageError(f"--json and --format {fmt} ask for two formats: give one")
    return "json" if as_json else fmt
