"""The learnt keys (``tbconvert.reading.fast.template``): records decoded from their bytes alone
must be what protobuf makes of them, whatever the bytes.

Payloads are assembled field by field at the wire level, so that they cover what writers
make (TF1 simple_value, TF2 rank-0 tensors with and without a shape, metadata on every
record or on the first) and what they do not: lengths of two bytes, 10-byte steps, wall times
left out, a second value, stray fields after the value, other dtypes and content sizes, then
single bytes changed anywhere.  Every payload is checked two ways:

* against protobuf itself (``Event.FromString``), the independent reference: every scalar
  point stored must be the event's (tag, step, wall time, value), bit for bit;
* against the same decoder with the key cache switched off: rows, series, statistics.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event

from tbconvert.filters import Selection
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast import template
from tbconvert.reading.fast.template import LearntKeys
from tests.support.eventfiles import simple_value, summary_event, tf2_scalar

PROPERTY = settings(max_examples=150, deadline=None)
SCALARS = b"\x0a\x09\x0a\x07scalars"  # SummaryMetadata: plugin_data.plugin_name "scalars"


def varint(number: int) -> bytes:
    number &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def field(tag_byte: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return bytes([tag_byte]) + varint(len(payload)) + payload


# Few values, and the same ones as the stray fields carry: a stray field that happens to hold
# the value of the record a key is learnt from must not make that key learnt.
ONE, TWO = b"\x00\x00\x80\x3f", b"\x00\x00\x00\x40"

# One structural choice per knob; Hypothesis combines them.
ANY_TEMPLATE = st.fixed_dictionaries(
    {
        "tag": st.text(min_size=0, max_size=140),
        "kind": st.sampled_from(["simple", "tensor"]),
        "dtype": st.sampled_from([1, 1, 1, 2, 19]),  # DT_FLOAT mostly, DT_DOUBLE, DT_HALF
        "content": st.sampled_from([4, 4, 4, 8, 2]),
        "shape": st.sampled_from([None, b"", b"\x12\x02\x08\x01", b"\x12\x00"]),
        "tensor_extra": st.sampled_from([b"", b"", b"\x2a\x04" + ONE, b"\x2a\x04" + TWO]),
        "metadata": st.sampled_from([b"", SCALARS, b"\x12\x82\x01" + b"x" * 130]),
        "after_value": st.sampled_from([b"", b"", b"\x15" + TWO, b"\x15" + ONE, b"\x3a\x01n"]),
        "second_value": st.booleans(),
    }
)
# What writers make: TF1 simple_value (metadata on the first record or none), TF2 DT_FLOAT
# tensors with the scalars plugin's metadata, with or without a shape.
WRITER_TEMPLATE = st.fixed_dictionaries(
    {
        "tag": st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
        "kind": st.sampled_from(["simple", "tensor"]),
        "dtype": st.just(1),
        "content": st.just(4),
        "shape": st.sampled_from([None, b"\x12\x00", b"\x12\x02\x0a\x00"]),
        "tensor_extra": st.just(b""),
        "metadata": st.sampled_from([b"", SCALARS]),
        "after_value": st.just(b""),
        "second_value": st.just(False),
    }
)
TEMPLATE = st.one_of(WRITER_TEMPLATE, WRITER_TEMPLATE, ANY_TEMPLATE)  # two in three: writers
WALL = st.one_of(
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1.7e9]),
    st.floats(allow_nan=True, allow_infinity=True),
)
STEP = st.one_of(
    st.sampled_from([0, 1, 127, 128, 2**21, 2**62, 2**63 - 1, -1, -(2**40)]),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**21),
    st.integers(-(2**63), -1),
)
VALUE = st.sampled_from([ONE, TWO, b"\x00\x00\x40\x40"]) | st.binary(min_size=4, max_size=4)


def value_message(template: dict[str, Any], number: bytes) -> bytes:
    tag = field(0x0A, template["tag"].encode())
    if template["kind"] == "simple":
        body = b"\x15" + number[:4]
    else:
        tensor = b"\x08" + varint(template["dtype"])
        if template["shape"] is not None:
            tensor += template["shape"]
        content = (number * 2)[: template["content"]]
        tensor += field(0x22, content) + template["tensor_extra"]
        body = field(0x42, tensor)
    metadata = field(0x4A, template["metadata"]) if template["metadata"] else b""
    return tag + body + metadata + template["after_value"]


def payload(template: dict[str, Any], wall: float, step: int, number: bytes) -> bytes:
    values = field(0x0A, value_message(template, number))
    if template["second_value"]:
        values += field(0x0A, field(0x0A, b"other") + b"\x15" + number)
    head = b""
    if struct.pack("<d", wall) != bytes(8):
        head += b"\x09" + struct.pack("<d", wall)
    if step:
        head += b"\x10" + varint(step)
    return head + field(0x2A, values)


RECORDS = st.lists(
    st.tuples(
        st.integers(0, 3),
        WALL,
        STEP,
        VALUE,
        st.tuples(st.integers(0, 4), st.integers(0, 10**4), st.integers(0, 255)),
    ),
    min_size=1,
    max_size=40,
)


def build(templates: list[dict[str, Any]], draws: list[Any]) -> list[tuple[int, bytes]]:
    """(offset, payload) records: each draw picks a template and may change one byte."""
    out = []
    for number, (which, wall, step, value, change) in enumerate(draws):
        data = payload(templates[which % len(templates)], wall, step, value)
        changed, at, byte = change
        if not changed:  # one record in five has a byte changed
            data = bytearray(data)
            data[at % len(data)] = byte
            data = bytes(data)
        out.append((number * 1000, data))
    return out


def decode(records: list[tuple[int, bytes]], keys: LearntKeys | None = None) -> dict[str, Any]:
    """Everything one decoder makes of the records, fed one at a time and then all at once
    (so keys learnt from a record are used by the records after it), learning into ``keys``
    (a fresh table if None)."""
    decoder = EventDecoder(Selection(), {}, by_record=True, learnt_keys=keys)
    for record in records:
        decoder.feed([record])
    decoder.feed(records)
    rows, _blobs = decoder.take()
    return {
        "rows": {table: [exact(row) for row in table_rows] for table, table_rows in rows.items()},
        "series": [tuple(definition) for definition in decoder.definitions],
        "stats": exact(
            (
                dict(decoder.stats.points),
                dict(decoder.stats.skipped),
                decoder.stats.unparseable,
                decoder.stats.lossy_records,
                decoder.stats.first_wall_time,
                decoder.stats.last_wall_time,
            )
        ),
    }


def exact(value: Any) -> Any:
    """Floats by their bits."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, (tuple, list)):
        return type(value)(exact(item) for item in value)
    if isinstance(value, dict):
        return {key: exact(item) for key, item in value.items()}
    return value


def protobuf_points(records: list[tuple[int, bytes]]) -> Iterator[tuple[Any, ...]]:
    """(offset, value index, tag, step, wall time, value) of every value protobuf reads as one
    float: a simple_value, a DT_FLOAT tensor of 4 content bytes or of one float_val, or a
    DT_DOUBLE tensor of 8 content bytes or one double_val.  A tag's series takes the dtype of
    its first value and TensorBoard's one series per tag: a double logged under a tag first
    written as a float32 joins that series, kept as float64 (design §5)."""
    for offset, data in records:
        if not parses(data):
            continue
        event = Event.FromString(data)
        for index, value in enumerate(event.summary.value):
            kind, tensor = value.WhichOneof("value"), value.tensor
            if kind == "simple_value":
                number = value.simple_value
            elif kind == "tensor" and tensor.dtype == 1 and len(tensor.tensor_content) == 4:
                number = struct.unpack("<f", tensor.tensor_content)[0]
            elif kind == "tensor" and tensor.dtype == 1 and len(tensor.float_val) == 1:
                number = tensor.float_val[0]
            elif kind == "tensor" and tensor.dtype == 2 and len(tensor.tensor_content) == 8:
                number = struct.unpack("<d", tensor.tensor_content)[0]
            elif kind == "tensor" and tensor.dtype == 2 and len(tensor.double_val) == 1:
                number = tensor.double_val[0]
            else:
                continue
            tag = value.tag or value.node_name
            yield exact((offset, index, tag, event.step, event.wall_time, number))


def parses(data: bytes) -> bool:
    try:
        Event.FromString(data)
    except DecodeError:
        return False
    return True


@pytest.fixture
def fresh_keys() -> LearntKeys:
    return LearntKeys()


_PLAIN = {"shape": None, "tensor_extra": b"", "after_value": b"", "second_value": False}


@PROPERTY
@given(templates=st.lists(TEMPLATE, min_size=1, max_size=4), draws=RECORDS)
# Found by a random run: tag "0" first a simple_value with the scalars plugin's metadata, then
# a DT_DOUBLE tensor of 8 bytes, which joins the tag's float32 series as a float64.
@example(
    templates=[
        {"tag": "0", "kind": "simple", "dtype": 1, "content": 4, "metadata": SCALARS, **_PLAIN},
        {"tag": "0", "kind": "tensor", "dtype": 2, "content": 8, "metadata": b"", **_PLAIN},
    ],
    draws=[(0, 1.7e9, 1, ONE, (1, 0, 0)), (1, 1.7e9, 2, TWO, (1, 0, 0))],
)
def test_records_decode_as_protobuf_reads_them(templates, draws) -> None:
    records = build(templates, draws)
    keys = LearntKeys()
    with_keys = decode(records, keys)
    learnt = dict(keys.tags)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(template, "split", lambda payload: None)
        without = decode(records)
    assert with_keys == without
    # Every scalar row is a value protobuf reads at that offset and value index, bit for bit.
    tags = {number: definition[1] for number, definition in enumerate(with_keys["series"])}
    float32 = {
        number
        for number, definition in enumerate(with_keys["series"])
        if definition[3] == "float32"
    }
    stored = Counter(
        (row[3], row[4], tags[row[0]], row[1], row[5], row[6])
        for row in with_keys["rows"].get("scalars", [])
        if row[0] in float32
    )
    expected = Counter(protobuf_points(records))
    # Records protobuf refuses are read leniently (tbconvert.reading.events), not here.
    parsed = {offset for offset, data in records if parses(data)}
    assert all(
        count <= 2 * expected[point] for point, count in stored.items() if point[0] in parsed
    )
    # Keys learnt only from records protobuf reads as one scalar with the tag they name, which
    # follows the key's field and length bytes (not find(): a tag such as "\n" is also one of
    # those bytes).
    for key, (tag, _simple) in learnt.items():
        assert tag and key.startswith(tag.encode(), 6)


def test_keys_are_shared_by_decoders(fresh_keys: LearntKeys) -> None:
    """A second file's records of a learnt key skip protobuf once its series is defined."""
    records = [
        (n * 100, summary_event(n, 1.7e9 + n, [simple_value("loss", n / 4)]).SerializeToString())
        for n in range(1, 50)
    ]
    EventDecoder(Selection(), {}, by_record=True, learnt_keys=fresh_keys).feed(records)
    assert [tag for tag, _ in fresh_keys.tags.values()] == ["loss"]
    parsed = 0
    original = Event.FromString

    def counting(data: bytes) -> Any:
        nonlocal parsed
        parsed += 1
        return original(data)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tbconvert.reading.decoder.Event.FromString", counting, raising=False)
        decoder = EventDecoder(Selection(), {}, by_record=True, learnt_keys=fresh_keys)
        decoder.feed(records)
    assert parsed == 1  # the first record, which defines the series
    assert len(decoder.take()[0]["scalars"]) == 49


def test_tf2_keys_with_metadata_on_every_record(fresh_keys: LearntKeys) -> None:
    records = [
        (n * 100, summary_event(n, 1.7e9 + n, [tf2_scalar("acc", n / 8)]).SerializeToString())
        for n in range(10)
    ]
    decoder = EventDecoder(Selection(), {}, by_record=True, learnt_keys=fresh_keys)
    decoder.feed(records)
    assert [entry for entry in fresh_keys.tags.values()] == [("acc", False)]
    rows = decoder.take()[0]["scalars"]
    assert [(row[1], row[6]) for row in rows] == [(n, n / 8) for n in range(10)]


HEAD = b"\x09" + struct.pack("<d", 1.5) + b"\x10\x03"  # wall time 1.5, step 3


def value_fields(tag: bytes, fields: bytes, after: bytes = b"") -> bytes:
    """A payload of one event holding one value of these fields, then ``after`` (more values
    of its summary)."""
    return HEAD + field(0x2A, field(0x0A, field(0x0A, tag) + fields) + after)


def tensor(inner: bytes) -> bytes:
    return field(0x42, inner)


A, B = ONE, TWO
THREE = b"\x03\x00\x40\x40"  # a value whose first byte, read as a length, fits
METADATA = field(0x4A, SCALARS)
# (fields of the record a key may be learnt from, of a record with the same key but another
# value): in the first the value bytes coincide with what protobuf reads from elsewhere.
COINCIDENCES = {
    "stray simple_value after the value": (b"\x15" + A + b"\x15" + A, b"\x15" + B + b"\x15" + A),
    "stray tensor after a simple_value": (
        b"\x15" + A + tensor(b"\x08\x01\x22\x04" + A) + METADATA,
        b"\x15" + B + tensor(b"\x08\x01\x22\x04" + A) + METADATA,
    ),
    "float_val after tensor_content": (
        tensor(b"\x08\x01\x22\x04" + A + b"\x2a\x04" + A) + METADATA,
        tensor(b"\x08\x01\x22\x04" + A + b"\x2a\x04" + B) + METADATA,
    ),
    "a stray simple_value after the metadata": (
        b"\x15" + A + METADATA + b"\x15" + A,
        b"\x15" + B + METADATA + b"\x15" + A,
    ),
    "a stray value whose first byte looks like a length": (
        b"\x15" + THREE + b"\x15" + THREE,
        b"\x15" + B + b"\x15" + THREE,
    ),
    "a second shape after the content": (
        tensor(b"\x08\x01\x12\x00\x22\x04" + A + b"\x12\x06\x22\x04" + A) + METADATA,
        tensor(b"\x08\x01\x12\x00\x22\x04" + A + b"\x12\x06\x22\x04" + B) + METADATA,
    ),
    "a shape holding what looks like the content": (
        tensor(b"\x08\x01\x22\x04" + A + b"\x12\x06\x22\x04" + A) + METADATA,
        tensor(b"\x08\x01\x22\x04" + A + b"\x12\x06\x22\x04" + B) + METADATA,
    ),
}


@pytest.mark.parametrize("fields", COINCIDENCES.values(), ids=list(COINCIDENCES))
def test_a_coincidence_teaches_no_key(fields: tuple[bytes, bytes]) -> None:
    learn_from, other = (value_fields(b"loss", part) for part in fields)
    check_coincidence(learn_from, other)


STRAY_STEP = b"\x10\x09"
# The same, with the coincidence outside the one value.
OUTSIDE = {
    "a second value": (
        value_fields(b"loss", b"\x15" + A, field(0x0A, field(0x0A, b"loss") + b"\x15" + A)),
        value_fields(b"loss", b"\x15" + B, field(0x0A, field(0x0A, b"loss") + b"\x15" + A)),
    ),
    "a step after the summary": (
        HEAD + field(0x2A, field(0x0A, field(0x0A, b"loss") + b"\x15" + A)) + STRAY_STEP,
        HEAD + field(0x2A, field(0x0A, field(0x0A, b"loss") + b"\x15" + B)) + STRAY_STEP,
    ),
}


@pytest.mark.parametrize("records", OUTSIDE.values(), ids=list(OUTSIDE))
def test_only_one_value_per_event_is_a_key(records: tuple[bytes, bytes]) -> None:
    check_coincidence(*records)


def check_coincidence(learn_from: bytes, other: bytes) -> None:
    """A record of the same key as one whose value bytes coincide with what protobuf reads
    elsewhere decodes as protobuf reads it."""
    records = [(0, learn_from), (100, learn_from), (200, other)]
    with_keys = decode(records)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(template, "split", lambda payload: None)
        assert decode(records) == with_keys
    assert list(protobuf_points([(200, other)]))  # protobuf reads it as scalars
