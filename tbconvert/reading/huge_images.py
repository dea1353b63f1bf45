"""A huge image record decoded without protobuf copying its image (issue #40).

Through protobuf, an Event holding a 150 MB image costs the image three times: the payload,
upb's copy of it, and the ``encoded_image_string`` made from that.  Here the wire format is
walked by hand to the image's bytes; the Event is parsed without them (its *skeleton*, a few
hundred bytes), and the image is sliced from the payload once.  Only records of
``HUGE_RECORD`` bytes or more that hold exactly one ``Summary.Value`` with a
``Summary.Image`` (what every writer's ``add_image`` and ``add_video`` make) take this path,
and only when the general path would give that value to the images plugin; everything else
is decoded by ``EventDecoder`` as usual.  ``tests/reading/test_huge_images.py`` pins it to the
general path.
"""

from __future__ import annotations

from typing import Any, Protocol

from google.protobuf.message import DecodeError

from tbconvert.plugins import images
from tbconvert.plugins.base import Decoded
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.events import Event

# Smaller records go the general way: their copies cost little.
HUGE_RECORD = 16 << 20

_LENGTH_DELIMITED = 2
_EVENT_SUMMARY, _SUMMARY_VALUE, _VALUE_IMAGE, _IMAGE_ENCODED = 5, 1, 4, 4
# The other members of Event's and of Summary.Value's oneof: the last one on the wire wins,
# so the summary and the image must be the only ones.
_EVENT_ONEOF = frozenset({3, 4, 6, 7, 8, 9})
_VALUE_ONEOF = frozenset({2, 3, 5, 6, 8})
# (field start, key end, content start, content end) of one length-delimited field.
_Field = tuple[int, int, int, int]


class _Decoder(Protocol):
    """What of ``EventDecoder`` this path uses: its routing and emitting of one value."""

    stats: DecodeStats

    def _route(self, tag: str, kind: str | None, own: Any) -> Any: ...

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
    ) -> int: ...


def feed(decoder: _Decoder, offset: int, payload: bytes) -> bool:
    """Decode the record at ``offset`` when it is a huge one-image Event that the images
    plugin takes, exactly as ``EventDecoder.feed_records`` would; False, having decoded
    nothing, for any other record."""
    if len(payload) < HUGE_RECORD:
        return False
    found = split_image(payload)
    if found is None:
        return False
    skeleton, start, end = found
    try:
        event = Event.FromString(skeleton)
    except DecodeError:  # strings that are not UTF-8: the general path repairs them
        return False
    value = event.summary.value[0]
    tag = value.tag or value.node_name
    route = decoder._route(tag, "image", value.metadata if value.HasField("metadata") else None)
    if route is not None and route[0] != "images":
        return False  # the general path routes it again, to the same place
    wall_time = event.wall_time
    if wall_time == wall_time:  # NaN is kept in rows, left out of the file's span
        decoder.stats.widen_span(wall_time, wall_time)
    if route is not None:
        image = value.image
        decoded = images.image_rows(payload[start:end], image.width, image.height)
        decoder._emit(tag, "images", decoded, route[2], event.step, offset, 0, wall_time)
    return True


def split_image(payload: bytes) -> tuple[bytes, int, int] | None:
    """The Event without its image's bytes, and where they lie in ``payload``, when its
    summary holds exactly one value and that value exactly one ``Summary.Image`` with one
    ``encoded_image_string``; None otherwise (or for bytes that are not such an Event)."""
    path: list[_Field] = []
    start, end = 0, len(payload)
    for number, oneof in (
        (_EVENT_SUMMARY, _EVENT_ONEOF),
        (_SUMMARY_VALUE, None),
        (_VALUE_IMAGE, _VALUE_ONEOF),
        (_IMAGE_ENCODED, None),
    ):
        fields = _fields(payload, start, end)
        if fields is None:
            return None
        wanted = [field for field in fields if field[0] == number]
        others = {field[0] for field in fields if field[0] != number}
        if len(wanted) != 1 or wanted[0][1] != _LENGTH_DELIMITED or (oneof and others & oneof):
            return None
        if number == _SUMMARY_VALUE and others:
            return None
        path.append(wanted[0][2])
        start, end = wanted[0][2][2:]
    return _without(payload, path), start, end


def _without(payload: bytes, path: list[_Field]) -> bytes:
    """``payload`` with the innermost field of ``path`` emptied and the lengths of the
    fields around it made shorter to match."""
    inner = b""
    bounds = [(0, len(payload)), *((field[2], field[3]) for field in path[:-1])]
    for (field_start, key_end, _content_start, content_end), (low, high) in zip(
        reversed(path), reversed(bounds), strict=True
    ):
        inner = b"".join(
            (
                payload[low:field_start],
                payload[field_start:key_end],
                _varint_bytes(len(inner)),
                inner,
                payload[content_end:high],
            )
        )
    return inner


def _fields(buf: bytes, start: int, end: int) -> list[tuple[int, int, _Field]] | None:
    """(number, wire type, place) of every field in ``buf[start:end]``; None when the bytes
    do not parse as fields (groups included: no message on this path has any)."""
    fields = []
    i = start
    while i < end:
        key, key_end = _varint(buf, i, end)
        wire = key & 7
        content_start = key_end
        if wire == 0:
            _value, content_end = _varint(buf, key_end, end)
        elif wire == 1:
            content_end = key_end + 8
        elif wire == 5:
            content_end = key_end + 4
        elif wire == _LENGTH_DELIMITED:
            length, content_start = _varint(buf, key_end, end)
            content_end = content_start + length
        else:
            return None
        if content_end > end or key >> 3 == 0:
            return None
        fields.append((key >> 3, wire, (i, key_end, content_start, content_end)))
        i = content_end
    return fields


def _varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` and the index past it; past ``end`` when it runs over."""
    value = shift = 0
    while i < end and shift < 64:
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7
    return 0, end + 1


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
