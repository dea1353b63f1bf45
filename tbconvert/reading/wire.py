"""The protobuf wire format of the messages that ``reading/`` walks by hand, named once.

Four places read Event bytes without protobuf: the single-scalar template
(``fast.template.split``, ``fast.block_template.parse``), the version header of a batch of
small files (``fast.batch``) and the huge-image walk (``huge_images.split_image``).  They
name their fields here, by the numbers of TensorBoard's ``event.proto``, ``summary.proto``
and ``tensor.proto`` (``tests/reading/test_wire.py`` checks them against the descriptors).

A field on the wire starts with a varint of ``number << 3 | wire type``; for the fields
below (numbers under 16) that is one byte, its *header*.
"""

from __future__ import annotations

# Wire types.
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5

# Event.
EVENT_WALL_TIME, EVENT_STEP, EVENT_FILE_VERSION, EVENT_SUMMARY = 1, 2, 3, 5
# Event's oneof ``what`` (file_version, graph_def, summary, log_message, session_log,
# tagged_run_metadata, meta_graph_def): the last member on the wire wins.
EVENT_WHAT = frozenset({3, 4, 5, 6, 7, 8, 9})
# Summary.
SUMMARY_VALUE = 1
# Summary.Value.
VALUE_TAG, VALUE_SIMPLE_VALUE, VALUE_IMAGE, VALUE_TENSOR, VALUE_METADATA = 1, 2, 4, 8, 9
# Summary.Value's oneof ``value`` (simple_value, obsolete_old_style_histogram, image, histo,
# audio, tensor).
VALUE_KIND = frozenset({2, 3, 4, 5, 6, 8})
# Summary.Image.
IMAGE_ENCODED = 4
# TensorProto, and the DataType (``types.proto``) of a float32 tensor.
TENSOR_DTYPE, TENSOR_SHAPE, TENSOR_CONTENT = 1, 2, 4
DT_FLOAT = 1


def header(number: int, wire_type: int) -> int:
    """The one byte a field of ``number`` (below 16) and ``wire_type`` starts with."""
    return number << 3 | wire_type


# The headers of the single-scalar template and of a version header.
WALL_TIME = header(EVENT_WALL_TIME, FIXED64)  # 0x09
STEP = header(EVENT_STEP, VARINT)  # 0x10
FILE_VERSION = header(EVENT_FILE_VERSION, LENGTH_DELIMITED)  # 0x1a
SUMMARY = header(EVENT_SUMMARY, LENGTH_DELIMITED)  # 0x2a
VALUE = header(SUMMARY_VALUE, LENGTH_DELIMITED)  # 0x0a
TAG = header(VALUE_TAG, LENGTH_DELIMITED)  # 0x0a
SIMPLE_VALUE = header(VALUE_SIMPLE_VALUE, FIXED32)  # 0x15
TENSOR = header(VALUE_TENSOR, LENGTH_DELIMITED)  # 0x42
METADATA = header(VALUE_METADATA, LENGTH_DELIMITED)  # 0x4a
SHAPE = header(TENSOR_SHAPE, LENGTH_DELIMITED)  # 0x12
# TensorProto.dtype = DT_FLOAT (1), and a tensor_content of 4 bytes, as two-byte fields.
DTYPE_FLOAT = bytes((header(TENSOR_DTYPE, VARINT), DT_FLOAT))  # 08 01
CONTENT_4 = bytes((header(TENSOR_CONTENT, LENGTH_DELIMITED), 4))  # 22 04


def varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
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


def varint_bytes(value: int) -> bytes:
    """``value`` (not negative) as a varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
