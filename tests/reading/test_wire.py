"""The wire constants (``tbconvert.reading.wire``) against TensorBoard's own descriptors: the
field numbers, wire types and oneofs that the hand-written walkers read."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from tensorboard.compat.proto import types_pb2
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from tbconvert.reading import wire

_WIRE_TYPE = {
    FieldDescriptor.TYPE_DOUBLE: wire.FIXED64,
    FieldDescriptor.TYPE_INT64: wire.VARINT,
    FieldDescriptor.TYPE_ENUM: wire.VARINT,
    FieldDescriptor.TYPE_FLOAT: wire.FIXED32,
    FieldDescriptor.TYPE_STRING: wire.LENGTH_DELIMITED,
    FieldDescriptor.TYPE_BYTES: wire.LENGTH_DELIMITED,
    FieldDescriptor.TYPE_MESSAGE: wire.LENGTH_DELIMITED,
}


# (message, field, its number in wire.py, its one-byte header in wire.py or None).
FIELDS = [
    (Event, "wall_time", wire.EVENT_WALL_TIME, wire.WALL_TIME),
    (Event, "step", wire.EVENT_STEP, wire.STEP),
    (Event, "file_version", wire.EVENT_FILE_VERSION, wire.FILE_VERSION),
    (Event, "summary", wire.EVENT_SUMMARY, wire.SUMMARY),
    (Summary, "value", wire.SUMMARY_VALUE, wire.VALUE),
    (Summary.Value, "tag", wire.VALUE_TAG, wire.TAG),
    (Summary.Value, "simple_value", wire.VALUE_SIMPLE_VALUE, wire.SIMPLE_VALUE),
    (Summary.Value, "image", wire.VALUE_IMAGE, None),
    (Summary.Value, "tensor", wire.VALUE_TENSOR, wire.TENSOR),
    (Summary.Value, "metadata", wire.VALUE_METADATA, wire.METADATA),
    (Summary.Image, "encoded_image_string", wire.IMAGE_ENCODED, None),
    (TensorProto, "dtype", wire.TENSOR_DTYPE, None),
    (TensorProto, "tensor_shape", wire.TENSOR_SHAPE, wire.SHAPE),
    (TensorProto, "tensor_content", wire.TENSOR_CONTENT, None),
]


@pytest.mark.parametrize(("message", "name", "number", "header"), FIELDS)
def test_the_fields_are_tensorboards(message: Any, name: str, number: int, header: Any) -> None:
    field = message.DESCRIPTOR.fields_by_name[name]
    assert field.number == number
    if header is not None:
        assert header == field.number << 3 | _WIRE_TYPE[field.type]


def test_the_oneofs_and_the_float_dtype_are_tensorboards() -> None:
    what = Event.DESCRIPTOR.oneofs_by_name["what"].fields
    kind = Summary.Value.DESCRIPTOR.oneofs_by_name["value"].fields
    assert {field.number for field in what} == wire.EVENT_WHAT
    assert {field.number for field in kind} == wire.VALUE_KIND
    assert types_pb2.DT_FLOAT == wire.DT_FLOAT


def test_the_two_byte_fields_are_what_protobuf_writes() -> None:
    assert TensorProto(dtype=1).SerializeToString() == wire.DTYPE_FLOAT
    assert TensorProto(tensor_content=b"abcd").SerializeToString() == wire.CONTENT_4 + b"abcd"


def test_varints_round_trip() -> None:
    for value in (0, 1, 127, 128, 300, 2**35, 2**63):
        encoded = wire.varint_bytes(value)
        assert wire.varint(encoded, 0, len(encoded)) == (value, len(encoded))
    assert wire.varint(b"\x80\x80", 0, 2)[1] == 3  # runs over: past the end
