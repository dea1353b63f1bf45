"""What a record becomes: the one rule every decoding path of ``reading/`` follows.

A record is an Event.  Its summary values are *routed* by tag, kind and metadata to a plugin
(:meth:`Routing.route`), decoded by that plugin, and *emitted* as rows of a series
(:meth:`Routing.emit`), the series *defined* from the tag's first metadata the first time a
(tag, plugin) is met (:meth:`Routing.define`).  An Event with no summary is a raw event kept as
a tensor (graphs, run metadata, session logs, log messages) or only counted (a version
header, an empty event): :meth:`Routing.non_summary`, :func:`count_version_header`.

The *known metadata* of a tag is its first metadata: TF1 writers send it once per tag, so it
is taken from the tag's first value that carries any, in this file, else from earlier files
of the same *owner* (the (run, context) the file's points belong to) or from the store.  The
first value in this file that carries metadata fixes the tag's routes anew.

``decoder.EventDecoder`` is the protobuf loop over this rule; the speed paths (``fast/``,
``huge_images``) ask it the same questions through the same methods and never decide what a
record means themselves.  Rows follow ``tbconvert.rows``: local series numbers, file id 0.
"""

from __future__ import annotations

from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary

from tbconvert.filters import Selection
from tbconvert.plugins.names import SESSION_LOG_TAG
from tbconvert.plugins.registry import (
    DECODERS,
    FALLBACK,
    Decoded,
    DecodeFailure,
    Decoder,
    plugin_for,
)
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.row_buffer import RowBuffer
from tbconvert.rows import SeriesDefinition

# Tag -> its first metadata (a ``SummaryMetadata``), as far as known.
KnownMetadata = dict[str, Any]
# (run_path, context), the owner of a file's points -> the known metadata of its tags.
KnownMetadataByOwner = dict[tuple[str, str], KnownMetadata]

# Event-level payloads kept as raw tensors: event field -> (plugin, tag), tags as TensorBoard
# names them; tagged run metadata uses its own tag.  Session logs (a TF1 session's START,
# STOP and CHECKPOINT markers, with the checkpoint's path) and log messages are kept too, as
# their serialized protos: only a file's version header and empty events are just counted.
RAW_EVENTS: dict[str, tuple[str, str | None]] = {
    "graph_def": ("graphs", "__run_graph__"),
    "meta_graph_def": ("graphs", "__meta_graph_def__"),
    "tagged_run_metadata": ("graph_tagged_run_metadata", None),
    "session_log": ("session_log", SESSION_LOG_TAG),
    "log_message": ("log_message", "__log_message__"),
}
# The Event field of a version header, the first record every writer writes.
VERSION_HEADER = "file_version"

# What a Summary.Value's oneof may hold (None: nothing).
_KINDS = (None, *(field.name for field in Summary.Value.DESCRIPTOR.oneofs_by_name["value"].fields))


# How the values of one tag and kind are decoded: (plugin, its decoder or None to keep them
# raw, the tag's first metadata or None).
Route = tuple[str, "Decoder | None", Any]


def count_version_header(stats: DecodeStats, wall_time: float) -> None:
    """Count an Event that is a version header and nothing else, of a finite ``wall_time``,
    as the general path does: one more ``file_version`` event, its wall time in the span."""
    stats.other_events[VERSION_HEADER] += 1
    stats.widen_span(wall_time, wall_time)


def described(metadata: Any) -> tuple[str | None, str | None, bytes | None]:
    """A series' display name, description and plugin content, from its first metadata."""
    if metadata is None:
        return None, None, None
    return (
        metadata.display_name or None,
        metadata.summary_description or None,
        bytes(metadata.plugin_data.content) or None,
    )


class Routing:
    """What the records of one event file become: its tags' routes, its series, its rows.

    Attributes:
        selection: What to keep (``--tag``, ``--exclude-tag``, ``--plugins``).
        buffer: Rows made and not yet taken.
        definitions: Every series defined so far; a row's series is its index here.
        stats: Counts and the file's wall-time span.
        simple_series, float_tensor_series: Tags whose single scalars (a simple_value, a
            4-byte DT_FLOAT tensor) become rows of a scalars series with no plugin call: tag
            -> series.  Set by :meth:`decode_value` and :meth:`define_scalar` only.
    """

    def __init__(
        self,
        selection: Selection,
        known_metadata: KnownMetadata | None = None,
    ) -> None:
        """Args: what to keep; the known metadata of the owner's tags from earlier files
        or the store, for tags whose first value in this file carries none."""
        self.selection = selection
        self.buffer = RowBuffer()
        self.definitions: list[SeriesDefinition] = []
        self.stats = DecodeStats()
        self.simple_series: dict[str, int] = {}
        self.float_tensor_series: dict[str, int] = {}
        self._known = known_metadata or {}
        self._metadata: KnownMetadata = {}  # first metadata met in this file
        self._series: dict[tuple[str, str], int] = {}  # (tag, plugin) -> series
        self._tag_ok: dict[str, bool] = {}
        self._routes: dict[tuple[str, str | None], Route] = {}

    def metadata(self) -> KnownMetadata:
        """The first metadata of every tag met in this file that carried any."""
        return dict(self._metadata)

    def decode_value(
        self, value: Any, kind: str | None, step: int, wall_time: float, offset: int, index: int
    ) -> None:
        """Route, decode and emit one ``Summary.Value`` (``kind``: its oneof) of the record
        at ``offset``, ``index`` among its values."""
        tag = value.tag or value.node_name
        own = value.metadata if value.HasField("metadata") else None
        route = self._routes.get((tag, kind))
        if route is None or (own is not None and tag not in self._metadata):
            route = self.route(tag, kind, own)
            if route is None:
                return
        plugin, decoder, first = route
        decoded = self._run_decoders(decoder, plugin, tag, value, own if own is not None else first)
        if decoded is None:
            return
        series = self.emit(tag, plugin, decoded, first, step, offset, index, wall_time)
        # The scalar shortcuts key on value.tag, so a node_name fallback must not be cached.
        if plugin == "scalars" and value.tag:
            if kind == "simple_value":
                self.simple_series[tag] = series
            elif decoded.dtype == "float32":
                self.float_tensor_series[tag] = series

    def route(self, tag: str, kind: str | None, own: Any) -> Route | None:
        """How a value of ``tag`` and ``kind`` (with its ``own`` metadata, or None) is
        decoded, remembered for the tag's later values; None when the filters leave it out
        (counted each time)."""
        if tag not in self._metadata and own is not None:
            self._first_metadata(tag, own)
        first = self._metadata.get(tag) or self._known.get(tag)
        plugin = plugin_for(kind, first)
        if not self._admits(tag, plugin):
            return None
        route = self._routes[(tag, kind)] = (plugin, DECODERS.get(plugin), first)
        return route

    def emit(
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
        """Add the rows of a decoded value to the buffer, under the series of (tag, plugin),
        defined from ``metadata`` if new; its series number."""
        series = self._series.get((tag, plugin))
        if series is None:
            series = self._series[(tag, plugin)] = self.define(tag, plugin, decoded.dtype, metadata)
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

    def define(self, tag: str, plugin: str, dtype: str | None, metadata: Any) -> int:
        """Announce a new series of ``tag`` and ``plugin``, described by its first
        ``metadata``; its local number."""
        local = len(self.definitions)
        self.definitions.append(SeriesDefinition(local, tag, plugin, dtype, *described(metadata)))
        return local

    def scalar_definition(self, tag: str, simple: bool, own: Any) -> SeriesDefinition | None:
        """What :meth:`define_scalar` defines for a single-scalar record of ``tag``
        (``simple``: a simple_value, else a float32 tensor; ``own``: the record's metadata or
        None), numbered 0, when :meth:`decode_value` would take a scalar shortcut for it and
        the selection keeps it; None otherwise.  It depends on nothing this file has seen,
        so a batch of files asks once per key."""
        plugin = plugin_for("simple_value" if simple else "tensor", own)
        if (
            not tag
            or plugin != "scalars"
            or not self._accepts_tag(tag)
            or not self.selection.accepts_plugin(plugin)
        ):
            return None
        return SeriesDefinition(0, tag, plugin, "float32", *described(own))

    def define_scalar(self, definition: SeriesDefinition, simple: bool, own: Any) -> int | None:
        """The series :meth:`decode_value` would define from a single-scalar record whose
        :meth:`scalar_definition` is ``definition`` (``simple`` and ``own`` as there), when
        that follows from the record alone: its tag has no known metadata and no scalar
        series yet.  None otherwise (the record must be decoded)."""
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
        """The series that ``tag``'s simple_values (else float32 tensors) become rows of with
        no plugin call, if any yet."""
        return (self.simple_series if simple else self.float_tensor_series).get(tag)

    def non_summary(self, event: Any, offset: int) -> None:
        """What an Event with no summary value becomes: a raw event's row, else a count of
        its kind (a version header, an empty event); an empty summary is nothing."""
        what = event.WhichOneof("what") or "empty"
        if what in RAW_EVENTS:
            self._raw_event(event, what, offset)
        elif what != "summary":
            self.stats.other_events[what] += 1

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

    def _raw_event(self, event: Any, what: str, offset: int) -> None:
        from tbconvert.plugins.tensors import raw_bytes

        plugin, tag = RAW_EVENTS[what]
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
        self.emit(tag, plugin, decoded, None, event.step, offset, 0, event.wall_time)

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
