"""Browse a store in datasette (``tbconvert serve``, the ``serve`` extra).

Datasette serves the SQLite file with the metadata of :mod:`tbconvert.output.datasette`: the
public views described column by column, labels instead of ids, facets, and the SQL cookbook
(docs/cookbook.md) as canned queries with forms.  It listens on 127.0.0.1 by default: a store
may hold what a team would not publish, so listening on other addresses is the user's choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tbconvert.errors import MissingDependency, UsageError, install_hint
from tbconvert.output.datasette import database_name, metadata_for
from tbconvert.store.engine import sqlite_path

if TYPE_CHECKING:
    from tbconvert.query.store import Store

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
SETTINGS = {"suggest_facets": False}


def require_datasette() -> Any:
    """Import datasette's application class, or say which extra installs it.

    Raises:
        MissingDependency: datasette (or its server, uvicorn) is not installed.
    """
    try:
        import uvicorn
        from datasette.app import Datasette
    except ImportError as error:
        raise MissingDependency(
            "serving needs datasette, which is not installed",
            hint=install_hint("serve"),
        ) from error
    return Datasette, uvicorn


def url_of(store: Store, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    """The address of the store's database page once served."""
    path = sqlite_path(str(store.engine.url))
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{database_name(path or '')}"


def serve(
    store: Store,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    announce: Callable[[str], Any] = print,
) -> None:
    """Serve the store with datasette until interrupted (Ctrl-C).

    Args:
        store: An open SQLite store (datasette reads SQLite files only).
        host: The address to listen on.
        port: The port to listen on.
        announce: Called with one line naming the URL, once the server is set up.

    Raises:
        UsageError: the store is not a SQLite file.
        MissingDependency: datasette is not installed.
    """
    document = metadata_for(store)
    path = sqlite_path(str(store.engine.url))
    if path is None:  # metadata_for has refused other stores already
        raise UsageError("datasette serves SQLite files only", path=store.display)
    datasette_class, uvicorn = require_datasette()
    # Facet suggestions run a GROUP BY per column of every page shown: on a point view of a
    # big store they time out, and datasette 0.65 then answers 400 instead of the page.
    application = datasette_class([path], metadata=document, settings=SETTINGS)
    announce(f"Serving {store.display} at {url_of(store, host, port)} (Ctrl-C to stop)")
    uvicorn.run(application.app(), host=host, port=port, log_level="warning")
