"""Commands that read a store: ``runs``, ``show``, ``hparams``, ``export`` and
``datasette-metadata``."""

from __future__ import annotations

from typing import Any

import click

from tbconvert.cli.group import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    F,
    cli,
    echo_data,
    json_option,
    read_store,
    run_option,
    silence_stdout,
    store_option,
)

# Kept in step with tbconvert.output.export.KINDS and FORMATS, and store.query.AGGREGATES, by a test
# (the library is imported lazily, for start-up time).
EXPORT_KINDS = ("scalars", "params", "texts", "hparams", "images")
EXPORT_FORMATS = ("csv", "json", "jsonl", "parquet")
AGGREGATES = ("last", "min", "max")
HPARAMS_FORMATS = ("table", "csv", "json", "jsonl")


def metric_options(function: F) -> F:
    """``--metric TAG`` (repeatable) and ``--agg``: the metric columns of an hparams table."""
    function = click.option(
        "--agg",
        type=click.Choice(AGGREGATES),
        default="last",
        show_default=True,
        help="Each metric's last value (highest step), or its min or max over the run.",
    )(function)
    return click.option(
        "--metric",
        "metrics",
        multiple=True,
        metavar="TAG",
        help="A scalar tag whose value becomes a column (repeatable).",
    )(function)


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
    from tbconvert.cli.render import render_runs
    from tbconvert.output import export

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
    from tbconvert.cli.render import render_run
    from tbconvert.output import export

    detail = read_store(store, lambda opened: opened.describe(run))
    echo_data(export.dumps(detail) if as_json else render_run(detail))


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@metric_options
@click.option(
    "--sort",
    metavar="COLUMN",
    help="Sort on this column (a param or metric); -COLUMN sorts descending. Empty cells last.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(HPARAMS_FORMATS),
    default="table",
    show_default=True,
    help="An aligned table, CSV, one JSON array, or JSON lines.",
)
def hparams(
    store: str,
    run_globs: tuple[str, ...],
    metrics: tuple[str, ...],
    agg: str,
    sort: str | None,
    fmt: str,
) -> None:
    """Compare hyper-parameters: one row per hparams session, params and metrics as columns.

    \b
    Example:
      tbconvert hparams --store runs.db --metric accuracy --sort=-accuracy
      tbconvert hparams --store runs.db --metric loss --agg min --format csv > sweep.csv
    """
    from tbconvert.cli.render import render_table
    from tbconvert.output.hparams import hparams_rows

    columns, rows = read_store(
        store, lambda opened: hparams_rows(opened, metrics, run_globs, agg, sort)
    )
    if fmt != "table":
        echo_data(_text_of(columns, rows, fmt).rstrip("\n"))
    elif rows:
        echo_data(render_table(columns, rows))
    else:
        click.echo(
            "no hparams sessions (add_hparams or the hparams plugin) in this store", err=True
        )


def _text_of(columns: list[str], rows: list[list[Any]], fmt: str) -> str:
    import io

    from tbconvert.output import export

    out = io.StringIO()
    export.write_rows(columns, rows, out, fmt)
    return out.getvalue()


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
    "--wide",
    is_flag=True,
    help="Scalars as a step x series table: step, then one column per run_path/context/tag.",
)
@metric_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(EXPORT_FORMATS),
    help="Output format [default: from the extension of -o: .csv .json .jsonl .parquet].",
)
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    metavar="FILE|DIR",
    type=click.Path(allow_dash=True),
    help="Write FILE (created once complete), or for images, files under DIR; - is CSV on stdout.",
)
def export_command(
    kind: str,
    store: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    context_globs: tuple[str, ...],
    wide: bool,
    metrics: tuple[str, ...],
    agg: str,
    fmt: str | None,
    output: str,
) -> None:
    """Export scalars, params, texts, the hparams table, or images (one file each).

    The format follows the file's extension: .csv, .json (one array), .jsonl, .parquet (the
    parquet extra). NaN is an empty CSV cell and a JSON null; infinities are inf / 1e999.

    \b
    Example:
      tbconvert export scalars --store runs.db --tag loss > loss.csv
      tbconvert export scalars --run 'sweep/*' --tag loss --wide -o curves.csv
      tbconvert export hparams --metric accuracy -o sweep.json
      tbconvert export images --tag samples -o images/
    """
    from tbconvert.output import export

    def write(opened: Any) -> int:
        return export.export(
            opened,
            kind,
            output,
            fmt,
            run=run_globs,
            tag=tag_globs,
            context=context_globs,
            wide=wide,
            metrics=metrics,
            agg=agg,
        )

    try:
        count = read_store(store, write)
    except BrokenPipeError:
        silence_stdout()
        return
    if output != "-":
        noun = "images" if kind == "images" else "rows"
        click.echo(f"{count} {noun} written to {output}", err=True)


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
      datasette runs.db -m metadata.json --setting suggest_facets off
    """
    from tbconvert.output import datasette, export

    def write(opened: Any) -> None:
        document = datasette.metadata_for(opened)
        with export.open_output(output) as out:
            out.write(export.dumps(document, indent=2) + "\n")

    read_store(store, write)
