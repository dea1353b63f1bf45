"""``tbconvert hparams``: one row per hparams session, params and metrics as columns."""

from __future__ import annotations

from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    F,
    cli,
    echo_data,
    format_option,
    read_store,
    resumed_option,
    run_option,
    selection_of,
    selection_options,
    store_option,
)

# Kept in step with tbconvert.query.tables.AGGREGATES by a test (the library is imported
# lazily, for start-up time).
AGGREGATES = ("last", "min", "max", "best")
HPARAMS_FORMATS = ("table", "csv", "json", "jsonl", "md")


def metric_options(function: F) -> F:
    """``--metric TAG`` (repeatable) and ``--agg``: the metric columns of an hparams table."""
    function = click.option(
        "--agg",
        type=click.Choice(AGGREGATES),
        default="last",
        show_default=True,
        help="Each metric's last value (highest step), its min or max over the run, or its "
        "best: the min of a loss or error (by its name), the max of anything else.",
    )(function)
    return click.option(
        "--metric",
        "metrics",
        multiple=True,
        metavar="[CONTEXT:]TAG",
        help="A scalar tag whose value becomes a column (repeatable): one column per "
        "context where a run logged it in several, 'TAG (CONTEXT)'; CONTEXT:TAG takes "
        "one context.",
    )(function)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@run_option
@metric_options
@click.option(
    "--sort",
    metavar="COLUMN",
    help="Sort on this column (a param or metric, 'loss (val)' or val:loss); -COLUMN sorts "
    "descending. Empty cells last.",
)
@selection_options("'opt == \"adam\" and max(accuracy) > 0.9'", columns=True)
@resumed_option
@format_option(HPARAMS_FORMATS)
def hparams(
    store: str,
    run_globs: tuple[str, ...],
    metrics: tuple[str, ...],
    agg: str,
    sort: str | None,
    where: str | None,
    top: int | None,
    by: str | None,
    columns: tuple[str, ...],
    resumed: str,
    fmt: str,
) -> None:
    """Compare hyper-parameters: one row per hparams session, params and metrics as columns.

    \b
    Example:
      tbconvert hparams --store runs.db --metric accuracy --sort=-accuracy
      tbconvert hparams --store runs.db --metric loss --agg min --format csv > sweep.csv
      tbconvert hparams --store runs.db --metric loss --sort val:loss
      tbconvert hparams --store runs.db --where 'lr < 0.01' --top 5 --by 'max(accuracy)' \\
          --column 'best=min(loss, context="val")' --column 'at=argmin(loss, context="val")'
      tbconvert hparams --store runs.db --metric accuracy --format md >> report.md
    """
    from tbconvert.cli.tables import TABLE_FORMATS, render_rows
    from tbconvert.output.hparams import hparams_rows

    selection = selection_of(run_globs, where, top, by, columns, resumed)
    names, rows = read_store(
        store,
        lambda opened: hparams_rows(opened, metrics, run_globs, agg, sort, selection, resumed),
    )
    if agg == "best" and metrics:
        from tbconvert.query.tables import best_direction

        chosen = (f"{'lowest' if best_direction(m) == 'min' else 'highest'} {m}" for m in metrics)
        click.echo("best: " + ", ".join(chosen), err=True)
    if fmt not in TABLE_FORMATS:
        echo_data(_text_of(names, rows, fmt).rstrip("\n"))
    elif rows:
        echo_data(render_rows(names, rows, fmt))
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
