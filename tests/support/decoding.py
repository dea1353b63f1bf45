"""An event file decoded by ``EventDecoder`` through either path: record by record (the
general path, protobuf) or in whole Blocks (the block path, ``reading/fast/``), with every
row, series, metadata and statistic it makes, for the tests that hold one path to the other.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path
from typing import Any

from tbconvert.filters import Selection
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.records import RecordReader, open_event_file
from tbconvert.rows import remap_to_store_ids


def exact(value: Any) -> Any:
    """Floats by their bits (NaN payloads and signed zeros included)."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, tuple):
        return tuple(exact(item) for item in value)
    return value


def decode_file(
    path: Path,
    *,
    whole: bool,
    selection: Selection | None = None,
    seeds: dict[str, Any] | None = None,
    size: int = 100,
) -> tuple[dict[str, Any], int]:
    """Everything an EventDecoder makes of a file, and how many records its general path
    decoded."""
    decoder = EventDecoder(selection or Selection(), seeds or {})
    general = 0
    feed_records = decoder.feed_records

    def counted(batch: list[tuple[int, bytes]], **options: Any) -> None:
        nonlocal general
        general += len(batch)
        feed_records(batch, **options)

    decoder.feed_records = counted  # type: ignore[method-assign]
    rows: dict[str, list[Any]] = {}
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        for item in reader.blocks(size) if whole else reader.record_lists(size):
            decoder.feed(item)
            taken, _ = decoder.take()  # as reading.chunks does after each chunk
            for table, table_rows in taken.items():
                # As a --jobs worker sends them; iterated twice, as a retried chunk is.
                again = pickle.loads(pickle.dumps(table_rows))
                assert len(table_rows) == len(again)
                assert [exact(row) for row in again] == [exact(row) for row in table_rows]
                rows.setdefault(table, []).extend(exact(row) for row in table_rows)
                # The writer's remap to store ids, whatever form the rows took.
                store_ids = [1000 + 7 * number for number in range(len(decoder.definitions))]
                remapped = remap_to_store_ids(table_rows, store_ids, 42)
                assert [exact(row) for row in remapped] == [
                    exact((store_ids[row[0]], row[1], 42, *row[3:])) for row in table_rows
                ]
    stats = decoder.stats
    return {
        "rows": rows,
        "series": [tuple(definition[1:]) for definition in decoder.definitions],
        "metadata": {tag: m.SerializeToString() for tag, m in decoder.metadata().items()},
        "stats": (
            dict(stats.points),
            dict(stats.skipped),
            dict(stats.undecodable),
            stats.filtered_values,
            dict(stats.other_events),
            stats.lossy_records,
            stats.unparseable,
            exact(stats.first_wall_time),
            exact(stats.last_wall_time),
        ),
        "reader": (reader.consumed, reader.records, reader.damage, reader.torn),
    }, general
