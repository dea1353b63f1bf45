"""The images, audio, texts and histograms of a published bundle: per series, its points as
``serve`` answers them (:func:`tbconvert.output.viewer.media.media_points`, at most
``MAX_POINTS`` spread over its steps) in a data file, and each image or clip as a file beside
the page holding the bytes the store keeps, as logged.

A blob's file is named by its id and an extension from a fixed list (an image's format, an
audio content type), never by anything the event file named, so no logged bytes are ever
opened as a page.  A series whose files would pass the budget is left out whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from tbconvert.filters import Globs, globs, matches
from tbconvert.output.viewer import bundle_encoding as encoding
from tbconvert.output.viewer import media

if TYPE_CHECKING:
    from tbconvert.output.viewer.bundle_files import Budget, BundleWriter
    from tbconvert.query.store import Store

AUDIO_EXTENSIONS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "audio/flac": "flac",
    "audio/webm": "webm",
}
IMAGE_EXTENSIONS = {name: "jpg" if name == "jpeg" else name for name in media.IMAGE_TYPES}
_BLOB_SQL = "SELECT data FROM blobs WHERE id = :id"


def chosen_media(store: Store, run_ids: Sequence[int], tag: Globs) -> list[dict[str, Any]]:
    """The image, audio, text and histogram series of the runs, whose tag matches ``tag``."""
    patterns = globs(tag)
    return [
        series
        for series in media.media_series(store, run_ids)
        if matches(series["tag"], patterns, series["tag"].removesuffix("/text_summary"))
    ]


def write_media(
    store: Store,
    chosen: Sequence[dict[str, Any]],
    written: BundleWriter,
    budget: Budget,
    step: Callable[[int], Any] | None = None,
) -> list[dict[str, Any]]:
    """Write each series that fits the budget (its data file and its blobs' files); the
    series written, each with the name of its data file (``file``)."""
    kept = []
    for series in chosen:
        answer = media.media_points(store, series["id"])
        blobs = _blob_files(store, answer["plugin"], answer["points"])
        name = f"media-{series['id']}.js"
        content = encoding.script(name, encoding.to_json(answer))
        entry = {**series, "file": name}
        size = len(content.encode("utf-8")) + sum(len(data) for data in blobs.values())
        size += len(encoding.to_json(entry))  # its line in data/overview.js
        label = f"{series['tag']} ({series['plugin']}) of {series['run']}"
        if budget.take(size, "media", label):
            written.text(f"data/{name}", content)
            for path, data in blobs.items():
                written.write(path, data)
            kept.append(entry)
        if step is not None:
            step(1)
    return kept


def _blob_files(store: Store, plugin: str, points: list[dict[str, Any]]) -> dict[str, bytes]:
    """Each image's or clip's file under ``media/``, its path set on its point (``file``)."""
    if plugin not in ("images", "audio"):
        return {}
    files: dict[str, bytes] = {}
    with store.connect() as conn:
        for point in points:
            if plugin == "images":
                extension = IMAGE_EXTENSIONS.get(str(point["format"] or "").lower(), "bin")
            else:
                extension = AUDIO_EXTENSIONS.get(str(point["content_type"] or "").lower(), "bin")
            path = f"media/{point['blob']}.{extension}"
            point["file"] = path
            if path not in files:
                row = conn.execute(text(_BLOB_SQL), {"id": point["blob"]}).one()
                files[path] = bytes(row[0])
    return files
