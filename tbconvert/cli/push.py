"""``tbconvert push mlflow``: the store's runs into an MLflow tracking server."""

from __future__ import annotations

import dataclasses
import json

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    echo_data,
    json_option,
    read_store,
    run_library,
    run_option,
    selected_runs,
    selection_of,
    selection_options,
    store_option,
)


@cli.group(context_settings=CONTEXT_SETTINGS)
def push() -> None:
    """Push the store's runs into another tracker (MLflow), sending only what is new.

    \b
    Example:
      tbconvert push mlflow --store runs.db --tracking-uri http://127.0.0.1:5000
    """


@push.command("mlflow", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option(
    "--tracking-uri",
    envvar="MLFLOW_TRACKING_URI",
    required=True,
    metavar="URI",
    help="MLflow's tracking URI: http://host:port, file:DIR or sqlite:///FILE "
    "[default: $MLFLOW_TRACKING_URI].",
)
@click.option(
    "--experiment",
    default="tbconvert",
    show_default=True,
    metavar="NAME",
    help="The MLflow experiment (created when missing).",
)
@run_option
@click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only series whose tag matches (repeatable).",
)
@selection_options("'max(accuracy) > 0.9'")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr (warnings still).")
def push_mlflow(
    store: str,
    tracking_uri: str,
    experiment: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Push runs into MLflow: one MLflow run per run, params, every scalar point, artifacts.

    A run is named by its path and tagged with its source, path, group and run id; a
    series' metric key is its tag, or in a context "CONTEXT / TAG" (docs/cli.md has the
    whole rule).  Run it again after a conversion: it sends only new points, and a push
    that was interrupted is completed without sending a point twice.

    \b
    Example:
      tbconvert push mlflow --store runs.db --tracking-uri http://127.0.0.1:5000
      tbconvert push mlflow --tracking-uri sqlite:///mlflow.db --run 'sweep/*' --tag loss
      tbconvert push mlflow --tracking-uri sqlite:///mlflow.db --where 'min(loss) < 0.2'
    """
    from tbconvert.cli.render import render_push
    from tbconvert.push.mlflow import push_mlflow as push_runs

    selection = selection_of(run_globs, where, top, by)
    chosen = read_store(store, lambda opened: selected_runs(opened, selection))
    summary = run_library(
        0,
        lambda: push_runs(store, tracking_uri, experiment, chosen, tag_globs),
        quiet_warnings=True,
    )
    text = render_push(summary)
    if not quiet:
        click.echo(text, err=True)
    else:
        for warning in summary.warnings:
            click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_data(json.dumps(dataclasses.asdict(summary) | {"metrics": summary.metrics}))
