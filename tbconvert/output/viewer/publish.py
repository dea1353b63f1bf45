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

import base64
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
from tbconvert.output.viewer.defaults import (
    DEFAULT_BUCKETS,
    DEFAULT_LEVELS,
    DEFAULT_MAX_BYTES,
    FACTOR,
)
from tbconvert.query import lookups, thinning

if TYPE_CHECKING:
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store

# Lines thinned in one statement: a chart's worth, so that the database sorts no more at once.
LINES_PER_STATEMENT = 100
# What a thinned point and a line's own fields take in a data file, measured on the benchmark's
# store (benchmarks/viewer.py): a step difference and a base64 float32 are about 13 bytes.
POINT_BYTES = 14
LINE_BYTES = 200
MIN_BUCKETS = 8
STATIC_FILES = ("viewer.js", "media.js", "viewer.css", "published.js")
PAGE_SCRIPTS = (
    '<script src="static/published.js"></script>\n<script src="data/overview.js"></script>'
)


@dataclass(frozen=True)
class Published:
    """What a publish wrote: files and their bytes, runs, tags and series, the seconds, and
    the finest level's buckets per line (0: every line whole, every point in)."""

    files: int
    bytes: int
    runs: int
    tags: int
    series: int
    seconds: float
    finest: int


def publish(
    store: Store,
    target: str,
    run: Globs = None,
    tag: Globs = None,
    *,
    buckets: int = DEFAULT_BUCKETS,
    levels: int = DEFAULT_LEVELS,
    max_bytes: int = DEFAULT_MAX_BYTES,
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
        max_bytes: The bundle's size, page and plotly.js included, that a finer level is
            left out rather than exceed (the coarsest level is always written).
        storage_options: fsspec options of a URL target.
        step: Called with the number of lines thinned, as they are.

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
    statics = [(str(STATIC / name), f"static/{name}") for name in STATIC_FILES]
    statics.append((str(plotly), "static/plotly.min.js"))
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
        document = _json({"overview": overview, "files": files})
        fixed = len(document) + sum(os.path.getsize(source) for source, _ in statics)
        encoded, finest = _levels(store, chosen, buckets, levels, max_bytes - fixed, step)
    for name in tags:
        lines = [
            _line_json(series, encoded[index])
            for index, series in enumerate(chosen)
            if series.tag == name
        ]
        payload = '{"lines":[' + ",".join(lines) + "]}"
        written.text(f"data/{files[name]}", f"TBV.receive({_json(files[name])},{payload});")
    written.text("data/overview.js", f"TBV.published = {document};")
    written.text("index.html", index_html("static", PAGE_SCRIPTS))
    for source, name in statics:
        written.copy(source, name)
    return Published(
        written.files,
        written.bytes,
        len(overview["runs"]),
        len(tags),
        len(chosen),
        time.monotonic() - started,
        finest,
    )


def _levels(
    store: Store,
    chosen: Sequence[SeriesRef],
    buckets: int,
    levels: int,
    budget: int,
    step: Callable[[int], Any] | None,
) -> tuple[list[list[str]], int]:
    """Each line's levels as JSON, coarsest first, and the finest level's buckets (0 when
    every line is whole): a level is added to every line not yet whole while the estimate
    of its size (each line's points up to four per bucket, at the bytes a point took in
    the level before) fits the budget.  The coarsest level has fewer than ``buckets`` when
    that many would not fit (``POINT_BYTES`` a point, ``LINE_BYTES`` a line), but never
    under ``MIN_BUCKETS``."""
    encoded: list[list[str]] = [[] for _ in chosen]
    points = [0] * len(chosen)
    pending = list(range(len(chosen)))
    fits = (budget / max(len(chosen), 1) - LINE_BYTES) / (4 * POINT_BYTES)
    count = max(MIN_BUCKETS, min(buckets, int(fits)))
    used, per_point, finest = 0, 0.0, count
    with store.connect() as conn:
        for level in range(levels):
            estimate = sum(min(points[i], 4 * count) for i in pending) * per_point
            if level and used + estimate > budget:
                break
            written = kept = 0
            for start in range(0, len(pending), LINES_PER_STATEMENT):
                batch = pending[start : start + LINES_PER_STATEMENT]
                thinned = thinning.thin_many(conn, [chosen[i].id for i in batch], count)
                for index in batch:
                    found = thinned[chosen[index].id]
                    text = _level_json(found, count)
                    encoded[index].append(text)
                    points[index] = found.total
                    written, kept = written + len(text), kept + len(found.points)
                if step is not None:
                    step(len(batch))
            used += written
            per_point = written / max(kept, 1)
            finest = count
            pending = [i for i in pending if not _is_exact(encoded[i][-1])]
            if not pending:
                return encoded, 0
            count *= FACTOR
    return encoded, finest


def _is_exact(level: str) -> bool:
    return '"exact":true' in level


def _line_json(series: SeriesRef, levels: list[str]) -> str:
    owner = _json({"run_id": series.run_id, "run": series.run_path, "context": series.context})
    return owner[:-1] + ',"levels":[' + ",".join(levels) + "]}"


def _level_json(found: thinning.Thinned, buckets: int) -> str:
    """One level: its points' steps as differences, and their values as little-endian
    float32 (when every value is one, as ``add_scalar`` logs them) or float64, in base64,
    NaN for a NaN; about 9 bytes a point."""
    import numpy as np

    steps = np.array([point.step for point in found.points], dtype=np.int64)
    values = np.array([point.value for point in found.points], dtype=np.float64)
    exact32 = np.all(values.astype(np.float32) == values, where=np.isfinite(values))
    single = np.float32 if bool(exact32) else np.float64
    head = {
        "buckets": buckets,
        "low": found.lo,
        "high": found.hi,
        "exact": found.exact,
        "points": found.total,
        "dx": np.diff(steps, prepend=0).tolist(),
        "f32": single is np.float32,
        "y64": base64.b64encode(values.astype(np.dtype(single).newbyteorder("<")).tobytes()).decode(
            "ascii"
        ),
    }
    return _json(head)


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
