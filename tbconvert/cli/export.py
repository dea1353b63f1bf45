"""``tbconvert export`` (files of scalars, params, texts, hparams, images) and
``tbconvert datasette-metadata``."""

from __future__ import annotations

from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    grouping_of,
    grouping_options,
    output_file,
    read_store,
    resumed_option,
    run_option,
    silence_stdout,
    store_option,
)
from tbconvert.cli.hparams import metric_options
from tbconvert.output.choices import EXPORT_FORMATS, EXPORT_KINDS


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
@grouping_options("Scalars aggregated step by step over a group's runs")
@resumed_option
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
    group_by: tuple[str, ...],
    aggregate_over: tuple[str, ...],
    resumed: str,
    metrics: tuple[str, ...],
    agg: str,
    fmt: str | None,
    output: str,
) -> None:
    """Export scalars, params, texts, the hparams table, or images (one file each).

    The format follows the file's extension: .csv, .json (one array), .jsonl, .parquet (the
    parquet extra). NaN is NaN in CSV and null in JSON; infinities are inf / 1e999; a step a
    series did not log (--wide) is an empty cell, or a key left out.
    --group-by KEY (a hyper-parameter, or run:REGEX whose first group names the group) and
    --aggregate-over KEY (group by every other hyper-parameter) aggregate scalars over the
    runs of each group, step by step: runs, nan, mean, std, min, max.

    \b
    Example:
      tbconvert export scalars --store runs.db --tag loss > loss.csv
      tbconvert export scalars --run 'sweep/*' --tag loss --wide -o curves.csv
      tbconvert export scalars --tag loss --aggregate-over seed -o loss_over_seeds.csv
      tbconvert export hparams --metric accuracy -o sweep.json
      tbconvert export images --tag samples -o images/
    """
    from tbconvert.output import export

    def write(opened: Any) -> int:
        grouping = grouping_of(group_by, aggregate_over)
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
            grouping=grouping,
            resumed=resumed,
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
    callback=output_file,
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
