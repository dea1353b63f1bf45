"""``tbconvert mcp``: a read-only MCP server over a store, on the official MCP SDK's
``MCPServer``, speaking over stdio (an MCP client starts it as a subprocess).

The tools are :mod:`tbconvert.output.mcp_tools`' answers, each marked read-only; their
descriptions state the caps an answer keeps to.  A library error (no such run, a bad
expression, a refused write) comes back as the tool's error, in one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tbconvert.errors import ConverterError, import_extra
from tbconvert.output import mcp_tools as tools
from tbconvert.version import __version__

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from tbconvert.query.attempts import LastAttempt
    from tbconvert.query.store import Store

INSTRUCTIONS = (
    "Read-only access to a tbconvert run store: TensorBoard event logs converted to SQL. "
    "Start with list_runs (filter with `where`, e.g. "
    "'lr < 1e-3 and min(loss, context=\"val\") < 0.2', and rank with top and by), then "
    "describe_run for a run's series and params, get_series for a curve, compare_runs or "
    "hparams_table to set runs side by side, and query for any read-only SQL over the views "
    "v_runs, v_scalars, v_scalars_current, v_series, v_params. "
    "Answers are exact and capped in size; a cut answer says so (truncated, count)."
)


def require_mcp() -> type[MCPServer]:
    """The SDK's server class, or say which extra installs it.

    Raises:
        MissingDependency: the MCP SDK is not installed.
    """
    server: type[MCPServer] = import_extra("mcp.server.mcpserver", "mcp", "tbconvert mcp").MCPServer
    return server


def build_server(store: Store) -> MCPServer:
    """An MCP server whose tools read ``store`` (open for as long as the server runs)."""
    server_class = require_mcp()
    from mcp_types import ToolAnnotations

    server = server_class("tbconvert", instructions=INSTRUCTIONS, version=__version__)
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for tool in _tools(store):
        server.tool(annotations=read_only, structured_output=False)(tool)
    return server


def serve_stdio(store: Store) -> None:
    """Serve ``store`` over stdin and stdout until the client closes them."""
    build_server(store).run("stdio")


def _answer(call: Callable[[], dict[str, Any]]) -> str:
    """A tool's answer as compact JSON; a library error as the one-line error the client
    shows."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        answer = call()
    except ConverterError as error:
        raise ToolError(str(error)) from None
    return json.dumps(answer, separators=(",", ":"), allow_nan=False)


def _tools(store: Store) -> list[Callable[..., str]]:
    """The tools, closed over the store; their docstrings are what an agent reads."""
    # Each series' last attempt as get_series read it: a zoom into it skips reading it again.
    attempts: dict[tuple[str, str, str | None], LastAttempt] = {}

    def list_runs(
        where: str | None = None, top: int | None = None, by: str | None = None,
        run: str | None = None,
    ) -> str:  # fmt: skip
        """List the runs of the store with their group, times and hyper-parameters.

        where: a condition on run fields, params and series aggregates, e.g.
        'lr < 1e-3 and min(loss, context="val") < 0.2' or 'run % "sweep/*"' (a glob); the
        aggregates are last, min, max, mean, count, argmin, argmax of a scalar tag. top and
        by: keep the first N runs by an expression, descending ('-EXPR' ascending), e.g.
        top=5, by='-min(loss, context="val")'. run: a glob on run paths.
        At most 200 runs; `count` is how many met the condition.
        """
        return _answer(lambda: tools.list_runs(store, where, top, by, run))

    def describe_run(run: str) -> str:
        """Describe one run (its path, as list_runs gives it, or its id): every series with
        its plugin, point count, first and last step and a scalar's last value and trend;
        its params; its event files. At most 500 series and 100 files."""
        return _answer(lambda: tools.describe_run(store, run))

    def get_series(
        run: str, tag: str, context: str | None = None,
        max_points: int = tools.DEFAULT_POINTS,
        first_step: int | None = None, last_step: int | None = None,
    ) -> str:  # fmt: skip
        """Get one scalar series' points (step, wall_time, value) as its last attempt left
        it (a resumed run's dropped points left out). Every point when the range holds at
        most max_points (5 to 5000, default 500); else thinned to at most max_points
        keeping, per equal step range, the first, last, lowest, highest and first NaN point,
        so no spike or NaN is hidden (`exact` false, `kept_as` says why each point is kept).
        context: where the tag is logged in several contexts of the run (e.g. 'train',
        'validation'). first_step, last_step: zoom into a range. NaN and infinities are
        the strings "NaN", "Infinity", "-Infinity"."""
        return _answer(
            lambda: tools.get_series(
                store, run, tag, context, max_points, first_step, last_step, attempts=attempts
            )
        )

    def compare_runs(runs: list[str], tags: list[str] | None = None) -> str:
        """Compare runs (paths or globs) side by side: for each of their scalar series whose
        tag matches `tags` (globs; all when omitted), its point count and last, lowest and
        highest value, as each series' last attempt left it. At most 200 rows."""
        return _answer(lambda: tools.compare_runs(store, runs, tags or ()))

    def hparams_table(
        where: str | None = None, metrics: list[str] | None = None,
        top: int | None = None, by: str | None = None,
    ) -> str:  # fmt: skip
        """The hyper-parameter table: one row per run (per hparams session) meeting `where`
        (as in list_runs), a column per param and per metric in `metrics` (scalar tags; its
        last value; 'CONTEXT:TAG' for one context). At most 200 rows."""
        return _answer(lambda: tools.hparams_table(store, where, metrics or (), top, by))

    def query(sql: str, max_rows: int = tools.DEFAULT_ROWS) -> str:
        """Run one read-only SQL statement (SELECT, WITH, ...; writes are refused) on the
        store, SQLite or PostgreSQL. Views: v_runs, v_scalars, v_scalars_current,
        v_last_scalars, v_series, v_params, v_texts, v_histograms, v_images. At most
        max_rows rows (default 100, up to 1000); `truncated` says when there were more."""
        return _answer(lambda: tools.query(store, sql, max_rows))

    return [list_runs, describe_run, get_series, compare_runs, hparams_table, query]
