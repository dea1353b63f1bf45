"""``tbconvert publish``: the viewer as static files that open from ``file://`` or any static
host (an object store, GitHub Pages), with no server and no network.

A page opened from ``file://`` may not fetch, so the data are JavaScript files the page loads
with ``<script>`` tags (``static/published.js``): ``data/overview.js`` (the runs table, and
what else the bundle holds), a file per tag holding each of its lines at a few levels of
detail with their wall times (:mod:`bundle_lines`), a file per tag of its groups' statistics
(:mod:`bundle_groups`), and a file per image, audio, text or histogram series, with the images
and clips as files beside them (:mod:`bundle_media`).  Written through fsspec, so ``-o`` may
be a URL.

``--max-size`` is spent in this order: the page, plotly.js and the runs table; the coarsest
level of every line (always written); the groups, tag by tag; the media, series by series;
then finer levels of the lines.  What does not fit is left out whole and named in
:attr:`Published.left_out`, which the page shows too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tbconvert.errors import UsageError
from tbconvert.filters import Globs
from tbconvert.output.viewer import bundle_encoding as encoding
from tbconvert.output.viewer import data
from tbconvert.output.viewer.app import STATIC, index_html, plotly_js
from tbconvert.output.viewer.bundle_files import Budget, BundleWriter
from tbconvert.output.viewer.bundle_groups import grouping_json, groups_by_tag
from tbconvert.output.viewer.bundle_lines import Lines
from tbconvert.output.viewer.bundle_media import chosen_media, write_media
from tbconvert.output.viewer.defaults import DEFAULT_BUCKETS, DEFAULT_LEVELS, DEFAULT_MAX_BYTES
from tbconvert.query import lookups

if TYPE_CHECKING:
    from tbconvert.query.groups import Grouping
    from tbconvert.query.store import Store

STATIC_FILES = ("viewer.js", "media.js", "viewer.css", "published.js")
PAGE_SCRIPTS = (
    '<script src="static/published.js"></script>\n<script src="data/overview.js"></script>'
)


@dataclass(frozen=True)
class Published:
    """What a publish wrote: files and their bytes, runs, scalar tags and lines, the seconds,
    the finest level's buckets per line (0: every line whole, every point in), the tags
    with groups, the media series, and what the budget left out (``groups``: tags,
    ``media``: series)."""

    files: int
    bytes: int
    runs: int
    tags: int
    series: int
    seconds: float
    finest: int
    grouped_tags: int = 0
    media: int = 0
    left_out: dict[str, list[str]] = field(default_factory=dict)


def publish(
    store: Store,
    target: str,
    run: Globs = None,
    tag: Globs = None,
    *,
    grouping: Grouping | None = None,
    buckets: int = DEFAULT_BUCKETS,
    levels: int = DEFAULT_LEVELS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    storage_options: dict[str, Any] | None = None,
    step: Callable[[int], Any] | None = None,
) -> Published:
    """Write the viewer over the chosen runs and tags (scalars, images, audio, texts and
    histograms) under ``target``.

    Args:
        store: The store.
        target: A directory or an fsspec URL (created; files there are overwritten).
        run, tag: Globs choosing the runs and the tags.
        grouping: The groups whose mean and bands the bundle carries (None: no groups).
        buckets: The coarsest level's buckets over a line's whole step range.
        levels: How many levels at most, each ``FACTOR`` times finer.
        max_bytes: The bundle's size, page and plotly.js included, that groups, media and
            finer levels are left out rather than exceed (the coarsest level is always
            written).
        storage_options: fsspec options of a URL target.
        step: Called with the number of series done, as they are.

    Raises:
        UsageError: no series matches, or a level count or bucket count under 1.
    """
    import fsspec

    if buckets < 1 or levels < 1:
        raise UsageError("--buckets and --levels must be 1 or more")
    started = time.monotonic()
    plotly = plotly_js("ui")
    fs, root = fsspec.core.url_to_fs(os.path.expanduser(target), **(storage_options or {}))
    written = BundleWriter(fs, root.rstrip("/"))
    statics = [(str(STATIC / name), f"static/{name}") for name in STATIC_FILES]
    statics.append((str(plotly), "static/plotly.min.js"))
    with store.snapshot():
        overview = data.overview(store, [run] if isinstance(run, str) else list(run or ()))
        with store.connect() as conn:
            chosen = lookups.series(conn, run, tag, plugin="scalars")
        media = chosen_media(store, [entry["id"] for entry in overview["runs"]], tag)
        if not chosen and not media:
            raise UsageError("no series matches", path=store.display, hint="check --run, --tag")
        tags = sorted({series.tag for series in chosen})
        files = {name: f"tag-{index:04d}.js" for index, name in enumerate(tags)}
        overview["tags"] = tags
        overview.update(datasette=False, groups=False)
        document: dict[str, Any] = {"overview": overview, "files": files}
        fixed = len(encoding.to_json(document)) + sum(os.path.getsize(s) for s, _ in statics)
        budget = Budget(max_bytes - fixed)
        lines = Lines(store, chosen, step)
        lines.coarsest(buckets, budget)
        document["groups"] = {"grouping": grouping_json(grouping), "files": {}}
        if grouping is not None:
            document["groups"]["files"] = _write_groups(
                store, grouping, chosen, run, written, budget, step
            )
        document["media"] = write_media(store, media, written, budget, step)
        lines.finer(levels, budget)
    for name, payload in lines.by_tag().items():
        written.text(f"data/{files[name]}", encoding.script(files[name], payload))
    document["left_out"] = budget.left_out
    written.text("data/overview.js", f"TBV.published = {encoding.to_json(document)};")
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
        lines.finest,
        len(document["groups"]["files"]),
        len(document["media"]),
        budget.left_out,
    )


def _write_groups(
    store: Store,
    grouping: Grouping,
    chosen: Any,
    run: Globs,
    written: BundleWriter,
    budget: Budget,
    step: Callable[[int], Any] | None,
) -> dict[str, str]:
    """Write each tag's groups that fit the budget; the data file of each tag written."""
    files = {}
    for index, (tag, payload) in enumerate(groups_by_tag(store, grouping, chosen, run, step)):
        name = f"groups-{index:04d}.js"
        content = encoding.script(name, payload)
        if budget.take(len(content.encode("utf-8")), "groups", tag):
            written.text(f"data/{name}", content)
            files[tag] = name
    return files
