"""``tbconvert serve``: the viewer (:mod:`tbconvert.output.viewer`) at ``/`` and, for a SQLite
store, datasette on ``/datasette/`` (the ``serve`` extra).

Datasette serves the SQLite file with the metadata of :mod:`tbconvert.output.datasette`: the
public views described column by column, labels instead of ids, facets, and the SQL cookbook
(docs/cookbook.md) as canned queries with forms.  Both listen on 127.0.0.1 by default: a store
may hold what a team would not publish, so listening on other addresses is the user's choice,
and :func:`serve` warns when it is made.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tbconvert.errors import import_extra
from tbconvert.output.datasette import database_name, metadata_for
from tbconvert.output.viewer.app import DATASETTE_PATH, build_app
from tbconvert.output.viewer.data import make_read_only
from tbconvert.store.engine import sqlite_path

if TYPE_CHECKING:
    from tbconvert.query.store import Store

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
SETTINGS = {"suggest_facets": False, "base_url": DATASETTE_PATH + "/"}


def require_datasette() -> Any:
    """Import datasette's application class, or say which extra installs it.

    Raises:
        MissingDependency: datasette (or its server, uvicorn) is not installed.
    """
    datasette = import_extra("datasette.app", "serve", "serving")
    return datasette.Datasette, import_extra("uvicorn", "serve", "serving")


def base_of(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    """The viewer's address once served."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def url_of(store: Store, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    """The address of the store's database page in datasette once served."""
    path = sqlite_path(str(store.engine.url))
    return f"{base_of(host, port)}{DATASETTE_PATH}/{database_name(path or '')}"


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def application(store: Store) -> Any:
    """The ASGI app: the viewer over ``store``, made read-only, with datasette beside it when
    the store is a SQLite file.

    Raises:
        MissingDependency: datasette, Starlette or plotly is not installed.
    """
    datasette_class, _uvicorn = require_datasette()
    make_read_only(store)
    path = sqlite_path(str(store.engine.url))
    datasette_app = None
    if path is not None:
        # Facet suggestions run a GROUP BY per column of every page shown: on a point view
        # of a big store they time out, and datasette 0.65 then answers 400 instead.
        document = metadata_for(store)
        datasette_app = datasette_class([path], metadata=document, settings=SETTINGS).app()
    return build_app(store, datasette_app)


def serve(
    store: Store,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    announce: Callable[[str], Any] = print,
) -> None:
    """Serve the viewer (and datasette for a SQLite store) until interrupted (Ctrl-C).

    Args:
        store: An open store.
        host: The address to listen on; any but a loopback address is announced as a warning.
        port: The port to listen on.
        announce: Called with the lines naming the URLs, once the server is set up.

    Raises:
        MissingDependency: datasette, Starlette or plotly is not installed.
    """
    app = application(store)
    _datasette, uvicorn = require_datasette()
    if not is_loopback(host):
        announce(f"Warning: listening on {host}: anyone who can reach it can read the store")
    line = f"Serving {store.display}: viewer at {base_of(host, port)}/"
    if sqlite_path(str(store.engine.url)) is not None:
        line += f", tables at {url_of(store, host, port)}"
    announce(line + " (Ctrl-C to stop)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
