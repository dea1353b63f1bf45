"""The ``tbconvert`` command line: parse, call the library, render.  Nothing else lives here.

The app (the click group) and the options commands share are in ``app``; each command
family has a module named after it: ``convert`` (tf, tensorboard), ``runs`` (runs, show),
``hparams``, ``export`` (export, datasette-metadata), ``plot`` (plot, report), ``serve``,
``db``, ``push`` (push mlflow), ``query``, ``check`` and ``mcp``.  All text rendering is in
``render``, the table formats in ``tables``.  Library modules are imported inside commands,
so ``--help`` starts fast.

Exit codes: 0 success (warnings allowed), 1 failure, 2 usage error (a statement ``query``
refuses too), 3 finished but damaged records or unreadable files were skipped, 4 ``check``
found runs that do not meet its condition.
"""

from __future__ import annotations

import os

import click

# tbconvert makes no BLAS call, but OpenBLAS starts a thread per core when NumPy is imported,
# and they spin: about 0.1 s of a second core per conversion, more with --jobs.  Set before
# any command imports NumPy; a value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Importing a command module registers its commands on the app.
from tbconvert.cli import (
    check,
    convert,
    db,
    export,
    hparams,
    mcp,
    plot,
    push,
    query,
    runs,
    serve,
)
from tbconvert.cli.app import cli, end_process

__all__ = [
    "check",
    "cli",
    "convert",
    "db",
    "export",
    "hparams",
    "main",
    "mcp",
    "plot",
    "push",
    "query",
    "runs",
    "serve",
]


def main() -> None:
    """The ``tbconvert`` console script and ``python -m tbconvert``: the CLI in a process of
    its own, which ends as soon as the command does (:func:`end_process`).  Ctrl-C or SIGTERM
    at any moment ends it with one line and exit 130 / 143."""
    from tbconvert.conversion import stopping

    stopping.stop_at_once()
    try:
        cli.main(prog_name="tbconvert")
    except stopping.Stopped as stop:
        click.echo(str(stop), err=True)
        end_process(stop.exit_code)
    except SystemExit as end:
        if end.code is None or isinstance(end.code, int):
            end_process(end.code or 0)
        raise
