"""``tbconvert serve``: the viewer over the store, datasette beside it."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    read_store,
    store_option,
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
