"""Lenient Event parsing (``tbconvert.reading.events``): an Event whose strings are not UTF-8
is parsed with a twin schema of bytes fields and its strings repaired, and said to be lossy;
bytes that are no Event even so are unparseable.

The Events are built here from TensorBoard's own protos, the invalid bytes put in by hand.
"""

from __future__ import annotations

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from tbconvert.reading import events


def _marked_event() -> tuple[bytes, int]:
    """An Event whose strings hold the marker byte ``Q`` at known places: a tag, metadata
    strings two messages deep, and the names of a tensor's shape dims (a repeated message)."""
    tensor = TensorProto(dtype=1, tensor_content=b"\x00\x00\x80\x3f" * 2)
    for name in ("rowsQ", "colsQ"):
        tensor.tensor_shape.dim.add(size=1, name=name)
    metadata = SummaryMetadata(
        display_name="shownQ",
        plugin_data=SummaryMetadata.PluginData(plugin_name="pluginQ"),
    )
    value = Summary.Value(tag="lossQ", tensor=tensor, metadata=metadata)
    event = Event(step=7, wall_time=2.5, summary=Summary(value=[value]))
    return event.SerializeToString(), 5


@pytest.mark.mutant_gap
def test_invalid_utf8_in_nested_and_repeated_strings_is_repaired_from_a_fresh_schema() -> None:
    # The lenient twin schema is built once per process: build it here from scratch.
    events.lenient_schema.cache_clear()
    payload, markers = _marked_event()
    assert payload.count(b"Q") == markers
    event, lossy = events.parse_event(payload.replace(b"Q", b"\xff"))
    assert lossy
    value = event.summary.value[0]
    assert value.tag == "loss\\xff"
    assert value.metadata.display_name == "shown\\xff"
    assert value.metadata.plugin_data.plugin_name == "plugin\\xff"
    assert [dim.name for dim in value.tensor.tensor_shape.dim] == ["rows\\xff", "cols\\xff"]
    assert (event.step, event.wall_time) == (7, 2.5)
    assert value.tensor.tensor_content == b"\x00\x00\x80\x3f" * 2
    # A valid Event is parsed as it is, and said to be exact.
    assert events.parse_event(payload) == (Event.FromString(payload), False)


@pytest.mark.mutant_gap
def test_an_event_level_string_is_repaired_too() -> None:
    events.lenient_schema.cache_clear()
    payload = Event(wall_time=1.0, file_version="brain.Event:Q").SerializeToString()
    event, lossy = events.parse_event(payload.replace(b"Q", b"\xfe"))
    assert lossy and event.file_version == "brain.Event:\\xfe"


@pytest.mark.mutant_gap
def test_bytes_that_are_no_event_even_leniently_are_unparseable() -> None:
    with pytest.raises(events.UnparseableEvent):
        events.parse_event(b"\x0a\xff\xff\xff\xff\x0f")  # a length running past the end
