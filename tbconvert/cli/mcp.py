"""``tbconvert mcp``: the store as a read-only MCP server on stdio, for agents (the work is
:mod:`tbconvert.output.mcp_server`)."""

from __future__ import annotations

from typing import Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    read_store,
    run_library,
    store_option,
)


@cli.command(context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG)
@store_option
@click.option("-q", "--quiet", is_flag=True, help="No line on stderr when the server starts.")
def mcp(store: str, quiet: bool) -> None:
    """Serve the store to AI agents as a read-only MCP server over stdio (the mcp extra).

    An MCP client (Claude Desktop, an IDE, an agent framework) starts this command and talks
    to it on stdin and stdout.  Its tools: list_runs (with --where's expressions, top and
    by), describe_run, get_series (every point, or at most max_points thinned so that no
    minimum, maximum or NaN is hidden), compare_runs, hparams_table and query (one
    read-only SQL statement).  Answers are exact and capped in size, and say when they
    were cut.  Nothing is written to the store.  docs/cli.md shows a client's configuration.

    \b
    Example:
      tbconvert mcp --store runs.db
      claude mcp add runs -- tbconvert mcp --store /abs/path/runs.db
    """
    from tbconvert.output import mcp_server

    def run(opened: Any) -> None:
        if not quiet:
            click.echo(f"serving {opened.display} read-only over MCP (stdio)", err=True)
        mcp_server.serve_stdio(opened)

    run_library(0, mcp_server.require_mcp)  # before the store is opened: nothing written
    read_store(store, run)
