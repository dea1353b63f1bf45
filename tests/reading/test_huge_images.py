"""The huge-image path (``tbconvert.reading.huge_images``) against the general path: every
record decodes to the same rows, blobs, series and counts either way, and the records it
does not take (another plugin's tag, filtered, more than one value, strings that are not
UTF-8) are left whole to the general path.

The size threshold is lowered to 0 here, so that small records stand in for huge ones.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.image import metadata as image_metadata

from tbconvert.filters import Selection
from tbconvert.reading import huge_images
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.routing import Routing
from tests.support.eventfiles import simple_value


def png_like(size: int, seed: int) -> bytes:
    """Bytes that begin as a valid PNG header (IHDR, then IDAT), then noise."""
    ihdr = struct.pack(">IIBBBBB", 7, 5, 8, 2, 0, 0, 0)
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
    head += struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + struct.pack(">I", size) + b"IDAT"
    return head + bytes((seed * 31 + n) % 251 for n in range(size))


def image_event(
    tag: str = "samples",
    data: bytes = b"",
    *,
    step: int = 1,
    wall_time: float = 10.0,
    metadata: SummaryMetadata | None = None,
    node_name: str = "",
    width: int = 7,
    height: int = 5,
) -> Event:
    image = Summary.Image(encoded_image_string=data or png_like(300, step), width=width)
    image.height = height
    value = Summary.Value(tag=tag, node_name=node_name, image=image)
    if metadata is not None:
        value.metadata.CopyFrom(metadata)
    return Event(step=step, wall_time=wall_time, summary=Summary(value=[value]))


def text_metadata() -> SummaryMetadata:
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))


def decode(payloads: list[bytes], huge: bool, **selection: Any) -> tuple[Any, ...]:
    """Everything a decoder made of ``payloads``, each fed as a batch of its own."""
    decoder = EventDecoder(Selection(**selection), huge_record_bytes=0 if huge else 1 << 62)
    for offset, payload in enumerate(payloads):
        decoder.feed([(offset * 1000, payload)])
    rows, blobs = decoder.take()
    return rows, blobs, decoder.definitions, decoder.stats, decoder.metadata()


IMAGES_META = image_metadata.create_summary_metadata("samples", "")
CASES = {
    "plain": [image_event(step=1), image_event(step=2)],
    "metadata": [image_event(metadata=IMAGES_META), image_event(step=2)],
    "node name": [image_event(tag="", node_name="legacy")],
    "not a PNG": [image_event(data=b"\x00not an image" * 20, width=3, height=4)],
    "no writer size": [image_event(data=b"junk" * 50, width=0, height=0)],
    "NaN wall time": [image_event(wall_time=math.nan), image_event(step=2, wall_time=3.0)],
    # Summary.Image values go to the images plugin whatever their metadata says.
    "another plugin's metadata": [image_event(metadata=text_metadata()), image_event(step=2)],
    "after scalars": [
        Event(step=0, wall_time=1.0, summary=Summary(value=[simple_value("samples", 1.0)])),
        image_event(),
    ],
}
# Records the huge path must leave to the general one.
LEFT_WHOLE = {
    "two values": [
        Event(
            step=1,
            summary=Summary(
                value=[*image_event().summary.value, *image_event(tag="b").summary.value]
            ),
        )
    ],
    "not an image": [Event(step=1, summary=Summary(value=[simple_value("loss", 1.0)]))],
    "a graph": [Event(step=1, graph_def=b"\x0a\x00")],
}


def payloads_of(events: list[Event]) -> list[bytes]:
    return [event.SerializeToString() for event in events]


@pytest.mark.parametrize("name", [*CASES, *LEFT_WHOLE])
@pytest.mark.parametrize(
    "selection",
    [{}, {"plugins": frozenset({"scalars"})}, {"exclude_tags": ("samples",)}],
    ids=["all", "scalars only", "tag excluded"],
)
def test_decodes_as_the_general_path(name: str, selection: dict[str, Any]) -> None:
    payloads = payloads_of({**CASES, **LEFT_WHOLE}[name])
    # By repr: NaN equals nothing, not even itself.
    assert repr(decode(payloads, True, **selection)) == repr(decode(payloads, False, **selection))


@pytest.mark.parametrize("name", list(CASES))
def test_takes_one_image_events_and_leaves_the_rest(name: str) -> None:
    """Not passing by construction: the huge path really decodes these (and not the others)."""
    routing = Routing(Selection())
    taken = [huge_images.feed(routing, 0, payload, 0) for payload in payloads_of(CASES[name])]
    assert taken[-1]
    for events in LEFT_WHOLE.values():
        payload = payloads_of(events)[0]
        assert not huge_images.feed(Routing(Selection()), 0, payload, 0)


def test_strings_that_are_not_utf8_are_left_to_the_general_path() -> None:
    raw = image_event(tag="bad!").SerializeToString().replace(b"bad!", b"bad\xff")
    assert not huge_images.feed(Routing(Selection()), 0, raw, 0)
    assert repr(decode([raw], True)) == repr(decode([raw], False))


def test_the_skeleton_is_the_event_without_its_image() -> None:
    data = png_like(5000, 3)
    event = image_event(data=data, metadata=IMAGES_META)
    payload = event.SerializeToString()
    found = huge_images.split_image(payload)
    assert found is not None
    skeleton, start, end = found
    assert payload[start:end] == data
    event.summary.value[0].image.ClearField("encoded_image_string")
    assert Event.FromString(skeleton) == event
    assert len(skeleton) < 200


@pytest.mark.parametrize("cut", [1, 5, 20, 60])
def test_truncated_or_garbled_bytes_are_not_split(cut: int) -> None:
    payload = image_event().SerializeToString()
    assert huge_images.split_image(payload[:cut]) is None
    assert huge_images.split_image(b"\xff" * cut) is None
