"""``tbconvert serve`` (the viewer over the store, datasette beside it) and ``tbconvert
publish`` (the viewer as static files)."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    grouping_of,
    grouping_options,
    read_store,
    run_option,
    selected_runs,
    selection_of,
    selection_options,
    store_option,
)
from tbconvert.output.viewer.defaults import (
    DEFAULT_BUCKETS,
    DEFAULT_LEVELS,
    DEFAULT_MAX_BYTES,
    FACTOR,
)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 shares the store with your network, with a warning).",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="Port."
)
def serve(store: str, host: str, port: int) -> None:
    """Look at the runs in a browser: runs table, charts, zoom, groups (the serve extra).

    The viewer is at http://127.0.0.1:8001/ and, for a SQLite store, datasette's tables
    and SQL at /datasette/.  The store is opened read-only.

    \b
    Example:
      tbconvert serve --store runs.db
      tbconvert serve --store runs.db --port 8080
    """
    from tbconvert.output import serve as library

    def run(opened: Any) -> None:
        # Ctrl-C is how a server ends, normally (exit 0): uvicorn shuts down, then raises the
        # signal again, which Python's own handler makes the KeyboardInterrupt it expects.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        library.serve(opened, host, port, announce=lambda line: click.echo(line, err=True))

    read_store(store, run)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only these tags: scalars, images, audio, texts, histograms (repeatable).",
)
@selection_options("'max(accuracy) > 0.9'")
@grouping_options("The page can draw one mean and band per group of runs")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="DIR|URL",
    help="The directory (or fsspec URL: s3://bucket/site) to write the page and its data into.",
)
@click.option(
    "--buckets",
    type=click.IntRange(min=1),
    default=DEFAULT_BUCKETS,
    show_default=True,
    help="Buckets of the coarsest level over a line's whole step range.",
)
@click.option(
    "--levels",
    type=click.IntRange(min=1),
    default=DEFAULT_LEVELS,
    show_default=True,
    help=f"Levels of detail at most, each {FACTOR} times finer (zoom is exact down to the finest).",
)
@click.option(
    "--max-size",
    type=click.FloatRange(min=0),
    default=DEFAULT_MAX_BYTES / 1e6,
    show_default=True,
    metavar="MB",
    help="Leave out finer levels rather than make the bundle larger (plotly.js is 4.6 MB).",
)
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="An option of the -o URL's file system, as fsspec takes it (repeatable).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary.")
def publish(
    store: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    group_by: tuple[str, ...],
    aggregate_over: tuple[str, ...],
    output: str,
    buckets: int,
    levels: int,
    max_size: float,
    storage_options: tuple[str, ...],
    quiet: bool,
) -> None:
    """Write the viewer as static files to share: they open from file:// with no network.

    The bundle holds the runs table, every scalar line (by step, relative or wall time),
    the images, audio, texts and histograms of the chosen tags and, with --group-by or
    --aggregate-over, each group's mean and bands.  What would pass --max-size is left out
    and named in the summary and on the page.

    \b
    Example:
      tbconvert publish --store runs.db -o site/ && xdg-open site/index.html
      tbconvert publish --store runs.db --run 'sweep/*' --tag 'loss*' -o s3://bucket/runs/
      tbconvert publish --store runs.db --top 10 --by='-min(loss)' -o site/
      tbconvert publish --store runs.db --aggregate-over seed -o site/
    """
    from tqdm import tqdm

    from tbconvert.output.viewer.publish import publish as library
    from tbconvert.reading.remote import parse_storage_options

    try:
        options = parse_storage_options(storage_options)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--storage-option") from error

    selection = selection_of(run_globs, where, top, by)
    grouping = grouping_of(group_by, aggregate_over)

    def write(opened: Any) -> Any:
        chosen = selected_runs(opened, selection)
        with tqdm(unit=" series", disable=True if quiet else None, file=sys.stderr) as bar:
            return library(
                opened,
                output,
                chosen or None,
                tag_globs or None,
                grouping=grouping,
                buckets=buckets,
                levels=levels,
                max_bytes=int(max_size * 1e6),
                storage_options=options,
                step=bar.update,
            )

    done = read_store(store, write)
    if not quiet:
        click.echo(publish_summary(done, output), err=True)


def publish_summary(done: Any, output: str) -> str:
    """What ``publish`` wrote, what the budget left out, and how to open it."""
    detail = (
        "every point"
        if not done.finest
        else f"zoom exact down to 1/{done.finest} of a line's steps (--levels, --max-size)"
    )
    extra = "".join(
        f", {count} {what}"
        for count, what in ((done.grouped_tags, "tags with groups"), (done.media, "media series"))
        if count
    )
    lines = [
        f"{done.series} lines of {done.runs} runs and {done.tags} tags{extra} written to "
        f"{output} ({done.files} files, {done.bytes / 1e6:.1f} MB, {detail}, "
        f"{done.seconds:.1f} s); open {output.rstrip('/')}/index.html"
    ]
    kinds = {"groups": "tags' groups", "media": "media series"}
    for kind, names in sorted(done.left_out.items()):
        shown = "; ".join(name if len(name) <= 60 else name[:57] + "..." for name in names[:5])
        more = f"; and {len(names) - 5} more" if len(names) > 5 else ""
        lines.append(
            f"left out to stay within --max-size: {len(names)} {kinds.get(kind, kind)} "
            f"({shown}{more})"
        )
    return "\n".join(lines)
