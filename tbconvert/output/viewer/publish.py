"""``tbconvert publish``: the viewer as static files that open from ``file://`` or any static
host (an object store, GitHub Pages), with no server and no network.

A page opened from ``file://`` may not fetch, so the data are JavaScript files the page loads
with ``<script>`` tags (``static/published.js``): ``data/overview.js`` (the runs table) and a
file per tag holding each of its lines at a few resolutions.  The coarsest level cuts a line's
whole step range into ``buckets`` buckets (each keeping its first, last, lowest and highest
point, and its NaN, as ``serve`` does), each further level into ``factor`` times more, until a
level holds every point: zoom stays exact down to the finest level's buckets.  Values logged
as float32 (every ``add_scalar``) are written as float32's shortest digits, which the page
reads back as the same float32.  Written through fsspec, so ``-o`` may be a URL.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.output.viewer import data
from tbconvert.output.viewer.app import STATIC, index_html, plotly_js
from tbconvert.output.viewer.defaults import DEFAULT_BUCKETS, DEFAULT_LEVELS, FACTOR
from tbconvert.query import lookups, thinning

if TYPE_CHECKING:
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store

PAGE_SCRIPTS = (
    '<script src="static/published.js"></script>\n<script src="data/overview.js"></script>'
)


@dataclass(frozen=True)
class Published:
    """What a publish wrote: files and their bytes, runs, tags and series, the seconds."""

    files: int
    bytes: int
    runs: int
    tags: int
    series: int
    seconds: float


def publish(
    store: Store,
    target: str,
    run: Globs = None,
    tag: Globs = None,
    *,
    buckets: int = DEFAULT_BUCKETS,
    levels: int = DEFAULT_LEVELS,
    storage_options: dict[str, Any] | None = None,
    step: Callable[[int], Any] | None = None,
) -> Published:
    """Write the viewer over the chosen runs and scalar tags under ``target``.

    Args:
        store: The store.
        target: A directory or an fsspec URL (created; files there are overwritten).
        run, tag: Globs choosing the runs and the scalar tags.
        buckets: The coarsest level's buckets over a line's whole step range.
        levels: How many levels at most, each ``FACTOR`` times finer.
        storage_options: fsspec options of a URL target.
        step: Called with the number of series written, as they are.

    Raises:
        UsageError: no scalar series matches, or a level count or bucket count under 1.
    """
    import fsspec

    if buckets < 1 or levels < 1:
        raise UsageError("--buckets and --levels must be 1 or more")
    started = time.monotonic()
    plotly = plotly_js("ui")
    fs, root = fsspec.core.url_to_fs(os.path.expanduser(target), **(storage_options or {}))
    written = _Writer(fs, root.rstrip("/"))
    with store.snapshot():
        overview = data.overview(store, [run] if isinstance(run, str) else list(run or ()))
        with store.connect() as conn:
            chosen = lookups.series(conn, run, tag, plugin="scalars")
        if not chosen:
            raise UsageError("no scalar series matches", path=store.display, hint="check --tag")
        tags = sorted({series.tag for series in chosen})
        files = {name: f"tag-{index:04d}.js" for index, name in enumerate(tags)}
        overview["tags"] = tags
        overview.update(datasette=False, groups=False)
        for name in tags:
            mine = [series for series in chosen if series.tag == name]
            payload = _tag_payload(store, mine, buckets, levels)
            written.text(f"data/{files[name]}", f"TBV.receive({_json(files[name])},{payload});")
            if step is not None:
                step(len(mine))
    document = {"overview": overview, "files": files}
    written.text("data/overview.js", f"TBV.published = {_json(document)};")
    written.text("index.html", index_html("static", PAGE_SCRIPTS))
    for name in ("viewer.js", "viewer.css", "published.js"):
        written.copy(str(STATIC / name), f"static/{name}")
    written.copy(str(plotly), "static/plotly.min.js")
    return Published(
        written.files,
        written.bytes,
        len(overview["runs"]),
        len(tags),
        len(chosen),
        time.monotonic() - started,
    )


def _tag_payload(store: Store, chosen: Sequence[SeriesRef], buckets: int, levels: int) -> str:
    lines = []
    with store.connect() as conn:
        for series in chosen:
            encoded = []
            count = buckets
            for _level in range(levels):
                found = thinning.thin_series(conn, series.id, count)
                encoded.append(_level_json(found, count))
                if found.exact:
                    break
                count *= FACTOR
            head = _json(
                {"run_id": series.run_id, "run": series.run_path, "context": series.context}
            )
            lines.append(head[:-1] + ',"levels":[' + ",".join(encoded) + "]}")
    return '{"lines":[' + ",".join(lines) + "]}"


def _level_json(found: thinning.Thinned, buckets: int) -> str:
    numbers, single = _numbers([point.value for point in found.points])
    xs = [point.step for point in found.points]
    nan = [point.step for point in found.points if not _finite(point.value)]
    head = {
        "buckets": buckets,
        "low": found.lo,
        "high": found.hi,
        "exact": found.exact,
        "points": found.total,
        "x": xs,
        "nan": nan,
        "f32": single,
    }
    return _json(head)[:-1] + ',"y":[' + ",".join(numbers) + "]}"


def _numbers(values: Sequence[float]) -> tuple[list[str], bool]:
    """The values as JSON numbers, and whether all are float32s: then in float32's shortest
    digits (about half as long), which the page turns back into the same float32 with
    ``Math.fround``; else each double's own shortest digits."""
    import numpy as np

    finite = [value for value in values if _finite(value)]
    single = all(float(np.float32(value)) == value for value in finite)
    found = []
    for value in values:
        if not _finite(value):
            found.append("null")
        elif single:
            found.append(str(np.float32(value)))
        else:
            found.append(repr(float(value)))
    return found, single


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


class _Writer:
    """Files under a root on an fsspec file system, counted."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root
        self.files = 0
        self.bytes = 0

    def text(self, name: str, content: str) -> None:
        self.write(name, content.encode("utf-8"))

    def copy(self, source: str, name: str) -> None:
        with open(source, "rb") as handle:
            self.write(name, handle.read())

    def write(self, name: str, content: bytes) -> None:
        path = posixpath.join(self.root, name)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as handle:
            handle.write(content)
        self.files += 1
        self.bytes += len(content)
