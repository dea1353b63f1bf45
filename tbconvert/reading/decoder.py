"""Records of one event file to rows: the protobuf loop over the decoding rule (``routing``).

Each record is parsed with protobuf and each of its summary values handed to
:class:`~tbconvert.reading.routing.Routing`, which says what it becomes; a tag's later single
scalars skip the plugin call (the routing's scalar shortcuts).  Blocks of records, and records
of keys already learnt, take the speed paths of ``reading/fast/``, which ask the same routing.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from tbconvert.filters import Selection
from tbconvert.reading import huge_images
from tbconvert.reading.events import Event, UnparseableEvent, parse_event
from tbconvert.reading.fast.template import KeyedRecords, LearntKeys
from tbconvert.reading.routing import KnownMetadata, Routing
from tbconvert.reading.tuning import HUGE_RECORD_BYTES
from tbconvert.reading.wire import DT_FLOAT
from tbconvert.rows import FileRows

if TYPE_CHECKING:
    from tbconvert.reading.fast.block_scalars import BlockScalars
    from tbconvert.reading.fast.blocks import Block

_FLOAT32 = struct.Struct("<f")
# Smaller blocks cost less one record at a time than NumPy's fixed cost per call.
_BLOCK_MIN = 64


class EventDecoder:
    """Decode the records of one event file into rows and the series they belong to.

    Attributes:
        routing: What the file's records become (its routes, series and rows).
        buffer: Rows decoded and not yet taken (the routing's).
        definitions: Every series defined so far; a row's series is its index here.
        stats: Counts and the file's wall-time span.
    """

    def __init__(
        self,
        selection: Selection,
        known_metadata: KnownMetadata | None = None,
        *,
        by_record: bool = False,
        learnt_keys: LearntKeys | None = None,
        huge_record_bytes: int = HUGE_RECORD_BYTES,
    ) -> None:
        """Args: what to keep; the known metadata of the owner's tags from earlier files or
        the store, for tags whose first value in this file carries none (TF1 writers send it
        once per tag); ``by_record``: decode every record on its own, never a block at once
        (for a few hundred records, learning each key costs more than it saves);
        ``learnt_keys``: the single-scalar keys learnt so far by the conversion (a fresh
        table if None), which records fed one by one are looked up in and teach;
        ``huge_record_bytes``: a record read alone from this size on may be a huge image
        (``huge_images``)."""
        self.routing = Routing(selection, known_metadata)
        self.buffer = self.routing.buffer
        self.definitions = self.routing.definitions
        self.stats = self.routing.stats
        self._learnt_keys = learnt_keys
        self._keyed: KeyedRecords | None = None
        self._blocks: BlockScalars | None = None
        self._by_record = by_record
        self._huge_record_bytes = huge_record_bytes

    def feed(self, records: Block | list[tuple[int, bytes]]) -> None:
        """Decode a stretch of records: (offset, payload) pairs, or a verified block."""
        if isinstance(records, list):
            if len(records) != 1 or not huge_images.feed(
                self.routing, *records[0], self._huge_record_bytes
            ):
                self._keyed_records().feed(records)
        elif self._by_record or len(records) < _BLOCK_MIN:
            self._keyed_records().feed(records.pairs())
        else:
            if self._blocks is None:
                from tbconvert.reading.fast.block_scalars import BlockScalars

                self._blocks = BlockScalars(self)
            self._blocks.feed(records)

    def feed_records(self, records: Sequence[tuple[int, bytes]]) -> None:
        """Decode (offset, payload) records one by one with protobuf, in order."""
        # The hot loop of the general path: locals only, one attribute read per field.
        routing = self.routing
        simple = routing.simple_series
        float_tensors = routing.float_tensor_series
        decode_value = routing.decode_value
        unpack_float = _FLOAT32.unpack
        append = self.buffer.table("scalars").append
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
            values = event.summary.value[:]  # a list: see _tensorproto.shape_of
            if not values:
                routing.non_summary(event, offset)
                continue
            step = event.step
            for index, value in enumerate(values):
                kind = value.WhichOneof("value")
                # The scalar shortcuts: a tag's later single scalars skip the plugin call.
                if kind == "simple_value":
                    series = simple.get(value.tag)
                    if series is not None:
                        append((series, step, 0, offset, index, wall_time, value.simple_value))
                        continue
                elif kind == "tensor":
                    # TF2 scalars: a rank-0 DT_FLOAT in 4 bytes of tensor_content.
                    series = float_tensors.get(value.tag)
                    if series is not None:
                        tensor = value.tensor
                        content = tensor.tensor_content
                        if len(content) == 4 and tensor.dtype == DT_FLOAT:
                            number = unpack_float(content)[0]
                            append((series, step, 0, offset, index, wall_time, number))
                            continue
                decode_value(value, kind, step, wall_time, offset, index)
        stats.first_wall_time = None if first == inf else first
        stats.last_wall_time = None if last == -inf else last

    def take(self) -> tuple[dict[str, FileRows], dict[str, bytes]]:
        """Hand over the rows (and blobs they point to) decoded so far; start afresh."""
        rows, blobs = self.buffer.take()
        scalars = rows.get("scalars")
        if scalars is not None:
            # Every scalars row is a point of the scalars plugin, whichever path made it.
            self.stats.points["scalars"] += len(scalars)
        return rows, blobs

    def metadata(self) -> KnownMetadata:
        """The first metadata of every tag met in this file that carried any."""
        return self.routing.metadata()

    def pending(self) -> int:
        """Rows decoded and not yet taken."""
        return self.buffer.pending()

    def _keyed_records(self) -> KeyedRecords:
        if self._keyed is None:
            keys = self._learnt_keys if self._learnt_keys is not None else LearntKeys()
            self._keyed = KeyedRecords(self, keys)
        return self._keyed

    def _parse_leniently(self, offset: int, payload: bytes) -> Any:
        try:
            event, lossy = parse_event(payload)
        except UnparseableEvent:
            self.stats.unparseable.append(offset)
            return None
        if lossy:
            self.stats.lossy_records += 1
        return event
