"""``tbconvert export`` (files of scalars, params, texts, hparams, images; the Parquet
dataset) and ``tbconvert datasette-metadata``."""

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
    selected_runs,
    selection_of,
    selection_options,
    silence_stdout,
    store_option,
)
from tbconvert.cli.hparams import metric_options
from tbconvert.output.choices import EXPORT_FORMATS, EXPORT_KINDS


@cli.command("export", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@click.argument("kind", type=click.Choice((*EXPORT_KINDS, "dataset")))
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
@selection_options("'min(loss) < 0.2'")
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
    "--buckets",
    type=click.IntRange(min=1),
    help="dataset: the partitions of a new dataset's point tables [default: from its size].",
)
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="dataset: an option of the -o URL's file system, as fsspec takes it (repeatable).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
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
    where: str | None,
    top: int | None,
    by: str | None,
    group_by: tuple[str, ...],
    aggregate_over: tuple[str, ...],
    resumed: str,
    metrics: tuple[str, ...],
    agg: str,
    fmt: str | None,
    buckets: int | None,
    storage_options: tuple[str, ...],
    quiet: bool,
    output: str,
) -> None:
    """Export scalars, params, texts, the hparams table, images (one file each), or the
    whole store as a Parquet dataset.

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
      tbconvert export scalars --where 'lr < 0.01' --top 3 --by 'max(accuracy)' -o best.csv
      tbconvert export images --tag samples -o images/
      tbconvert export dataset --store runs.db -o s3://lake/tb/

    dataset writes a directory (or fsspec URL) of Parquet files, one directory per table
    (scalars, params, runs, series, texts, histograms, images, audio, tensors) with the
    views' columns, partitioned as bucket=NN; run it again to add only what is new.
    """
    if kind == "dataset":
        filters = (run_globs, tag_globs, context_globs, wide, group_by, aggregate_over, where, by)
        chosen = any(filters) or top is not None
        if chosen or fmt or metrics:
            raise click.UsageError("export dataset takes the whole store: leave out filters")
        _export_dataset(store, output, buckets, storage_options, quiet)
        return
    if buckets is not None or storage_options:
        raise click.UsageError("--buckets and --storage-option are for export dataset")
    from tbconvert.output import export

    selection = selection_of(run_globs, where, top, by, resumed=resumed)

    def write(opened: Any) -> int:
        grouping = grouping_of(group_by, aggregate_over)
        return export.export(
            opened,
            kind,
            output,
            fmt,
            run=selected_runs(opened, selection),
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


def _export_dataset(
    store: str, output: str, buckets: int | None, pairs: tuple[str, ...], quiet: bool
) -> None:
    from tbconvert.output.dataset import export_dataset

    if output == "-":
        raise click.UsageError("export dataset writes a directory: give -o DIR or -o URL")
    from tbconvert.reading.remote import parse_storage_options

    try:
        options = parse_storage_options(pairs)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--storage-option") from error

    def write(opened: Any) -> Any:
        return export_dataset(
            opened,
            output,
            buckets=buckets,
            storage_options=options,
            progress=False if quiet else None,
        )

    summary = read_store(store, write)
    if quiet:
        return
    rows = sum(summary.rows.values())
    if not summary.changed:
        click.echo(f"{output}: up to date, nothing written", err=True)
        return
    rate = rows / summary.seconds if summary.seconds else 0.0
    click.echo(
        f"{rows} rows in {summary.files_written} new files written to {output} "
        f"({summary.files_deleted} replaced files deleted, buckets: {summary.buckets}, "
        f"{summary.seconds:.1f} s, {rate:,.0f} rows/s)",
        err=True,
    )
