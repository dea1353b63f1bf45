"""Records of one event file to store rows: the per-record hot path and the plugin dispatch.

Rows are keyed by where the value came from, ``(series_id, step, file_id, record_offset,
value_index, wall_time)``, followed by the plugin's payload columns.  ``simple_value`` scalars,
by far the most common record, take a fast path with no plugin call.
"""

from __future__ import annotations

import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from converter.events import Event, UnparseableEvent, parse_event
from converter.plugins import DECODERS, FALLBACK, Decoded, DecodeFailure, plugin_for

if TYPE_CHECKING:
    import numpy as np

    from converter.blocks import Block
    from converter.fastscalars import Parsed

_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")
_INF = float("inf")
# Smaller blocks cost less one record at a time than NumPy's fixed cost per call.
_BLOCK_MIN = 64

# Event-level payloads kept as raw tensors: event field -> (plugin, tag); tagged run metadata
# uses its own tag.
_GRAPH_EVENTS = {
    "graph_def": ("graphs", "__graph_def__"),
    "meta_graph_def": ("graphs", "__meta_graph_def__"),
    "tagged_run_metadata": ("graph_tagged_run_metadata", None),
}

# A table's rows: a list of tuples, or (scalars) a PackedRows, iterable and sized like one.
Rows = Any
# (tag, plugin, dtype, first metadata) -> series id
SeriesResolver = Callable[[str, str, "str | None", Any], int]


def with_store_ids(rows: Rows, series_ids: Sequence[int], file_id: int) -> Rows:
    """A table's rows as decoded (local series numbers, file id 0) in the store's ids."""
    if isinstance(rows, list):
        return [(series_ids[row[0]], row[1], file_id, *row[3:]) for row in rows]
    return rows.with_store_ids(series_ids, file_id)


@dataclass(frozen=True)
class Selection:
    """What to convert: plugin names (None = all) and tag globs to include and exclude."""

    plugins: frozenset[str] | None = None
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()

    def accepts_tag(self, tag: str) -> bool:
        """True when the tag passes the --tag and --exclude-tag globs."""
        if self.tags and not any(fnmatchcase(tag, glob) for glob in self.tags):
            return False
        return not any(fnmatchcase(tag, glob) for glob in self.exclude_tags)

    def accepts_plugin(self, plugin: str) -> bool:
        """True when the plugin is selected by --plugins ("tensors" selects the raw ones)."""
        if self.plugins is None or plugin in self.plugins:
            return True
        return plugin not in DECODERS and "tensors" in self.plugins


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


class FileDecoder:
    """Decode the records of one event file into rows for the store tables."""

    def __init__(self, file_id: int, resolve: SeriesResolver, selection: Selection) -> None:
        """Args: the file's store id, a series resolver bound to its (run, context), filters."""
        self.file_id = file_id
        self.selection = selection
        self.rows: defaultdict[str, Rows] = defaultdict(list)
        self.blobs: dict[str, bytes] = {}
        self.stats = DecodeStats()
        self._resolve = resolve
        self._metadata: dict[str, Any] = {}
        self._seed: dict[str, Any] = {}
        self._series: dict[tuple[str, str], int] = {}
        self._simple: dict[str, int] = {}
        self._float_tensors: dict[str, int] = {}
        self._tag_ok: dict[str, bool] = {}
        self._slow_scalar_rows = 0
        self._keys: Any = None  # fastscalars.ScalarKeys, made with the first block
        # Rows of the block path, packed: (position among the scalar rows, bytes).
        self._packed: list[tuple[int, bytes]] = []
        self._packed_rows = 0

    def seed_metadata(self, metadata: dict[str, Any]) -> None:
        """Metadata remembered from earlier reads of this (run, context), used for tags whose
        first occurrence in this file is not read now (resumed at an offset; TF1 writers
        send metadata only once per tag)."""
        self._seed = metadata

    def feed_all(self, records: Sequence[tuple[int, bytes]]) -> None:
        """Decode a batch of (offset, payload) records."""
        # The hot loop of the whole converter: locals only, one attribute read per field.
        file_id = self.file_id
        simple = self._simple
        float_tensors = self._float_tensors
        unpack_float = _FLOAT32.unpack
        scalars = self.rows["scalars"]
        append = scalars.append
        stats = self.stats
        from_string = Event.FromString
        inf = float("inf")
        first = inf if stats.first_wall_time is None else stats.first_wall_time
        last = -inf if stats.last_wall_time is None else stats.last_wall_time
        for offset, payload in records:
            try:
                event = from_string(payload)
            except DecodeError:
                event = self._parse_leniently(offset, payload)
                if event is None:
                    continue
            wall_time = event.wall_time
            # NaN compares false both ways: kept in rows, left out of the file's span.
            if wall_time > last:
                last = wall_time
            if wall_time < first:
                first = wall_time
            values = event.summary.value
            if not values:
                self._non_summary(event, offset)
                continue
            step = event.step
            for index, value in enumerate(values):
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    series_id = simple.get(value.tag)
                    if series_id is not None:
                        append((series_id, step, file_id, offset, index, wall_time,
                                value.simple_value))
                        continue
                elif kind == "tensor":
                    # TF2 scalars: a rank-0 DT_FLOAT in 4 bytes of tensor_content.
                    series_id = float_tensors.get(value.tag)
                    if series_id is not None:
                        tensor = value.tensor
                        content = tensor.tensor_content
                        if len(content) == 4 and tensor.dtype == 1:
                            append((series_id, step, file_id, offset, index, wall_time,
                                    unpack_float(content)[0]))
                            continue
                self._decode_value(value, kind, step, wall_time, offset, index)
        stats.first_wall_time = None if first == inf else first
        stats.last_wall_time = None if last == -inf else last

    def feed_block(self, block: Block) -> None:
        """Decode a block of verified records; single scalars of known keys skip protobuf.

        Rows come out in record order, exactly as :meth:`feed_all` makes them: a record takes
        the block path only when its key was learnt from a record that :meth:`feed_all`
        decoded through its own fast path, and the rest go through :meth:`feed_all`.
        """
        from converter import fastscalars

        parsed = fastscalars.parse(block) if len(block) >= _BLOCK_MIN else None
        if parsed is None or not parsed.ok.any():
            self.feed_all(block.pairs())
            return
        if self._keys is None:
            self._keys = fastscalars.ScalarKeys()
        series = self._keys.lookup(parsed)
        values = fastscalars.values(block, parsed)
        offsets = block.starts + block.base
        slow = _indices(series < 0, 0)
        unlearnt: set[int] = set()  # key hashes that failed to learn in this block
        waiting: list[tuple[int, bytes]] = []  # consecutive slow records, for one feed_all
        done = 0
        while slow:
            record = slow.pop()
            if record > done:
                self._flush(waiting)
                self._add_rows(series, parsed, offsets, values, done, record)
            waiting.append((int(offsets[record]), block.payload(record)))
            done = record + 1
            key = int(parsed.hashes[record])
            if parsed.ok[record] and key not in unlearnt:
                self._flush(waiting)
                series_id = self._learn(block, parsed, record)
                if series_id is None:
                    unlearnt.add(key)
                else:
                    self._keys.add(parsed, record, series_id)
                    series[self._keys.same_key(parsed, record, done)] = series_id
                    slow = _indices(series[done:] < 0, done)
        self._flush(waiting)
        self._add_rows(series, parsed, offsets, values, done, len(block))
        self._widen_span(parsed.wall_time[series >= 0])

    def _flush(self, waiting: list[tuple[int, bytes]]) -> None:
        if waiting:
            self.feed_all(waiting)
            waiting.clear()

    def _add_rows(self, series: np.ndarray, parsed: Parsed, offsets: np.ndarray,
                  values: np.ndarray, start: int, stop: int) -> None:
        """Append the rows of records ``start:stop``, all of known keys."""
        from converter import fastscalars

        if stop <= start:
            return
        table = fastscalars.pack_rows(series[start:stop], parsed.step[start:stop],
                                      offsets[start:stop], parsed.wall_time[start:stop],
                                      values[start:stop])
        self._packed.append((len(self.rows["scalars"]), table))
        self._packed_rows += stop - start

    def _learn(self, block: Block, parsed: Parsed, record: int) -> int | None:
        """The series of ``record``'s key if :meth:`feed_all` takes its fast path for it,
        which it then does for every record with the same key (same tag, kind, metadata)."""
        try:
            event = Event.FromString(block.payload(record))
        except DecodeError:
            return None
        values = event.summary.value
        at = int(parsed.value_at[record])
        number = block.buf[at : at + 4]
        # Protobuf must read the record exactly as the block path does.
        if (len(values) != 1 or event.step != int(parsed.step[record])
                or _FLOAT64.pack(event.wall_time) != parsed.wall_time[record].tobytes()):
            return None
        value = values[0]
        kind = value.WhichOneof("value")
        if parsed.simple[record]:
            same = kind == "simple_value" and (
                _FLOAT64.pack(value.simple_value) == _FLOAT64.pack(_FLOAT32.unpack(number)[0]))
            return self._simple.get(value.tag) if same else None
        tensor = value.tensor
        same = kind == "tensor" and tensor.dtype == 1 and tensor.tensor_content == number
        return self._float_tensors.get(value.tag) if same else None

    def _widen_span(self, wall_times: np.ndarray) -> None:
        """Extend the file's wall-time span as :meth:`feed_all` would (NaN left out)."""
        import numpy as np

        if not len(wall_times):
            return
        stats = self.stats
        low, high = float(np.fmin.reduce(wall_times)), float(np.fmax.reduce(wall_times))
        if low < (_INF if stats.first_wall_time is None else stats.first_wall_time):
            stats.first_wall_time = low
        if high > (-_INF if stats.last_wall_time is None else stats.last_wall_time):
            stats.last_wall_time = high

    def _parse_leniently(self, offset: int, payload: bytes) -> Any:
        try:
            event, lossy = parse_event(payload)
        except UnparseableEvent:
            self.stats.unparseable.append(offset)
            return None
        if lossy:
            self.stats.lossy_records += 1
        return event

    def _non_summary(self, event: Any, offset: int) -> None:
        what = event.WhichOneof("what") or "empty"
        if what in _GRAPH_EVENTS:
            self._decode_graph(event, what, offset)
        elif what != "summary":  # an empty summary is nothing to keep
            self.stats.other_events[what] += 1

    def take(self) -> tuple[dict[str, Rows], dict[str, bytes]]:
        """Hand over the rows (and blobs they point to) decoded so far; start afresh.

        The scalars of blocks come as a :class:`~converter.fastscalars.PackedRows`, which
        makes the row tuples as it is iterated; every other table is a list of tuples.
        """
        fast = len(self.rows.get("scalars", ())) - self._slow_scalar_rows + self._packed_rows
        if fast:
            self.stats.points["scalars"] += fast
        self._slow_scalar_rows = 0
        if self._packed:
            from converter.fastscalars import PackedRows

            self.rows["scalars"] = PackedRows(self.rows["scalars"], self._packed, self.file_id)
            self._packed, self._packed_rows = [], 0
        taken: dict[str, Rows] = {table: rows for table, rows in self.rows.items() if rows}
        self.rows = defaultdict(list)
        self.rows["scalars"] = []
        blobs, self.blobs = self.blobs, {}
        return taken, blobs

    def metadata(self) -> dict[str, Any]:
        """The first metadata of every tag seen in this file."""
        return dict(self._metadata)

    def pending(self) -> int:
        """Rows decoded and not yet taken."""
        return sum(len(rows) for rows in self.rows.values()) + self._packed_rows

    def _decode_value(
        self, value: Any, kind: str | None, step: int, wall_time: float, offset: int, index: int
    ) -> None:
        tag = value.tag or value.node_name
        own = value.metadata if value.HasField("metadata") else None
        if tag not in self._metadata and own is not None:
            self._metadata[tag] = own
        first = self._metadata.get(tag) or self._seed.get(tag)
        plugin = plugin_for(kind, first)
        if not self._admits(tag, plugin):
            return
        decoded = self._run_decoders(plugin, tag, value, own if own is not None else first)
        if decoded is not None:
            self._emit(tag, plugin, decoded, first, (step, self.file_id, offset, index, wall_time))
            # The fast paths key on value.tag, so a node_name fallback must not be cached.
            if plugin == "scalars" and value.tag:
                if kind == "simple_value":
                    self._simple[tag] = self._series[(tag, plugin)]
                elif decoded.dtype == "float32":
                    self._float_tensors[tag] = self._series[(tag, plugin)]

    def _run_decoders(self, plugin: str, tag: str, value: Any, metadata: Any) -> Decoded | None:
        decoder = DECODERS.get(plugin)
        failed = False
        if decoder is not None:
            try:
                return decoder(value, metadata)
            except DecodeFailure:
                failed = True
        try:
            kept = FALLBACK(value, metadata)
        except DecodeFailure:
            self.stats.skipped[(plugin, tag)] += 1
            return None
        if failed:
            # Kept raw, so nothing is lost, but the summary says its plugin could not read it.
            self.stats.undecodable[(plugin, tag)] += 1
        return kept

    def _emit(
        self, tag: str, plugin: str, decoded: Decoded, metadata: Any, where: tuple[Any, ...]
    ) -> None:
        series_id = self._series.get((tag, plugin))
        if series_id is None:
            series_id = self._resolve(tag, plugin, decoded.dtype, metadata)
            self._series[(tag, plugin)] = series_id
        key = (series_id, *where)
        self.rows[decoded.table].extend(key + row for row in decoded.rows)
        if decoded.blobs:
            self.blobs.update(decoded.blobs)
        if decoded.table == "scalars":
            self._slow_scalar_rows += len(decoded.rows)
        self.stats.points[plugin] += len(decoded.rows)

    def _decode_graph(self, event: Any, what: str, offset: int) -> None:
        from converter.plugins.tensors import raw_bytes

        plugin, tag = _GRAPH_EVENTS[what]
        if what == "tagged_run_metadata":
            tag, data = event.tagged_run_metadata.tag, event.tagged_run_metadata.run_metadata
        else:
            data = getattr(event, what)
        if not self._admits(tag, plugin):
            return
        decoded = raw_bytes(bytes(data), what)
        self._emit(tag, plugin, decoded, None, (event.step, self.file_id, offset, 0,
                                                event.wall_time))

    def _admits(self, tag: str, plugin: str) -> bool:
        """Apply --tag/--exclude-tag and --plugins, counting what they leave out."""
        if not self._accepts_tag(tag):
            self.stats.filtered_values += 1
            return False
        if not self.selection.accepts_plugin(plugin):
            self.stats.skipped[(plugin, tag)] += 1
            return False
        return True

    def _accepts_tag(self, tag: str) -> bool:
        accepted = self._tag_ok.get(tag)
        if accepted is None:
            accepted = self._tag_ok[tag] = self.selection.accepts_tag(tag)
        return accepted


def _indices(mask: np.ndarray, offset: int) -> list[int]:
    """Indices where ``mask`` holds, plus ``offset``, last first (popped in increasing order)."""
    import numpy as np

    return (np.flatnonzero(mask)[::-1] + offset).tolist()
