"""A huge image record decoded without protobuf copying its image (issue #40).

Through protobuf, an Event holding a 150 MB image costs the image three times: the payload,
upb's copy of it, and the ``encoded_image_string`` made from that.  Here the wire format is
walked by hand to the image's bytes; the Event is parsed without them (its *skeleton*, a few
hundred bytes), and the image is sliced from the payload once.  Only records of
``ReadTuning.huge_record_bytes`` or more that hold exactly one ``Summary.Value`` with a
``Summary.Image`` (what every writer's ``add_image`` and ``add_video`` make) take this path,
and only when the general path would give that value to the images plugin; everything else
is decoded by ``EventDecoder`` as usual.  ``tests/reading/test_huge_images.py`` pins it to the
general path.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from tbconvert.plugins import images
from tbconvert.reading import wire
from tbconvert.reading.events import Event
from tbconvert.reading.routing import Routing
from tbconvert.reading.tuning import HUGE_RECORD_BYTES

# The other members of Event's and of Summary.Value's oneof: the last one on the wire wins,
# so the summary and the image must be the only ones.
_EVENT_ONEOF = wire.EVENT_WHAT - {wire.EVENT_SUMMARY}
_VALUE_ONEOF = wire.VALUE_KIND - {wire.VALUE_IMAGE}
# (field start, key end, content start, content end) of one length-delimited field.
_Field = tuple[int, int, int, int]


def feed(
    routing: Routing, offset: int, payload: bytes, huge_record_bytes: int = HUGE_RECORD_BYTES
) -> bool:
    """Decode the record at ``offset`` through the file's ``routing`` when it is a huge
    one-image Event that the images plugin takes, exactly as ``EventDecoder.feed_records``
    would; False, having decoded nothing, for any other record."""
    if len(payload) < huge_record_bytes:
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
    route = routing.route(tag, "image", value.metadata if value.HasField("metadata") else None)
    if route is not None and route[0] != "images":
        return False  # the general path routes it again, to the same place
    wall_time = event.wall_time
    if wall_time == wall_time:  # NaN is kept in rows, left out of the file's span
        routing.stats.widen_span(wall_time, wall_time)
    if route is not None:
        _plugin, _decoder, metadata = route
        image = value.image
        decoded = images.image_rows(payload[start:end], image.width, image.height)
        routing.emit(tag, "images", decoded, metadata, event.step, offset, 0, wall_time)
    return True


def split_image(payload: bytes) -> tuple[bytes, int, int] | None:
    """The Event without its image's bytes, and where they lie in ``payload``, when its
    summary holds exactly one value and that value exactly one ``Summary.Image`` with one
    ``encoded_image_string``; None otherwise (or for bytes that are not such an Event)."""
    path: list[_Field] = []
    start, end = 0, len(payload)
    for number, oneof in (
        (wire.EVENT_SUMMARY, _EVENT_ONEOF),
        (wire.SUMMARY_VALUE, None),
        (wire.VALUE_IMAGE, _VALUE_ONEOF),
        (wire.IMAGE_ENCODED, None),
    ):
        fields = _fields(payload, start, end)
        if fields is None:
            return None
        wanted = [field for field in fields if field[0] == number]
        others = {field[0] for field in fields if field[0] != number}
        if len(wanted) != 1 or wanted[0][1] != wire.LENGTH_DELIMITED or (oneof and others & oneof):
            return None
        if number == wire.SUMMARY_VALUE and others:
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
                wire.varint_bytes(len(inner)),
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
        key, key_end = wire.varint(buf, i, end)
        wire_type = key & 7
        content_start = key_end
        if wire_type == wire.VARINT:
            _value, content_end = wire.varint(buf, key_end, end)
        elif wire_type == wire.FIXED64:
            content_end = key_end + 8
        elif wire_type == wire.FIXED32:
            content_end = key_end + 4
        elif wire_type == wire.LENGTH_DELIMITED:
            length, content_start = wire.varint(buf, key_end, end)
            content_end = content_start + length
        else:
            return None
        if content_end > end or key >> 3 == 0:
            return None
        fields.append((key >> 3, wire_type, (i, key_end, content_start, content_end)))
        i = content_end
    return fields
