"""``tbconvert check``: a metric gate for CI, exit 4 when the runs do not meet a condition."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    cli,
    echo_data,
    json_option,
    read_store,
    resumed_option,
    run_option,
    store_option,
)

# SPEC §2: 4 is check's own code, so a job tells "not met" from a failure (1) or a typo (2).
NOT_MET = 4
NAMES = ("passing", "failing")
CHECK_EPILOG = (
    "\b\nExit codes: 0 the runs meet EXPR, 4 they do not, 1 failure, 2 usage error (a bad EXPR)."
)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=CHECK_EPILOG)
@store_option
@run_option
@click.option(
    "--where",
    required=True,
    metavar="EXPR",
    help="The condition, in the language of --where (docs/cli.md).",
)
@click.option(
    "--all/--any",
    "every",
    default=True,
    help="Every run must meet it (the default), or one is enough.",
)
@resumed_option
@json_option
def check(
    store: str, run_globs: tuple[str, ...], where: str, every: bool, resumed: str, as_json: bool
) -> None:
    """Check that runs meet a condition: exit 0 when they do, 4 when they do not (for CI).

    The runs that fail are listed on stderr (with --json, all of it on stdout). No run
    chosen by --run is a failure to meet it.

    \b
    Example:
      tbconvert check --store runs.db --run 'nightly/*' --where 'min(loss, context="val") < 0.2'
    """
    from tbconvert.query.selection import check_runs

    def run_check(opened: Any) -> Any:
        with opened.connect() as conn:
            return check_runs(conn, where, run=run_globs, mode=mode, resumed=resumed)

    mode = "all" if every else "any"
    result = read_store(store, run_check)
    paths = {name: [row["run_path"] for row in getattr(result, name)] for name in NAMES}
    if as_json:
        echo_data(json.dumps({"met": result.met, "mode": mode, "where": where, **paths}))
    else:
        click.echo(_summary(result.met, mode, where, paths), err=True)
    if not result.met:
        sys.exit(NOT_MET)


def _summary(met: bool, mode: str, where: str, paths: dict[str, list[str]]) -> str:
    runs = len(paths["passing"]) + len(paths["failing"])
    if not runs:
        return f"not met: no runs to check against {where}"
    verdict = "met" if met else "not met"
    lines = [f"{verdict}: {len(paths['passing'])} of {runs} runs meet {where} (--{mode})"]
    lines += [] if met else [f"  fails: {path}" for path in paths["failing"]]
    return "\n".join(lines)
