"""Commands that read a store: ``runs``, ``show``, ``export`` and ``datasette-metadata``."""

from __future__ import annotations

from typing import Any

import click

from converter.cli.group import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    echo_data,
    json_option,
    read_store,
    run_option,
    silence_stdout,
    store_option,
)

# Kept in step with converter.export.KINDS and FORMATS by a test (imported lazily for speed).
EXPORT_KINDS = ("scalars", "params", "texts")
EXPORT_FORMATS = ("csv", "jsonl")


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
    from converter.cli.render import render_runs

    rows = read_store(store, lambda opened: opened.runs(run_globs))
    echo_data(export.dumps(rows) if as_json else render_runs(rows))


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
    from converter.cli.render import render_run

    detail = read_store(store, lambda opened: opened.describe(run))
    echo_data(export.dumps(detail) if as_json else render_run(detail))


@cli.command("export", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("kind", type=click.Choice(EXPORT_KINDS))
@store_option
@run_option
@click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only tags that match (for params: keys) (repeatable).",
)
@click.option(
    "--context",
    "context_globs",
    multiple=True,
    metavar="GLOB",
    help="Only contexts that match ('' is the run directory itself) (repeatable).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    help="Output format [default: jsonl for -o *.jsonl/*.ndjson/*.json, else csv].",
)
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write to FILE (created once complete) instead of stdout.",
)
def export_command(
    kind: str,
    store: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    context_globs: tuple[str, ...],
    fmt: str | None,
    output: str,
) -> None:
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
        return export.export(
            opened, kind, output, fmt, run=run_globs, tag=tag_globs, context=context_globs
        )

    try:
        count = read_store(store, write)
    except BrokenPipeError:
        silence_stdout()
        return
    if output != "-":
        click.echo(f"{count} rows written to {output}", err=True)


@cli.command("datasette-metadata", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write to FILE instead of stdout.",
)
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
