"""``tbconvert push mlflow``, ``push aim`` and ``push wandb``: the store's runs into another
tracker."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

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

# The series a push sends: as --tag elsewhere, on series only.
tag_option = click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only series whose tag matches (repeatable).",
)


def push_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options every push takes: the runs and series it sends, and how it reports."""
    shared = (
        run_option,
        tag_option,
        selection_options("'max(accuracy) > 0.9'"),
        json_option,
        click.option(
            "-q", "--quiet", is_flag=True, help="No progress, no summary (warnings still)."
        ),
    )
    for option in reversed(shared):
        function = option(function)
    return function


@cli.group(context_settings=CONTEXT_SETTINGS)
def push() -> None:
    """Push the store's runs into another tracker (MLflow, Aim, W&B), sending only what is new.

    \b
    Example:
      tbconvert push mlflow --store runs.db --tracking-uri http://127.0.0.1:5000
      tbconvert push aim --store runs.db --repo ~/aim
      tbconvert push wandb --store runs.db --project sweeps --offline wandb-out
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
@click.option(
    "--dry-run", is_flag=True, help="Count what would be sent, from the store; open no MLflow."
)
@push_options
def push_mlflow(
    store: str,
    tracking_uri: str,
    experiment: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    dry_run: bool,
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
      tbconvert push mlflow --tracking-uri sqlite:///mlflow.db --dry-run
    """
    from tbconvert.cli.render import render_push
    from tbconvert.push.mlflow import push_mlflow as push_runs

    _push(
        store,
        selection_of(run_globs, where, top, by),
        lambda chosen, progress: push_runs(
            store,
            tracking_uri,
            experiment,
            chosen,
            tag_globs,
            dry_run=dry_run,
            progress=progress,
        ),
        render_push,
        quiet=quiet,
        as_json=as_json,
        dry_run=dry_run,
    )


@push.command("wandb", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option("--project", required=True, metavar="NAME", help="The W&B project.")
@click.option(
    "--entity",
    envvar="WANDB_ENTITY",
    metavar="NAME",
    help="The W&B entity (team or user) [default: $WANDB_ENTITY, else W&B's default].",
)
@click.option(
    "--offline",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write W&B's offline run directories under DIR/wandb (upload them later with "
    "wandb sync), with no network.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be sent; send nothing.")
@push_options
def push_wandb(
    store: str,
    project: str,
    entity: str | None,
    offline: str | None,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Push runs into W&B: one W&B run per run, config, scalars, images, texts, histograms.

    A run's W&B id is derived from its source and path, so a push again resumes it; its
    name is its path, its group its group.  A series' key is "CONTEXT/TAG" (the run
    directory's own context is "run"), plotted against its own step ("KEY@step"), each point
    at its own wall time (its row's _timestamp); docs/cli.md has the whole rule.  W&B keeps
    one point per step and steps that only grow: each series goes as its last attempt (as
    v_scalars_current), a step written twice as its last point, and the summary counts the
    points that could not go.  Run it again after a conversion: it sends only what is new.

    \b
    Example:
      tbconvert push wandb --store runs.db --project sweeps --offline wandb-out
      tbconvert push wandb --project sweeps --offline out --where 'min(loss) < 0.2'
      wandb sync wandb-out/wandb/offline-run-*
    """
    from tbconvert.cli.render import render_push_wandb
    from tbconvert.push.wandb import push_wandb as push_runs

    _push(
        store,
        selection_of(run_globs, where, top, by),
        lambda chosen, progress: push_runs(
            store, project, entity, offline, chosen, tag_globs, dry_run=dry_run, progress=progress
        ),
        render_push_wandb,
        quiet=quiet,
        as_json=as_json,
        dry_run=dry_run,
        totals=("metrics", "not_sent"),
    )


@push.command("aim", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option(
    "--repo",
    required=True,
    metavar="PATH|aim://HOST:PORT",
    help="The Aim repo: a directory (initialised when missing) or an Aim server.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be sent; open no repo.")
@push_options
def push_aim(
    store: str,
    repo: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
    where: str | None,
    top: int | None,
    by: str | None,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Push runs into Aim: one Aim run per run, its params, every point at its wall time.

    Params go as run["hparams"], where a run came from as run["tbconvert"]; a scalar series
    is the metric named by its tag, in the context {"subset": CONTEXT} ({} for the run
    directory itself); images, audio, texts and histograms as Aim's objects.  Aim keeps one
    point per step: a resumed series goes as its last attempt, and the summary counts the
    points left out.  Run it again after a conversion: it sends only what is new, and
    completes a push that was interrupted (docs/cli.md has the whole rule).

    \b
    Example:
      tbconvert push aim --store runs.db --repo ~/aim
      tbconvert push aim --repo aim://127.0.0.1:53800 --run 'sweep/*' --json
      tbconvert push aim --repo ~/aim --top 5 --by='-min(loss, context="val")'
    """
    from tbconvert.cli.render import render_push_aim
    from tbconvert.push.aim import push_aim as push_runs

    _push(
        store,
        selection_of(run_globs, where, top, by),
        lambda chosen, progress: push_runs(
            store, repo, chosen, tag_globs, dry_run=dry_run, progress=progress
        ),
        render_push_aim,
        quiet=quiet,
        as_json=as_json,
        dry_run=dry_run,
    )


def _push(
    store: str,
    selection: Any,
    send: Callable[[tuple[str, ...], Any], Any],
    render: Callable[[Any], str],
    *,
    quiet: bool,
    as_json: bool,
    dry_run: bool = False,
    totals: tuple[str, ...] = ("metrics",),
) -> None:
    """What every push command does around its library call: the chosen runs, a progress bar
    (not for a dry run), the summary on stderr (with ``quiet`` its warnings alone) and with
    ``as_json`` the summary and its ``totals`` (properties) on stdout."""
    from tbconvert.push.core import points_bar

    chosen = read_store(store, lambda opened: selected_runs(opened, selection))
    with points_bar(False if quiet or dry_run else None) as progress:
        summary = run_library(0, lambda: send(chosen, progress), quiet_warnings=True)
    if not quiet:
        click.echo(render(summary), err=True)
    else:
        for warning in summary.warnings:
            click.echo(f"warning: {warning}", err=True)
    if as_json:
        document = dataclasses.asdict(summary) | {name: getattr(summary, name) for name in totals}
        echo_data(json.dumps(document))
