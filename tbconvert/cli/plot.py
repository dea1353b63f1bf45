"""``tbconvert plot`` (a chart file) and ``tbconvert report`` (one offline HTML page)."""

from __future__ import annotations

from typing import Any

import click

from tbconvert.cli.group import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    read_store,
    run_option,
    store_option,
)

# Kept in step with tbconvert.output.plot.X_AXES by a test (imported lazily, for start-up time).
X_AXES = ("step", "relative", "wall")


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
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
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
    output: str,
) -> None:
    """Draw learning curves: one panel per tag, one line per run and context (the plot extra).

    \b
    Example:
      tbconvert plot --store runs.db --tag loss -o loss.png
      tbconvert plot --run 'sweep/*' --tag loss --tag accuracy --smooth 0.6 --log-y -o sweep.svg
    """
    from tbconvert.output import plot as library

    def draw(opened: Any) -> int:
        return library.plot(opened, output, run_globs, tag_globs, context, x_axis, smoothing, log_y)

    count = read_store(store, draw)
    click.echo(f"{count} curves drawn into {output}", err=True)


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
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The page to write (.html); - for stdout.",
)
def report(store: str, run_globs: tuple[str, ...], tag_globs: tuple[str, ...], output: str) -> None:
    """Write one offline HTML page: runs with hparams and final metrics, charts, images, texts.

    The page is self-contained (inline CSS and SVG, images as data: URIs, no script): open it
    in any browser, offline, or mail it.

    \b
    Example:
      tbconvert report --store runs.db -o report.html
      tbconvert report --run 'sweep/*' --tag loss --tag accuracy --tag samples -o sweep.html
    """
    from tbconvert.output import report as library

    shown = read_store(store, lambda opened: library.report(opened, output, run_globs, tag_globs))
    if output != "-":
        click.echo(
            f"{output}: {shown['runs']} runs, {shown['charts']} charts, {shown['images']} images, "
            f"{shown['texts']} texts",
            err=True,
        )
