"""The ASGI app of ``tbconvert serve``: the viewer's page at ``/``, its JSON at ``/api/``, and
datasette mounted on ``/datasette/`` (SQLite stores).

A small Starlette app rather than datasette's plugin hooks: datasette serves SQLite files only,
while the viewer reads PostgreSQL stores too, and a plugin would put the viewer under
datasette's URL space and its page templates.  The page asks for fixed queries by name (a
chart's tag, runs and range), never for SQL; the only SQL a browser can send goes through
datasette's own read-only interface.
"""

from __future__ import annotations

import importlib.util
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tbconvert.errors import ConverterError, MissingDependency, install_hint
from tbconvert.output.viewer import data, media
from tbconvert.query.groups import Grouping

if TYPE_CHECKING:
    from tbconvert.query.store import Store

STATIC = Path(str(resources.files("tbconvert.output.viewer") / "static"))
DATASETTE_PATH = "/datasette"


def plotly_js(extra: str = "serve") -> Path:
    """The plotly.js the page loads: the cartesian bundle the build put beside the page
    (``hatch_build.py``: a third of the size, the same API for the lines and heatmaps drawn
    here), else the full one the ``plotly`` wheel ships.  The ``plotly`` package of the
    ``serve`` and ``ui`` extras is required either way, so that a build without the registry
    gives the same viewer (a missing one names ``extra``).

    Raises:
        MissingDependency: plotly is not installed.
    """
    # Found, not imported: importing plotly's Python side takes seconds and is not needed.
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise MissingDependency(
            "the viewer draws with plotly.js, which is not installed",
            hint=install_hint(extra),
        )
    cartesian = STATIC / "vendor" / "plotly-cartesian.min.js"
    full = Path(spec.origin).parent / "package_data" / "plotly.min.js"
    return cartesian if cartesian.is_file() else full


def index_html(mode: str, scripts: str = "") -> str:
    """The page, told where its data comes from (``server`` or ``static``), with ``scripts``
    (tags) loaded before its own."""
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    return page.replace("{{MODE}}", mode).replace("{{SCRIPTS}}", scripts)


def build_app(store: Store, datasette_app: Any = None) -> Any:
    """The viewer over ``store`` (opened read-only by the caller), with ``datasette_app``
    mounted on ``/datasette`` when given.

    Raises:
        MissingDependency: Starlette is not installed.
    """
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import FileResponse, HTMLResponse, Response
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError as error:
        raise MissingDependency(
            "the viewer needs Starlette, which is not installed", hint=install_hint("serve")
        ) from error
    plotly = plotly_js()
    page = index_html("server")

    def answer(value: Any, status: int = 200) -> Response:
        body = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
        return Response(body, status_code=status, media_type="application/json")

    def guarded(compute: Any) -> Any:
        def endpoint(request: Request) -> Response:
            try:
                return answer(compute(request.query_params))
            except (ConverterError, ValueError, KeyError) as error:
                return answer({"error": str(error)}, status=400)

        return endpoint

    def overview(_query: Any) -> Any:
        return {**data.overview(store), "datasette": datasette_app is not None}

    attempts: dict[int, Any] = {}  # series id -> its last attempt, as charts last read it

    def chart(query: Any) -> Any:
        return data.chart(
            store,
            query["tag"],
            _ids(query.get("runs", "")),
            query.get("x", "step"),
            _float(query.get("low")),
            _float(query.get("high")),
            int(query.get("buckets", "1000")),
            attempts,
        )

    def grouped(query: Any) -> Any:
        grouping = Grouping(tuple(query.getlist("by")), tuple(query.getlist("over")))
        return data.groups(
            store, query["tag"], grouping, _ids(query.get("runs", "")), query.get("band", "std")
        )

    def media_list(query: Any) -> Any:
        return media.media_series(store, _ids(query.get("runs", "")))

    def media_points(query: Any) -> Any:
        return media.media_points(store, int(query["series"]))

    def blob(request: Request) -> Response:
        try:
            content, kind = media.blob(
                store, int(request.query_params["series"]), int(request.path_params["blob"])
            )
        except (ConverterError, ValueError, KeyError) as error:
            return answer({"error": str(error)}, status=404)
        # nosniff: the browser keeps to the type given, never reads logged bytes as a page.
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=3600"}
        return Response(content, media_type=kind, headers=headers)

    routes: list[Any] = [
        Route("/", lambda _request: HTMLResponse(page)),
        Route("/static/plotly.min.js", lambda _request: FileResponse(plotly)),
        Mount("/static", app=StaticFiles(directory=STATIC)),
        Route("/api/overview.json", guarded(overview)),
        Route("/api/chart.json", guarded(chart)),
        Route("/api/groups.json", guarded(grouped)),
        Route("/api/media.json", guarded(media_list)),
        Route("/api/media-points.json", guarded(media_points)),
        Route("/api/blob/{blob:int}", blob),
    ]
    if datasette_app is not None:
        routes.append(Mount(DATASETTE_PATH, app=datasette_app))
    return Starlette(routes=routes)


def _ids(value: str) -> list[int]:
    return [int(part) for part in value.split(",") if part.strip()]


def _float(value: str | None) -> float | None:
    return None if value in (None, "") else float(value)
