"""The lines of a published bundle: each scalar series at a few levels of detail, with the
wall time of every point kept, so that the page draws by step, relative time or wall time.

The coarsest level cuts a line's whole step range into a number of buckets (each keeping its
first, last, lowest and highest point, and its NaN, as ``serve`` does, by
:mod:`tbconvert.query.thinning`), each further level into ``FACTOR`` times more, until a level
holds every point: zoom stays exact down to the finest level's buckets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from tbconvert.output.viewer import bundle_encoding as encoding
from tbconvert.output.viewer.defaults import FACTOR
from tbconvert.query import thinning

if TYPE_CHECKING:
    from tbconvert.output.viewer.bundle_files import Budget
    from tbconvert.query.results import SeriesRef
    from tbconvert.query.store import Store

# Lines thinned in one statement: a chart's worth, so that the database sorts no more at once.
LINES_PER_STATEMENT = 100
# What a thinned point and a line's own fields take in a data file, measured on the benchmark's
# store (benchmarks/viewer.py): a step difference, a base64 float32 and a base64 wall-time
# difference are about 19 bytes.
POINT_BYTES = 19
LINE_BYTES = 230
MIN_BUCKETS = 8
_STARTS_SQL = (
    "SELECT series_id, first_wall_time FROM series_summaries WHERE point_table = 'scalars'"
)


class Lines:
    """The chosen scalar series' levels, coarsest first, as JSON text, added level by
    level within a budget."""

    def __init__(
        self, store: Store, chosen: Sequence[SeriesRef], step: Callable[[int], Any] | None
    ) -> None:
        self.store = store
        self.chosen = chosen
        self.step = step
        self.encoded: list[list[str]] = [[] for _ in chosen]
        self.points = [0] * len(chosen)
        self.pending = list(range(len(chosen)))
        self.per_point = 0.0
        self.buckets = 0
        with store.connect() as conn:
            starts = {row[0]: row[1] for row in conn.execute(text(_STARTS_SQL))}
        # Relative time is since the series' first point, as serve's answer counts it.
        self.starts = [starts.get(series.id) for series in chosen]

    @property
    def finest(self) -> int:
        """The finest level's buckets per line; 0 when every line is whole."""
        return self.buckets if self.pending else 0

    def coarsest(self, buckets: int, budget: Budget) -> None:
        """Write the coarsest level, always: ``buckets``, or fewer when that many would not
        fit (``POINT_BYTES`` a point, ``LINE_BYTES`` a line), but never under
        ``MIN_BUCKETS``."""
        fits = (budget.left / max(len(self.chosen), 1) - LINE_BYTES) / (4 * POINT_BYTES)
        budget.left -= self._level(max(MIN_BUCKETS, min(buckets, int(fits))))

    def finer(self, levels: int, budget: Budget) -> None:
        """Add levels, up to ``levels`` in all, to every line not yet whole while the estimate
        of a level's size (each line's points up to four per bucket, at the bytes a point
        took in the level before) fits the budget."""
        for _level in range(1, levels):
            count = self.buckets * FACTOR
            kept = sum(min(self.points[i], 4 * count) for i in self.pending)
            if not self.pending or kept * self.per_point > budget.left:
                return
            budget.left -= self._level(count)

    def by_tag(self) -> dict[str, str]:
        """Each tag's lines as the JSON text of its data file."""
        lines: dict[str, list[str]] = {}
        for index, series in enumerate(self.chosen):
            owner = encoding.to_json(
                {
                    "run_id": series.run_id,
                    "run": series.run_path,
                    "context": series.context,
                    "start": self.starts[index],
                }
            )
            levels = ",".join(self.encoded[index])
            lines.setdefault(series.tag, []).append(f'{owner[:-1]},"levels":[{levels}]}}')
        return {tag: '{"lines":[' + ",".join(found) + "]}" for tag, found in lines.items()}

    def _level(self, count: int) -> int:
        """Add a level of ``count`` buckets to every line not yet whole; its bytes."""
        written = kept = 0
        with self.store.connect() as conn:
            for start in range(0, len(self.pending), LINES_PER_STATEMENT):
                batch = self.pending[start : start + LINES_PER_STATEMENT]
                ids = [self.chosen[i].id for i in batch]
                thinned = thinning.thin_many(conn, ids, count)
                for index in batch:
                    found = thinned[self.chosen[index].id]
                    level = _level_json(found, count)
                    self.encoded[index].append(level)
                    self.points[index] = found.total
                    written, kept = written + len(level), kept + len(found.points)
                if self.step is not None:
                    self.step(len(batch))
        self.per_point = written / max(kept, 1)
        self.buckets = count
        self.pending = [i for i in self.pending if '"exact":true' not in self.encoded[i][-1]]
        return written


def _level_json(found: thinning.Thinned, buckets: int) -> str:
    """One level: its points' steps as differences, values in base64 (NaN for a NaN) and
    wall times as milliseconds since the first (:mod:`bundle_encoding`)."""
    head = {
        "buckets": buckets,
        "low": found.lo,
        "high": found.hi,
        "exact": found.exact,
        "points": found.total,
        "dx": encoding.step_differences([point.step for point in found.points]),
        **encoding.floats([point.value for point in found.points]),
        **encoding.wall_times([point.wall_time for point in found.points]),
    }
    return encoding.to_json(head)
