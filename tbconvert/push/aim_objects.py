"""Images, audio, texts and histograms into Aim's own objects, each at its step and wall time.

A record's images (or clips, or texts) go as one Aim point at its step, a list when the record
holds several; a histogram as an ``aim.Distribution`` of its buckets' counts over their range
(Aim's bins are of equal width: TensorBoard's bucket edges are not kept, their counts are).
Aim keeps one object per step, the last written: a step logged again replaces it.

The points are sent through Aim's tracker with their wall time (its private ``_track``, the
call ``Run.track`` makes with the time of the call); the marks move a record at a time once
Aim holds it, so a push killed meanwhile sends the rest again, which replaces what Aim holds
at those steps with the same objects.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.push.aim_metrics import aim_context
from tbconvert.push.metrics import Marks, send_points
from tbconvert.push.source import SeriesRow
from tbconvert.push.state import Point, new_points

_BLOB = "JOIN blobs AS b ON b.id = p.blob_id"
# point table -> (plugin, columns, joins); a row's first column orders a record's elements.
_TABLES: dict[str, tuple[str, str, str]] = {
    "images": ("images", "p.idx, p.format, b.data", _BLOB),
    "audio": ("audio", "p.idx, p.content_type, b.data, p.sample_rate", _BLOB),
    "texts": ("text", "p.idx, p.value", ""),
    "histograms": ("histograms", "0, p.count, p.min, p.max, p.buckets", ""),
}


def push_objects(
    engine: Engine,
    where: str,
    run: Any,
    series: Sequence[SeriesRow],
    *,
    batch_size: int,
) -> int:
    """Send the new images, audio, texts and histograms of a run's ``series`` into the open
    Aim run ``run``; returns how many Aim points (records) were sent."""
    import aim

    makers: dict[str, Callable[[tuple[Any, ...]], Any]] = {
        "images": lambda row: _image(aim, row),
        "audio": lambda row: _audio(aim, row),
        "texts": lambda row: aim.Text(row[1]),
        "histograms": lambda row: _distribution(aim, row),
    }
    sent = 0
    for table, (plugin, columns, joins) in _TABLES.items():
        chosen = {one.id: one for one in series if one.plugin == plugin}
        with engine.connect() as conn:
            found = new_points(conn, where, table, columns, list(chosen), joins=joins)
        records = _records([point for point, _ in found])
        send = _sender(run, chosen, makers[table])
        marks = Marks(engine, where, records, [False] * len(records), point_table=table)
        sent += send_points(marks, send, batch_size)
    return sent


def _sender(
    run: Any, chosen: dict[int, SeriesRow], make: Callable[[tuple[Any, ...]], Any]
) -> Callable[[list[Point]], None]:
    """What sends a batch of records of one table into the Aim run ``run``."""

    def send(batch: list[Point]) -> None:
        for record in batch:
            one = chosen[record.series_id]
            objects = [make(row) for row in record.value]
            time = math.nan if record.wall_time is None else record.wall_time
            run._tracker._track(
                objects[0] if len(objects) == 1 else objects,
                time,
                one.tag,
                record.step,
                None,
                context=aim_context(one.context),
            )

    return send


def _records(rows: list[Point]) -> list[Point]:
    """The rows of one table grouped by record: one point per (series, file, offset, value
    index), its value the rows' values in element order."""
    grouped: dict[tuple[int, int, int, int], list[Point]] = {}
    for row in rows:
        key = (row.series_id, row.file_id, row.record_offset, row.value_index)
        grouped.setdefault(key, []).append(row)
    return [
        Point(
            first.series_id,
            first.file_id,
            first.file_path,
            first.file_digest,
            first.record_offset,
            first.value_index,
            first.step,
            first.wall_time,
            sorted((row.value for row in group), key=lambda value: value[0]),
        )
        for group in grouped.values()
        for first in group[:1]
    ]


def _image(aim: Any, row: tuple[Any, ...]) -> Any:
    from PIL import Image

    _, image_format, data = row
    return aim.Image(Image.open(io.BytesIO(bytes(data))), format=(image_format or "png").lower())


def _audio(aim: Any, row: tuple[Any, ...]) -> Any:
    _, content_type, data, sample_rate = row
    kind = (content_type or "audio/wav").rsplit("/", 1)[-1].lower()
    audio_format = "wav" if kind in ("wav", "x-wav", "wave") else kind
    rate = None if sample_rate is None else round(sample_rate)
    return aim.Audio(bytes(data), format=audio_format, rate=rate)


def _distribution(aim: Any, row: tuple[Any, ...]) -> Any:
    _, count, low, high, buckets = row
    edges = json.loads(buckets) if buckets else []
    if edges:
        counts = [float(bucket[2]) for bucket in edges]
        span = (float(edges[0][0]), float(edges[-1][1]))
    else:
        counts = [float(count or 0.0)]
        span = (float(low or 0.0), float(high or 0.0))
    return aim.Distribution(hist=counts, bin_range=span)
