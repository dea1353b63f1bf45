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

Which key is which tag is the same in every file, so keys are learnt once per process (from a
record the general path has just parsed with protobuf and checked against) and shared by every
decoder; each decoder still maps the tag to its own series, and only once it has defined that
series from the tag's first record, as the general path would.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from tbconvert.reading.events import Event

# The template's field bytes (protobuf's field number << 3 | wire type), named once: the
# per-record parser here and the NumPy one (``block_scalars``) read the same bytes.
WALL_TIME = 0x09  # Event.wall_time: field 1, fixed64
STEP = 0x10  # Event.step: field 2, varint
FILE_VERSION = 0x1A  # Event.file_version: field 3, length-delimited
SUMMARY = 0x2A  # Event.summary: field 5, length-delimited
SUMMARY_VALUE = 0x0A  # Summary.value: field 1, length-delimited
TAG = 0x0A  # Summary.Value.tag: field 1, length-delimited
SIMPLE_VALUE = 0x15  # Summary.Value.simple_value: field 2, fixed32
TENSOR = 0x42  # Summary.Value.tensor: field 8, length-delimited
METADATA = 0x4A  # Summary.Value.metadata: field 9, length-delimited
DTYPE_FLOAT = b"\x08\x01"  # TensorProto.dtype (field 1, varint) = DT_FLOAT
SHAPE = 0x12  # TensorProto.tensor_shape: field 2, length-delimited
CONTENT_4 = b"\x22\x04"  # TensorProto.tensor_content (field 4): 4 bytes

# Keys learnt: key -> (tag, whether a simple_value, else a DT_FLOAT tensor).  Bounded: a logdir
# with more distinct keys than this starts learning afresh.
KNOWN: dict[bytes, tuple[str, bool]] = {}
_KNOWN_MAX = 1 << 16
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
        or payload[i + 2] != SUMMARY_VALUE
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


def learn(parts: tuple[bytes, int, int], payload: bytes, simple: bool) -> None:
    """Learn the key of a record the general path has just decoded as a scalar of the
    template's kind (``simple``: a simple_value, else a DT_FLOAT tensor), if every record with
    that key would decode the same way with only wall time, step and value changed."""
    key, _step, at = parts
    if not _well_formed(key, at - (len(payload) - len(key) - 4), simple):
        return
    try:
        # Parsed again, strictly: the general path may have read it leniently (lossy), and
        # the tag is what protobuf makes of its bytes.
        event = Event.FromString(payload)
    except DecodeError:
        return
    tag = event.summary.value[0].tag
    if len(KNOWN) >= _KNOWN_MAX:
        KNOWN.clear()
    KNOWN[key] = (tag, simple)


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
