"""``tbconvert push mlflow`` and ``push aim``: the store's runs into another tracker."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    echo_data,
    json_option,
    run_library,
    run_option,
    store_option,
)

tag_option = click.option(
    "--tag",
    "tag_globs",
    multiple=True,
    metavar="GLOB",
    help="Only series whose tag matches (repeatable).",
)


@cli.group(context_settings=CONTEXT_SETTINGS)
def push() -> None:
    """Push the store's runs into another tracker (MLflow, Aim), sending only what is new.

    \b
    Example:
      tbconvert push mlflow --store runs.db --tracking-uri http://127.0.0.1:5000
      tbconvert push aim --store runs.db --repo ~/aim
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
@tag_option
@json_option
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr (warnings still).")
def push_mlflow(
    store: str,
    tracking_uri: str,
    experiment: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
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
    """
    from tbconvert.cli.render import render_push
    from tbconvert.push.mlflow import push_mlflow as push_runs

    summary = run_library(
        0,
        lambda: push_runs(store, tracking_uri, experiment, run_globs, tag_globs),
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


@push.command("aim", context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option(
    "--repo",
    required=True,
    metavar="PATH|aim://HOST:PORT",
    help="The Aim repo: a directory (initialised when missing) or an Aim server.",
)
@run_option
@tag_option
@json_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary on stderr.")
def push_aim(
    store: str,
    repo: str,
    run_globs: tuple[str, ...],
    tag_globs: tuple[str, ...],
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
    """
    from tbconvert.cli.render import render_push_aim
    from tbconvert.push.aim import push_aim as push_runs

    with _points_bar(quiet) as advance:
        summary = run_library(
            0,
            lambda: push_runs(store, repo, run_globs, tag_globs, progress=advance),
            quiet_warnings=True,
        )
    if not quiet:
        click.echo(render_push_aim(summary), err=True)
    if as_json:
        echo_data(json.dumps(dataclasses.asdict(summary) | {"metrics": summary.metrics}))


@contextlib.contextmanager
def _points_bar(quiet: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar of the points written (tqdm on stderr, off without a terminal) and
    the callback that moves it by a batch's count."""
    from tqdm import tqdm

    with tqdm(unit="point", disable=True if quiet else None, leave=False) as bar:
        yield bar.update
