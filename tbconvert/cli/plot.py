"""``tbconvert plot`` (a chart file) and ``tbconvert report`` (one offline HTML page)."""

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
    store_option,
)
from tbconvert.output.choices import AGGREGATES, BANDS, X_AXES


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    required=True,
    metavar="GLOB",
    help="Scalar tags to draw, one panel each (repeatable).",
)
@click.option("--context", metavar="NAME", help="Only this context ('' is the run directory).")
@click.option(
    "--x",
    "x_axis",
    type=click.Choice(X_AXES),
    default="step",
    show_default=True,
    help="x axis: step, seconds since each run's first point, or wall-clock time (UTC).",
)
@click.option(
    "--smooth",
    "smoothing",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="TensorBoard's smoothing weight (debiased moving average); the raw curve stays faint.",
)
@click.option("--log-y", is_flag=True, help="Logarithmic y axis.")
@grouping_options("One line per group of runs, with a band")
@click.option(
    "--aggregate",
    type=click.Choice(AGGREGATES),
    default="mean",
    show_default=True,
    help="A group's line.",
)
@click.option(
    "--band",
    type=click.Choice(BANDS),
    default="std",
    show_default=True,
    help="A group's band: mean +/- std or sem, a 95%% t interval, min..max, or none.",
)
@resumed_option
@selection_options("'max(accuracy, context=\"val\") > 0.9'")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE",
    callback=output_file,
    help="The image to write: .png, .svg or .pdf.",
)
def plot(
    store: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    context: str | None,
    x_axis: str,
    smoothing: float,
    log_y: bool,
    group_by: tuple[str, ...],
    aggregate_over: tuple[str, ...],
    aggregate: str,
    band: str,
    resumed: str,
    where: str | None,
    top: int | None,
    by: str | None,
    output: str,
) -> None:
    """Draw learning curves: one panel per tag, one line per run and context (the plot extra).

    \b
    Example:
      tbconvert plot --store runs.db --tag loss -o loss.png
      tbconvert plot --run 'sweep/*' --tag loss --tag accuracy --smooth 0.6 --log-y -o sweep.svg
      tbconvert plot --tag loss --aggregate-over seed --band ci95 -o over_seeds.png
      tbconvert plot --tag loss --top 5 --by='-min(loss, context="val")' -o best5.png

    With --group-by or --aggregate-over, each group's runs are smoothed and drawn as one line
    with a band: at each step, over the runs that logged it (with --smooth 0, the numbers of
    export scalars with the same grouping).
    """
    from tbconvert.output import plot as library

    selection = selection_of(run_globs, where, top, by, resumed=resumed)

    def draw(opened: Any) -> Any:
        grouping = grouping_of(group_by, aggregate_over)
        return library.plot(
            opened,
            output,
            selected_runs(opened, selection),
            tag_globs,
            context,
            x_axis,
            smoothing,
            log_y,
            grouping=grouping,
            aggregate=aggregate,
            band=band,
            resumed=resumed,
        )

    drawn = read_store(store, draw)
    click.echo(f"{drawn.lines} curves drawn into {output}", err=True)
    _warn_if_crowded(drawn.fullest, "panel", grouped=bool(group_by or aggregate_over))


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only tags that match: scalars, images and texts (repeatable).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE",
    callback=output_file,
    help="The page to write (.html); - for stdout.",
)
@grouping_options("Charts of one line per group of runs, as plot draws them")
@resumed_option
@selection_options("'lr < 1e-3'")
def report(
    store: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    output: str,
    group_by: tuple[str, ...],
    aggregate_over: tuple[str, ...],
    resumed: str,
    where: str | None,
    top: int | None,
    by: str | None,
) -> None:
    """Write one offline HTML page: runs with hparams and final metrics, charts, images, texts.

    The page is self-contained (inline CSS and SVG, images as data: URIs, no script): open it
    in any browser, offline, or mail it.

    \b
    Example:
      tbconvert report --store runs.db -o report.html
      tbconvert report --run 'sweep/*' --tag loss --tag accuracy --tag samples -o sweep.html
      tbconvert report --aggregate-over seed -o over_seeds.html
      tbconvert report --where 'opt == "adam" and last(accuracy) > 0.8' -o adam.html
    """
    from tbconvert.output import report as library

    selection = selection_of(run_globs, where, top, by, resumed=resumed)

    def write(opened: Any) -> Any:
        grouping = grouping_of(group_by, aggregate_over)
        chosen = selected_runs(opened, selection)
        return library.report(opened, output, chosen, tag_globs, grouping, resumed)

    shown = read_store(store, write)
    if output != "-":
        click.echo(
            f"{output}: {shown['runs']} runs, {shown['charts']} charts, {shown['images']} images, "
            f"{shown['texts']} texts",
            err=True,
        )
    _warn_if_crowded(shown["fullest"], "chart", grouped=bool(group_by or aggregate_over))


def _warn_if_crowded(lines: int, chart: str, grouped: bool) -> None:
    from tbconvert.output.linestyles import crowded_warning

    warning = None if grouped else crowded_warning(lines, chart)
    if warning:
        click.echo(warning, err=True)
