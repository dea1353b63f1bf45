"""Single-scalar Events recognised by their bytes, one record at a time, with no protobuf parse.

The per-record counterpart of ``fast.block_scalars`` (which does the same for a whole block with
NumPy, too dear for a file of a few hundred records: a sweep is thousands of them, issue #14).
A record written as

    09 <wall_time: 8>  [10 <step: varint of at most 9 bytes>]
    2a <S> 0a <V> 0a <T> <tag>   15 <value: 4>                                  simple_value
                                 42 <L> 08 01 [12 <D> <shape>] 22 04 <value: 4>
                                                             DT_FLOAT tensor_content
                                 [4a <M> <metadata>]

with every length a single byte and each length field ending exactly at the end of the
payload, is one Event with one summary value.  Its *key*, the bytes from ``2a`` to the end
less the four value bytes, fixes everything but wall time, step and value: the lengths that
place the value lie inside the key, so two records with equal keys have the value at the same
place and parse to the same tag, kind and metadata.

Which key is which tag is the same in every file, so keys are learnt once per conversion (from
a record the general path has just decoded into a scalar row) into a :class:`LearntKeys` table
that the read settings carry to every decoder of the conversion (one per worker process); each
decoder still maps the tag to its own series, and only once the routing has defined that series,
as the general path would.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from tbconvert.reading.events import Event
from tbconvert.reading.wire import (
    CONTENT_4,
    DTYPE_FLOAT,
    METADATA,
    SHAPE,
    SIMPLE_VALUE,
    STEP,
    SUMMARY,
    TAG,
    TENSOR,
    VALUE,
    WALL_TIME,
)

if TYPE_CHECKING:
    from tbconvert.reading.fast import GeneralPath

_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")
# Shortest payload of the template: wall time, summary, value and tag headers, a value.
_SHORTEST = 20


def split(payload: bytes) -> tuple[bytes, int, int] | None:
    """(key, step, index of the value's 4 bytes) of a record that may be of the template, or
    None when it cannot be (the general path decodes it)."""
    n = len(payload)
    if n < _SHORTEST or payload[0] != WALL_TIME:
        return None
    if payload[9] == STEP:
        byte = payload[10]
        i = 11
        step = byte & 0x7F
        shift = 7
        while byte >= 0x80:
            if shift > 56 or i >= n:
                return None  # negative or 10-byte steps: left to protobuf
            byte = payload[i]
            i += 1
            step |= (byte & 0x7F) << shift
            shift += 7
    else:
        step = 0  # proto3 leaves a zero step out
        i = 9
    if (
        i + 6 > n
        or payload[i] != SUMMARY
        or payload[i + 1] != n - i - 2
        or payload[i + 2] != VALUE
        or payload[i + 3] != n - i - 4
        or payload[i + 4] != TAG
    ):
        return None  # not exactly one summary holding exactly one value
    end_of_tag = i + 6 + payload[i + 5]
    if end_of_tag + 5 > n:
        return None
    kind = payload[end_of_tag]
    if kind == SIMPLE_VALUE:
        at = end_of_tag + 1
    elif kind == TENSOR and end_of_tag + 2 < n:
        at = end_of_tag + payload[end_of_tag + 1] - 2  # the tensor's last 4 bytes
        if at < end_of_tag + 6 or at + 4 > n:
            return None
    else:
        return None
    return payload[i:at] + payload[at + 4 :], step, at


class LearntKeys:
    """The keys learnt so far: key -> (tag, whether a simple_value, else a DT_FLOAT tensor).

    One table per conversion, carried by its read settings (``chunks.ReadSettings``), so each
    worker process has its own; a test passes a fresh one.  Bounded: a logdir with more
    distinct keys than ``most`` starts learning afresh.

    Attributes:
        tags: The table itself, read directly by the loop of :class:`KeyedRecords`.
    """

    def __init__(self, most: int = 1 << 16) -> None:
        """Start with no key learnt."""
        self.tags: dict[bytes, tuple[str, bool]] = {}
        self._most = most

    def __len__(self) -> int:
        return len(self.tags)

    def clear(self) -> None:
        """Forget every key."""
        self.tags.clear()

    def learn(self, key: bytes, tag: str, simple: bool) -> None:
        """Remember that records of ``key`` are single scalars of ``tag`` (``simple``: as a
        simple_value, else a DT_FLOAT tensor)."""
        if len(self.tags) >= self._most:
            self.tags.clear()
        self.tags[key] = (tag, simple)


class KeyedRecords:
    """Records fed one by one: those of a learnt key whose tag has its scalar series in the
    file become rows with no protobuf parse; every other record goes to the general path,
    in record order, and a key is learnt from a record it has just made a scalar row of."""

    def __init__(self, general: GeneralPath, keys: LearntKeys) -> None:
        """Args: the file's general decoder; the conversion's learnt keys."""
        self._general = general
        self._keys = keys
        # Keys whose records this file's general path decodes, none of them a scalar row of
        # the shortcut so far (filtered out, another plugin's): not tried again in this file.
        self._passed: set[bytes] = set()

    def feed(self, records: Sequence[tuple[int, bytes]]) -> None:
        """Decode ``(offset, payload)`` records into the general decoder's buffer, in order."""
        # The hot loop of a sweep's files: locals only.
        general = self._general
        routing = general.routing
        simple = routing.simple_series
        float_tensors = routing.float_tensor_series
        scalars = general.buffer.table("scalars")
        append = scalars.append
        float_at = _FLOAT32.unpack_from
        double_at = _FLOAT64.unpack_from
        known_tags = self._keys.tags
        cut = split
        stats = general.stats
        inf = float("inf")
        first = inf if stats.first_wall_time is None else stats.first_wall_time
        last = -inf if stats.last_wall_time is None else stats.last_wall_time
        waiting: list[tuple[int, bytes]] = []
        # Tags of learnt keys whose first record in this file waits in ``waiting``: the
        # general path defines their series when it decodes it, so a second record of one
        # must wait for that (decoding each first record at once cost more than its parse).
        pending: set[str] = set()
        passed = self._passed
        for offset, payload in records:
            parts = cut(payload)
            if parts is None:
                waiting.append((offset, payload))
                continue
            key = parts[0]
            known = known_tags.get(key)
            if known is not None:
                tag = known[0]
                series_of = simple if known[1] else float_tensors
                series = series_of.get(tag)
                if series is None:
                    if key in passed or tag not in pending:
                        pending.add(tag)
                        waiting.append((offset, payload))
                        continue
                    first, last = self._decode(waiting, first, last)
                    waiting = []
                    pending.clear()
                    series = series_of.get(tag)
                    if series is None:  # filtered out, another plugin's: protobuf's
                        passed.add(key)
                        waiting.append((offset, payload))
                        continue
                elif waiting:  # the rows stay in record order
                    first, last = self._decode(waiting, first, last)
                    waiting = []
                    pending.clear()
                wall_time = double_at(payload, 1)[0]
                # NaN compares false both ways: kept in rows, left out of the file's span.
                if wall_time > last:
                    last = wall_time
                if wall_time < first:
                    first = wall_time
                value = float_at(payload, parts[2])[0]
                append((series, parts[1], 0, offset, 0, wall_time, value))
                continue
            waiting.append((offset, payload))
            if key in passed:
                continue
            if not _learnable(parts, payload):
                passed.add(key)
                continue
            # Decoded now, so that its key is learnt from it if it becomes a scalar row.
            before = len(scalars)
            first, last = self._decode(waiting, first, last)
            waiting = []
            pending.clear()
            made = len(scalars) > before and scalars[-1][3] == offset
            if not made or not self._learn(key, payload, scalars[-1][0]):
                passed.add(key)
        if waiting:
            first, last = self._decode(waiting, first, last)
        stats.first_wall_time = None if first == inf else first
        stats.last_wall_time = None if last == -inf else last

    def _decode(
        self, records: list[tuple[int, bytes]], first: float, last: float
    ) -> tuple[float, float]:
        """Hand ``records`` to the general path, the span so far (``first``, ``last``) with
        them; the span after them."""
        stats = self._general.stats
        inf = float("inf")
        stats.first_wall_time = None if first == inf else first
        stats.last_wall_time = None if last == -inf else last
        self._general.feed_records(records)
        return (
            inf if stats.first_wall_time is None else stats.first_wall_time,
            -inf if stats.last_wall_time is None else stats.last_wall_time,
        )

    def _learn(self, key: bytes, payload: bytes, series: int) -> bool:
        """Learn ``key`` from the record of ``payload``, which the general path has just made
        a scalar row of ``series`` of, when that row is the scalar shortcut's of its tag (so
        every record with the key becomes such a row with only wall time, step and value
        changed); whether it was learnt."""
        try:
            # Parsed again, strictly: the general path may have read it leniently (lossy), and
            # the tag is what protobuf makes of its bytes.
            event = Event.FromString(payload)
        except DecodeError:
            return False
        (value,) = event.summary.value  # split() let through one value only
        simple = value.WhichOneof("value") == "simple_value"
        if self._general.routing.scalar_series(value.tag, simple) != series:
            return False
        self._keys.learn(key, value.tag, simple)
        return True


def _learnable(parts: tuple[bytes, int, int], payload: bytes) -> bool:
    """Whether the key of ``parts`` could be learnt: it holds the template's fields and
    nothing else (of the kind its value's field says)."""
    key, _step, at = parts
    simple = payload[at - 1] == SIMPLE_VALUE
    return _well_formed(key, at - (len(payload) - len(key) - 4), simple)


def _well_formed(key: bytes, at: int, simple: bool) -> bool:
    """Whether ``key`` (value taken out at ``at``) holds the template's fields and nothing
    else, so that no other field can hold what protobuf reads as the value.  Every length in
    it is a single byte, as the summary's is (``split``)."""
    tag_end = 6 + key[5]
    if not simple:
        tensor = key[tag_end + 2 : at]
        shape = tensor[2:-2]
        if tensor[:2] != DTYPE_FLOAT or tensor[-2:] != CONTENT_4:
            return False
        if shape and (shape[0] != SHAPE or len(shape) != shape[1] + 2):
            return False
    # Nothing after the value but metadata: no later field of the value's own or the other
    # kind can override it (the last one wins in protobuf).
    rest = key[at:]
    return not rest or (rest[0] == METADATA and len(rest) == rest[1] + 2)
