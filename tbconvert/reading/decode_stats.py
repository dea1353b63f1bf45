"""What decoding one event file saw besides the rows it made: counts and the wall-time span."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class DecodeStats:
    """What one decoder saw besides the rows it produced."""

    points: Counter[str] = field(default_factory=Counter)
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)  # (plugin, tag) -> values
    undecodable: Counter[tuple[str, str]] = field(default_factory=Counter)
    filtered_values: int = 0
    other_events: Counter[str] = field(default_factory=Counter)
    lossy_records: int = 0
    unparseable: list[int] = field(default_factory=list)  # record offsets
    first_wall_time: float | None = None
    last_wall_time: float | None = None

    def widen_span(self, low: float, high: float) -> None:
        """Extend the file's wall-time span to cover ``[low, high]``."""
        if self.first_wall_time is None or low < self.first_wall_time:
            self.first_wall_time = low
        if self.last_wall_time is None or high > self.last_wall_time:
            self.last_wall_time = high
