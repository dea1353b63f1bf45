"""The viewer's media: images, audio, texts and histograms per series, as the page asks for
them (``serve`` only): the series, one series' points, and a blob's bytes.

A blob is served only with a content type from a fixed list (an image's or audio's), never
one the event file named freely, so no logged bytes are ever read by the browser as a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import text

from tbconvert.errors import UsageError
from tbconvert.query import lookups

if TYPE_CHECKING:
    from tbconvert.query.store import Store

PLUGINS = ("images", "audio", "text", "histograms")  # the text plugin's table is texts
IMAGE_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "jpg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
}
AUDIO_TYPES = ("audio/wav", "audio/x-wav", "audio/mpeg", "audio/ogg", "audio/flac", "audio/webm")
MAX_POINTS = 2000
_POINTS_SQL = {
    "images": "SELECT step, idx, blob_id, width, height, format FROM images WHERE series_id = :id "
    f"ORDER BY step, {lookups.WRITTEN}, idx",
    "audio": "SELECT step, idx, blob_id, sample_rate, content_type, label FROM audio "
    f"WHERE series_id = :id ORDER BY step, {lookups.WRITTEN}, idx",
    "text": f"SELECT step, idx, value FROM texts WHERE series_id = :id ORDER BY step, "
    f"{lookups.WRITTEN}, idx",
    "histograms": "SELECT step, buckets FROM histograms WHERE series_id = :id "
    f"ORDER BY step, {lookups.WRITTEN}",
}
_COLUMNS = {
    "images": ("step", "idx", "blob", "width", "height", "format"),
    "audio": ("step", "idx", "blob", "sample_rate", "content_type", "label"),
    "text": ("step", "idx", "value"),
    "histograms": ("step", "buckets"),
}


def media_series(store: Store, run_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The image, audio, text and histogram series of the chosen runs, sorted."""
    wanted = set(run_ids)
    with store.connect() as conn:
        found = lookups.series(conn, plugin=list(PLUGINS))
    return [
        {
            "id": series.id,
            "run_id": series.run_id,
            "run": series.run_path,
            "context": series.context,
            "tag": series.tag,
            "plugin": series.plugin,
        }
        for series in found
        if series.run_id in wanted
    ]


def media_points(store: Store, series_id: int) -> dict[str, Any]:
    """One series' points, by step (at most ``MAX_POINTS``, spread evenly over its steps).

    Returns:
        ``{"plugin", "points": [...]}``: images ``step, idx, blob, width, height, format``;
        audio ``step, idx, blob, sample_rate, content_type, label``; text ``step, idx,
        value``; histograms ``step, buckets`` (``[[left, right, count], ...]``).

    Raises:
        UsageError: no such series of those plugins.
    """
    plugin = _plugin_of(store, series_id)
    with store.connect() as conn:
        rows = conn.execute(text(_POINTS_SQL[plugin]), {"id": series_id}).all()
    if len(rows) > MAX_POINTS:
        stride = len(rows) / MAX_POINTS
        rows = [rows[int(index * stride)] for index in range(MAX_POINTS)]
    points = [dict(zip(_COLUMNS[plugin], row, strict=True)) for row in rows]
    if plugin == "histograms":
        for point in points:
            point["buckets"] = orjson.loads(point["buckets"])
    return {"plugin": plugin, "points": points}


def blob(store: Store, series_id: int, blob_id: int) -> tuple[bytes, str]:
    """The bytes of an image or audio clip of a series, with the content type to serve.

    Raises:
        UsageError: the blob is not one of that series' images or clips.
    """
    plugin = _plugin_of(store, series_id)
    if plugin not in ("images", "audio"):
        raise UsageError(f"series {series_id} holds no blobs")
    kind = "format" if plugin == "images" else "content_type"
    sql = (
        f"SELECT b.data, p.{kind} FROM {plugin} AS p JOIN blobs AS b ON b.id = p.blob_id "
        "WHERE p.series_id = :series AND p.blob_id = :blob"
    )
    with store.connect() as conn:
        row = conn.execute(text(sql), {"series": series_id, "blob": blob_id}).first()
    if row is None:
        raise UsageError(f"no blob {blob_id} in series {series_id}")
    data, named = bytes(row[0]), str(row[1] or "").lower()
    if plugin == "images":
        return data, IMAGE_TYPES.get(named, "application/octet-stream")
    return data, named if named in AUDIO_TYPES else "application/octet-stream"


def _plugin_of(store: Store, series_id: int) -> str:
    with store.connect() as conn:
        row = conn.execute(
            text("SELECT plugin FROM series WHERE id = :id"), {"id": series_id}
        ).first()
    if row is None or row[0] not in PLUGINS:
        raise UsageError(f"no image, audio, text or histogram series {series_id}")
    return str(row[0])
