"""Records of one event file to rows: the protobuf path, the plugin dispatch and filters.

Rows follow ``tbconvert.rows``: local series numbers, file id 0.  Single scalars, the commonest
records, skip the plugin call here and protobuf in ``reading/fast/``, which learns from this path.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError
from tensorboard.compat.proto.summary_pb2 import Summary

from tbconvert.filters import Selection
from tbconvert.plugins._tensorproto import DT_FLOAT
from tbconvert.plugins.registry import (
    DECODERS,
    FALLBACK,
    Decoded,
    DecodeFailure,
    Decoder,
    plugin_for,
)
from tbconvert.reading import huge_images
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.events import Event, UnparseableEvent, parse_event
from tbconvert.reading.fast import KnownMetadata, template
from tbconvert.reading.row_buffer import RowBuffer
from tbconvert.rows import FileRows, SeriesDefinition

if TYPE_CHECKING:
    from tbconvert.reading.fast.block_scalars import BlockScalars
    from tbconvert.reading.fast.blocks import Block

_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")
# Smaller blocks cost less one record at a time than NumPy's fixed cost per call.
_BLOCK_MIN = 64

# Event-level payloads kept as raw tensors, serialized: event field -> (plugin, tag) as
# TensorBoard names them (tagged run metadata has its own tag), TF1 session logs (START, STOP,
# CHECKPOINT) and log messages included: only version headers and empty events are counted.
_RAW_EVENTS: dict[str, tuple[str, str | None]] = {
    "graph_def": ("graphs", "__run_graph__"),
    "meta_graph_def": ("graphs", "__meta_graph_def__"),
    "tagged_run_metadata": ("graph_tagged_run_metadata", None),
    "session_log": ("session_log", "__session_log__"),
    "log_message": ("log_message", "__log_message__"),
}

# What a Summary.Value's oneof may hold (None: nothing).
_KINDS = (None, *(field.name for field in Summary.Value.DESCRIPTOR.oneofs_by_name["value"].fields))
# How the values of one tag and kind are decoded: (plugin, its decoder or None, the tag's
# first metadata).
_Route = tuple[str, "Decoder | None", Any]


class EventDecoder:
    """Decode the records of one event file into rows and the series they belong to.

    Attributes:
        buffer: Rows decoded and not yet taken.
        definitions: Every series announced so far; a row's series is its index here.
        stats: Counts and the file's wall-time span.
    """

    def __init__(
        self,
        selection: Selection,
        known_metadata: KnownMetadata | None = None,
        *,
        by_record: bool = False,
    ) -> None:
        """Args: what to keep; the metadata remembered for tags of this (run, context) from
        earlier files or reads, for tags first met here in what is not read now (TF1 writers
        send it once per tag); ``by_record``: decode every record on its own, never a block
        at once (for a few hundred records, learning each key costs more than it saves)."""
        self.selection = selection
        self.buffer = RowBuffer()
        self.definitions: list[SeriesDefinition] = []
        self.stats = DecodeStats()
        self._known = known_metadata or {}
        self._metadata: KnownMetadata = {}
        self._series: dict[tuple[str, str], int] = {}
        # Tags whose values the fast paths append directly: tag -> series number.
        self.simple_series: dict[str, int] = {}
        self.float_tensor_series: dict[str, int] = {}
        self._tag_ok: dict[str, bool] = {}
        # (tag, kind) -> how its values are decoded (see _route).
        self._routes: dict[tuple[str, str | None], _Route] = {}
        self._blocks: BlockScalars | None = None
        self._by_record = by_record

    def feed(self, batch: Block | list[tuple[int, bytes]]) -> None:
        """Decode a batch of records: (offset, payload) pairs, or a verified block."""
        if isinstance(batch, list):
            if len(batch) != 1 or not huge_images.feed(self, *batch[0]):
                self.feed_records(batch)
        elif self._by_record or len(batch) < _BLOCK_MIN:
            self.feed_records(batch.pairs())
        else:
            if self._blocks is None:
                from tbconvert.reading.fast.block_scalars import BlockScalars

                self._blocks = BlockScalars(self)
            self._blocks.feed(batch)

    def feed_records(self, records: Sequence[tuple[int, bytes]], *, keyed: bool = True) -> None:
        """Decode (offset, payload) records one by one; unless ``keyed`` (the block path's
        records, whose keys it knows itself), single-scalar records are recognised and
        learnt by their bytes (``fast.template``)."""
        # The hot loop of the whole converter: locals only, one attribute read per field.
        simple = self.simple_series
        float_tensors = self.float_tensor_series
        unpack_float = _FLOAT32.unpack
        float_at = _FLOAT32.unpack_from
        double_at = _FLOAT64.unpack_from
        append = self.buffer.table("scalars").append
        stats = self.stats
        from_string = Event.FromString
        known_keys = template.KNOWN
        split = template.split
        learn = template.learn
        inf = float("inf")
        first = inf if stats.first_wall_time is None else stats.first_wall_time
        last = -inf if stats.last_wall_time is None else stats.last_wall_time
        for offset, payload in records:
            parts = split(payload) if keyed else None
            if parts is not None:
                known = known_keys.get(parts[0])
                if known is not None:
                    series = (simple if known[1] else float_tensors).get(known[0])
                    if series is not None:
                        wall_time = double_at(payload, 1)[0]
                        if wall_time > last:
                            last = wall_time
                        if wall_time < first:
                            first = wall_time
                        value = float_at(payload, parts[2])[0]
                        append((series, parts[1], 0, offset, 0, wall_time, value))
                        continue
                    parts = None  # known: nothing to learn from this record
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
            values = event.summary.value[:]  # a list: see _tensorproto.shape_of
            if not values:
                self._non_summary(event, offset)
                continue
            step = event.step
            for index, value in enumerate(values):
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    series = simple.get(value.tag)
                    if series is not None:
                        append((series, step, 0, offset, index, wall_time, value.simple_value))
                        if parts is not None:
                            learn(parts, payload, True)
                        continue
                elif kind == "tensor":
                    # TF2 scalars: a rank-0 DT_FLOAT in 4 bytes of tensor_content.
                    series = float_tensors.get(value.tag)
                    if series is not None:
                        tensor = value.tensor
                        content = tensor.tensor_content
                        if len(content) == 4 and tensor.dtype == DT_FLOAT:
                            append(
                                (
                                    series,
                                    step,
                                    0,
                                    offset,
                                    index,
                                    wall_time,
                                    unpack_float(content)[0],
                                )
                            )
                            if parts is not None:
                                learn(parts, payload, False)
                            continue
                self._decode_value(value, kind, step, wall_time, offset, index)
        stats.first_wall_time = None if first == inf else first
        stats.last_wall_time = None if last == -inf else last

    def scalar_definition(self, tag: str, simple: bool, own: Any) -> SeriesDefinition | None:
        """What ``define_scalar`` defines for a single-scalar record of ``tag`` (``simple``:
        a simple_value, else a float32 tensor; ``own``: the record's metadata or None),
        numbered 0, when the general path would take its fast path for it and the selection
        keeps it; None otherwise.  It depends on nothing this file has seen, so a batch of
        files asks once per key."""
        plugin = plugin_for("simple_value" if simple else "tensor", own)
        if (
            not tag
            or plugin != "scalars"
            or not self._accepts_tag(tag)
            or not self.selection.accepts_plugin(plugin)
        ):
            return None
        return SeriesDefinition(0, tag, plugin, "float32", *_described(own))

    def define_scalar(self, definition: SeriesDefinition, simple: bool, own: Any) -> int | None:
        """The series the general path would define from a single-scalar record whose
        ``scalar_definition`` is ``definition`` (``simple`` and ``own`` as there), when that
        follows from the record alone: its tag has no metadata and no scalar series yet.
        None otherwise (the general path must decode the record)."""
        tag = definition.tag
        if tag in self._metadata or tag in self._known or (tag, "scalars") in self._series:
            return None
        if own is not None:
            self._first_metadata(tag, own)
        series = self._series[(tag, "scalars")] = len(self.definitions)
        self.definitions.append(SeriesDefinition(series, *definition[1:]))
        (self.simple_series if simple else self.float_tensor_series)[tag] = series
        return series

    def scalar_series(self, tag: str, simple: bool) -> int | None:
        """The series that ``tag``'s simple_values (else float32 tensors) go to unparsed."""
        return (self.simple_series if simple else self.float_tensor_series).get(tag)

    def take(self) -> tuple[dict[str, FileRows], dict[str, bytes]]:
        """Hand over the rows (and blobs they point to) decoded so far; start afresh."""
        rows, blobs = self.buffer.take()
        scalars = rows.get("scalars")
        if scalars is not None:
            # Every scalars row is a point of the scalars plugin, whichever path made it.
            self.stats.points["scalars"] += len(scalars)
        return rows, blobs

    def metadata(self) -> KnownMetadata:
        """The first metadata of every tag seen in this file."""
        return dict(self._metadata)

    def pending(self) -> int:
        """Rows decoded and not yet taken."""
        return self.buffer.pending()

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
        if what in _RAW_EVENTS:
            self._decode_raw_event(event, what, offset)
        elif what != "summary":  # an empty summary is nothing to keep
            self.stats.other_events[what] += 1

    def _decode_value(
        self, value: Any, kind: str | None, step: int, wall_time: float, offset: int, index: int
    ) -> None:
        tag = value.tag or value.node_name
        own = value.metadata if value.HasField("metadata") else None
        route = self._routes.get((tag, kind))
        if route is None or (own is not None and tag not in self._metadata):
            route = self._route(tag, kind, own)
            if route is None:
                return
        plugin, decoder, first = route
        decoded = self._run_decoders(decoder, plugin, tag, value, own if own is not None else first)
        if decoded is None:
            return
        series = self._emit(tag, plugin, decoded, first, step, offset, index, wall_time)
        # The fast paths key on value.tag, so a node_name fallback must not be cached.
        if plugin == "scalars" and value.tag:
            if kind == "simple_value":
                self.simple_series[tag] = series
            elif decoded.dtype == "float32":
                self.float_tensor_series[tag] = series

    def _route(self, tag: str, kind: str | None, own: Any) -> _Route | None:
        """The plugin, its decoder and the tag's first metadata for a value of ``tag`` and
        ``kind`` (remembered), None when the filters leave it out (counted each time)."""
        if tag not in self._metadata and own is not None:
            self._first_metadata(tag, own)
        first = self._metadata.get(tag) or self._known.get(tag)
        plugin = plugin_for(kind, first)
        if not self._admits(tag, plugin):
            return None
        route = self._routes[(tag, kind)] = (plugin, DECODERS.get(plugin), first)
        return route

    def _first_metadata(self, tag: str, own: Any) -> None:
        """The first value of ``tag`` in this file that carries metadata fixes its routes
        anew: the ones its values took before (another plugin's, maybe) are forgotten."""
        self._metadata[tag] = own
        for other in _KINDS:
            self._routes.pop((tag, other), None)

    def _run_decoders(
        self, decoder: Decoder | None, plugin: str, tag: str, value: Any, metadata: Any
    ) -> Decoded | None:
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
        self,
        tag: str,
        plugin: str,
        decoded: Decoded,
        metadata: Any,
        step: int,
        offset: int,
        index: int,
        wall_time: float,
    ) -> int:
        series = self._series.get((tag, plugin))
        if series is None:
            series = self._series[(tag, plugin)] = self._define(
                tag, plugin, decoded.dtype, metadata
            )
        rows = decoded.rows
        table = self.buffer.table(decoded.table)
        if len(rows) == 1:  # most values: one tuple made, no generator
            table.append((series, step, 0, offset, index, wall_time, *rows[0]))
        else:
            key = (series, step, 0, offset, index, wall_time)
            table.extend(key + row for row in rows)
        if decoded.blobs:
            self.buffer.blobs.update(decoded.blobs)
        if decoded.table != "scalars":  # scalars are counted as they are taken
            self.stats.points[plugin] += len(rows)
        return series

    def _define(self, tag: str, plugin: str, dtype: str | None, metadata: Any) -> int:
        local = len(self.definitions)
        self.definitions.append(SeriesDefinition(local, tag, plugin, dtype, *_described(metadata)))
        return local

    def _decode_raw_event(self, event: Any, what: str, offset: int) -> None:
        from tbconvert.plugins.tensors import raw_bytes

        plugin, tag = _RAW_EVENTS[what]
        if what == "tagged_run_metadata":
            tag, data = event.tagged_run_metadata.tag, event.tagged_run_metadata.run_metadata
        else:
            data = getattr(event, what)
        assert tag is not None
        if not self._admits(tag, plugin):
            return
        if not isinstance(data, bytes):  # a message (session_log, log_message), not bytes
            data = data.SerializeToString()
        decoded = raw_bytes(bytes(data), what)
        self._emit(tag, plugin, decoded, None, event.step, offset, 0, event.wall_time)

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


def _described(metadata: Any) -> tuple[str | None, str | None, bytes | None]:
    """A series' display name, description and plugin content, from its first metadata."""
    if metadata is None:
        return None, None, None
    return (
        metadata.display_name or None,
        metadata.summary_description or None,
        bytes(metadata.plugin_data.content) or None,
    )
