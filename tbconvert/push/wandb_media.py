"""Images, texts and histograms as W&B's own objects, one per series and step.

- An image series' step is a list of ``wandb.Image`` (every image of the value written last
  at that step, in order), decoded from the stored bytes.
- A text series' step is a ``wandb.Table`` with the columns ``index`` and ``text`` (the
  elements of the value written last at that step).
- A histogram series' step is a ``wandb.Histogram`` of the stored buckets (their left edges
  and the last right edge; over W&B's 512 buckets, adjacent ones are summed).

Audio and other tensors stay in the store (and in ``push mlflow``'s artifacts).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from typing import Any

from tbconvert.push.state import Point

_BLOB = "JOIN blobs AS b ON b.id = p.blob_id"
# point table -> (plugin of its series, columns after step and wall time, joins)
TABLES: dict[str, tuple[str, str, str]] = {
    "images": ("images", "p.idx, p.format, b.data", _BLOB),
    "texts": ("text", "p.idx, p.value", ""),
    "histograms": ("histograms", "p.count, p.min, p.max, p.buckets", ""),
}
MAX_BUCKETS = 512


def last_value_per_step(points: Sequence[Point]) -> dict[int, list[Point]]:
    """Per step, the elements of the value written last at it (a value of an image or text
    series may hold several, told apart by their ``idx``, the first field of ``value``)."""
    written = sorted(points, key=lambda p: (p.file_path, p.record_offset, p.value_index))
    chosen: dict[int, list[Point]] = {}
    for point in written:
        found = chosen.get(point.step)
        where = (point.file_path, point.record_offset, point.value_index)
        if found and (found[0].file_path, found[0].record_offset, found[0].value_index) == where:
            found.append(point)
        else:
            chosen[point.step] = [point]
    return {step: sorted(found, key=lambda p: p.value[0]) for step, found in chosen.items()}


def media_object(table: str, elements: Sequence[Point]) -> Any:
    """The W&B object of one series' step (see the module's rule)."""
    import numpy as np
    import wandb

    if table == "images":
        from PIL import Image

        return [wandb.Image(Image.open(io.BytesIO(bytes(p.value[2])))) for p in elements]
    if table == "texts":
        return wandb.Table(columns=["index", "text"], data=[list(p.value) for p in elements])
    _count, low, high, buckets = elements[-1].value
    counts, edges = histogram_bins(json.loads(buckets), low, high)
    return wandb.Histogram(np_histogram=(np.array(counts), np.array(edges)))


def histogram_bins(
    buckets: list[list[float]], low: float | None, high: float | None
) -> tuple[list[float], list[float]]:
    """Counts and edges (one more) of stored buckets ``[[left, right, count], ...]``."""
    if not buckets:
        low = 0.0 if low is None or not math.isfinite(low) else low
        high = low if high is None or not math.isfinite(high) else high
        return [0.0], [low, high]
    merge = math.ceil(len(buckets) / MAX_BUCKETS)
    groups = [buckets[start : start + merge] for start in range(0, len(buckets), merge)]
    counts = [float(sum(bucket[2] for bucket in group)) for group in groups]
    edges = [float(group[0][0]) for group in groups] + [float(groups[-1][-1][1])]
    return counts, edges
