"""Images, audio, texts, histograms and other tensors as MLflow artifacts.

Paths (docs/cli.md), with ``KEY`` the series' metric key (:mod:`tbconvert.push.keys`):

- ``images/KEY/step=S,file=F,offset=O,value=V,idx=I.EXT`` and ``audio/KEY/...`` the same: one
  file per image or clip, its bytes as stored; ``S`` its step, ``F``, ``O``, ``V`` where it was
  read (file id, record offset, value index), ``I`` its place among the value's images.
- ``texts/KEY/@points.jsonl``, ``histograms/KEY/@points.jsonl``: one file per series, a JSON
  line per point in step order (the columns of ``v_texts`` and ``v_histograms``).
- ``tensors/KEY/@PLUGIN.jsonl``: one file per series of any other plugin (hparams excepted:
  those are the params), the tensor's bytes in base64.  ``PLUGIN`` is percent-encoded.

No key holds ``=``, ``@`` or ``,``: a series' files never meet another series' directory.
A file is written whole and uploaded again when its series has new points (an upload is an
overwrite), so a push killed meanwhile leaves nothing to reconcile; marks move after upload.
"""

from __future__ import annotations

import base64
import json
import tempfile
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from tbconvert.push.keys import metric_key
from tbconvert.push.source import SeriesRow
from tbconvert.push.state import Point, last_of_each_file, new_points, save_marks

_BLOB = "JOIN blobs AS b ON b.id = p.blob_id"
# point table -> (columns after step and wall time, joins, one file per point)
_TABLES: dict[str, tuple[str, str, bool]] = {
    "images": ("p.idx, p.format, b.data", _BLOB, True),
    "audio": ("p.idx, p.content_type, b.data", _BLOB, True),
    "texts": ("p.idx, p.value", "", False),
    "histograms": ("p.count, p.min, p.max, p.buckets", "", False),
    "tensors": ("p.dtype, p.shape, b.data", _BLOB, False),
}
_FIELDS = {
    "texts": ("idx", "value"),
    "histograms": ("count", "min", "max", "buckets"),
    "tensors": ("dtype", "shape", "data_base64"),
}
_EXTENSIONS = {"audio/wav": "wav", "audio/x-wav": "wav", "jpeg": "jpg"}


def push_artifacts(
    engine: Engine,
    where: str,
    series: Sequence[SeriesRow],
    upload: Callable[[Path], None],
) -> int:
    """Write the new artifacts of one run's ``series`` under a temporary directory, hand it
    to ``upload`` (which logs the whole tree), then mark their points; returns the files."""
    chosen = [s for s in series if s.plugin not in ("scalars", "hparams")]
    with tempfile.TemporaryDirectory(prefix="tbconvert-push-") as folder:
        root = Path(folder)
        files = 0
        marked: list[tuple[str, list[Point]]] = []
        with engine.connect() as conn:
            for table, (columns, joins, per_point) in _TABLES.items():
                for one in chosen:
                    found = new_points(conn, where, table, columns, [one.id], joins=joins)
                    fresh = [point for point, _ in found]
                    if not fresh:
                        continue
                    if per_point:
                        files += _write_points(root, table, one, fresh)
                    else:
                        # The whole series, written again.
                        every = new_points(
                            conn, where, table, columns, [one.id], covered=True, joins=joins
                        )
                        _write_series(root, table, one, [point for point, _ in every])
                        files += 1
                    marked.append((table, fresh))
        if not files:
            return 0
        upload(root)
    with engine.begin() as conn:
        for table, points in marked:
            save_marks(conn, where, table, last_of_each_file(points))
    return files


def _write_points(root: Path, table: str, series: SeriesRow, points: list[Point]) -> int:
    folder = root / table / metric_key(series.context, series.tag)
    folder.mkdir(parents=True, exist_ok=True)
    for point in points:
        idx, kind, data = point.value
        extension = _EXTENSIONS.get((kind or "").lower(), (kind or "bin").lower())
        name = (
            f"step={point.step},file={point.file_id},offset={point.record_offset},"
            f"value={point.value_index},idx={idx}.{extension}"
        )
        (folder / name).write_bytes(bytes(data))
    return len(points)


def _write_series(root: Path, table: str, series: SeriesRow, points: list[Point]) -> None:
    key = metric_key(series.context, series.tag)
    if table == "tensors":
        path = root / table / key / f"@{urllib.parse.quote(series.plugin, safe='')}.jsonl"
    else:
        path = root / table / key / "@points.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    # A text's elements (idx) in order within their record.
    ordered = sorted(
        points,
        key=lambda p: (p.step, p.file_id, p.record_offset, p.value_index, p.value[0]),
    )
    with path.open("w", encoding="utf-8") as out:
        for point in ordered:
            values: list[Any] = list(point.value)
            if table == "tensors":
                values[2] = base64.b64encode(bytes(values[2])).decode("ascii")
            line = {"step": point.step, "wall_time": point.wall_time}
            line.update(zip(_FIELDS[table], values, strict=True))
            out.write(json.dumps(line, allow_nan=True) + "\n")
