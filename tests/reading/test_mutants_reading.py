"""Reading-side behaviour that mutants showed no test pinned down (docs/mutation.md).

Every file and expectation is built here from the TFRecord format and TensorBoard's own
protos and CRC, never from what the converter produced.
"""

from __future__ import annotations

import io
import random
import sqlite3
import struct
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc
from tensorboard.plugins.audio import metadata as audio_metadata
from tensorboard.plugins.audio.plugin_data_pb2 import AudioPluginData
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert import convert
from tbconvert.filters import Selection
from tbconvert.plugins._tensorproto import DT_FLOAT
from tbconvert.reading import chunks, events, resync
from tbconvert.reading.chunks import FileTask, ReadSettings, read_file
from tbconvert.reading.decoder import EventDecoder
from tbconvert.reading.fast import block_scalars
from tbconvert.reading.records import RecordReader, open_event_file
from tests.reading import test_block_scalars
from tests.support.decoding import decode_file, exact
from tests.support.eventfiles import (
    append_events,
    scalar_metadata,
    shape1_scalar,
    simple_value,
    summary_event,
    tensor_value,
    tf2_scalar,
    write_events,
)


def header(length: int) -> bytes:
    """A record header whose length CRC verifies (TensorBoard's masked CRC)."""
    raw = struct.pack("<Q", length)
    return raw + struct.pack("<I", tb_masked_crc(raw))


# ---------------------------------------------------------------------- lenient Event parsing


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
    events._lenient_event_class.cache_clear()
    events._string_fields.cache_clear()
    events._STRING_FIELDS.clear()
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
    events._lenient_event_class.cache_clear()
    events._string_fields.cache_clear()
    events._STRING_FIELDS.clear()
    payload = Event(wall_time=1.0, file_version="brain.Event:Q").SerializeToString()
    event, lossy = events.parse_event(payload.replace(b"Q", b"\xfe"))
    assert lossy and event.file_version == "brain.Event:\\xfe"


@pytest.mark.mutant_gap
def test_bytes_that_are_no_event_even_leniently_are_unparseable() -> None:
    with pytest.raises(events.UnparseableEvent):
        events.parse_event(b"\x0a\xff\xff\xff\xff\x0f")  # a length running past the end


# ------------------------------------------------------------------- dense resync candidates


def _dense_buffer(at: list[int], size: int, length: int = 40) -> bytes:
    """``size`` bytes of 0x01 with a header of ``length`` (CRC valid) at each offset."""
    buf = bytearray(b"\x01" * size)
    for offset in at:
        buf[offset : offset + 12] = header(length)
    return bytes(buf)


@pytest.mark.mutant_gap
def test_dense_candidates_reach_both_ends_of_the_range() -> None:
    buf = _dense_buffer([0, 100, 188], 200)
    assert list(resync.dense_candidates(buf, 0, 188)) == [0, 100, 188]
    assert list(resync.dense_candidates(buf, 100, 100)) == [100]
    assert list(resync.dense_candidates(buf, 188, 188)) == [188]
    assert list(resync.dense_candidates(buf, 101, 187)) == []


@pytest.mark.mutant_gap
def test_dense_candidates_skip_lengths_of_2_to_the_40_or_more() -> None:
    # The length CRC verifies, but a length that large is never where records resume.
    for length in (1 << 40, 1 << 48, 1 << 56):
        buf = _dense_buffer([50], 100, length)
        assert list(resync.dense_candidates(buf, 0, 88)) == [], length
    assert list(resync.dense_candidates(_dense_buffer([50], 100, (1 << 40) - 1), 0, 88)) == [50]


# ------------------------------------------------------------------------------- chunks


@pytest.mark.mutant_gap
def test_a_file_that_cannot_be_opened_is_one_last_chunk_with_the_reason(tmp_path: Path) -> None:
    task = FileTask(
        index=0,
        path=str(tmp_path / "missing" / "events.out.tfevents.1.h"),
        rel_path="missing/events.out.tfevents.1.h",
        run_path="missing",
        context="",
        size=100,
        mtime_ns=0,
        offset=40,
        stored_size=100,
        stored_digest=None,
        known_metadata={},
    )
    (chunk,) = read_file(task, ReadSettings(Selection(), 1000), {})
    assert chunk.error == "cannot read: No such file or directory"
    assert chunk.done and not chunk.torn
    assert (chunk.consumed, chunk.records, chunk.rows, chunk.damage) == (40, 0, {}, [])
    assert chunks.bytes_to_read(task, ReadSettings(Selection(), 1000)) == 60


@pytest.mark.mutant_gap
def test_a_graph_is_one_row_at_its_record_with_value_index_0(tmp_path: Path) -> None:
    graph = GraphDef(versions={"producer": 3}).SerializeToString()
    path = write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h",
        [Event(step=3, wall_time=9.5, graph_def=graph)],
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    # The graph's record is the second: after the 12-byte header, payload and CRC of the
    # file-version record.
    version = Event(wall_time=9.5, file_version="brain.Event:2").SerializeToString()
    version_record = 12 + len(version) + 4
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        rows = connection.execute(
            "SELECT s.name, s.plugin, p.step, p.record_offset, p.value_index, p.wall_time, b.data "
            "FROM tensors AS p JOIN series AS s ON s.id = p.series_id "
            "JOIN blobs AS b ON b.id = p.blob_id"
        ).fetchall()
    assert rows == [("__run_graph__", "graphs", 3, version_record, 0, 9.5, graph)]
    assert path.stat().st_size > version_record


@pytest.mark.mutant_gap
def test_dense_candidates_from_freshly_built_crc_tables() -> None:
    # The per-byte CRC tables are built once per process: build them here from scratch.
    resync._crc_tables.cache_clear()
    rnd = random.Random(5)
    buf = bytearray(rnd.choice(b"\x00\x00\x00\x01\x02\x80") for _ in range(6000))
    for offset in rnd.sample(range(0, 5980, 20), 40):
        buf[offset : offset + 12] = header(rnd.randrange(1 << 20))
    data = bytes(buf)
    expected = [
        i
        for i in range(0, len(data) - 11)
        if data[i + 5 : i + 8] == b"\x00\x00\x00"
        and tb_masked_crc(data[i : i + 8]) == struct.unpack_from("<I", data, i + 8)[0]
    ]
    assert len(expected) >= 40
    assert list(resync.dense_candidates(data, 0, len(data) - 12)) == expected


@pytest.mark.mutant_gap
def test_block_path_with_freshly_built_key_masks(tmp_path: Path) -> None:
    # The key masks are built once per process and size: build them here from scratch.
    path = test_block_scalars._protobuf_events(tmp_path / "proto")
    general, _ = decode_file(path, whole=False)
    block_scalars._key_masks.cache_clear()
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < general["reader"][1] / 2


_BLOCK_KINDS = {
    "tf2": lambda step: tf2_scalar("loss", step / 3),
    "no_shape": lambda step: tensor_value("loss", step / 3, shape=None),
    "shape1": lambda step: shape1_scalar("loss", step / 3),
    "simple_with_metadata": lambda step: simple_value("loss", step / 3, metadata=scalar_metadata()),
    "custom_metadata": lambda step: tensor_value(
        "loss",
        step / 3,
        metadata=SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars")),
    ),
    # The widest key the block path takes: 2a S 0a V 0a T, a 117-byte tag, 15 and 4 bytes.
    "widest_key": lambda step: simple_value("k" * 117, step / 3),
}


@pytest.mark.mutant_gap
@pytest.mark.parametrize("kind", sorted(_BLOCK_KINDS))
def test_each_encoding_the_block_path_reads_takes_it(tmp_path: Path, kind: str) -> None:
    # Steps up to 2**14 (varints of 1 to 3 bytes); the rows must be the general path's,
    # and all but each buffer's first records and its last ~640 bytes come from blocks.
    steps = [*range(300), *range(16000, 16300)]
    path = write_events(
        tmp_path / "run" / "events.out.tfevents.1.h",
        [summary_event(step, 1e9 + step, [_BLOCK_KINDS[kind](step)]) for step in steps],
    )
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert len(general["rows"]["scalars"]) == len(steps)
    assert decoded_in_general < 40


def _framed_offsets(events: list[Event], start: int) -> list[int]:
    """Where each event's record starts when framed after ``start`` bytes."""
    offsets = []
    for event in events:
        offsets.append(start)
        start += 12 + len(event.SerializeToString()) + 4
    return offsets


@pytest.mark.mutant_gap
def test_block_rows_read_from_the_middle_of_a_file_keep_their_file_offsets(
    tmp_path: Path,
) -> None:
    first = [summary_event(s, 1e9 + s, [tf2_scalar("loss", s / 2)]) for s in range(400)]
    more = [summary_event(s, 1e9 + s, [tf2_scalar("loss", s / 2)]) for s in range(400, 800)]
    path = write_events(tmp_path / "logs" / "run" / "events.out.tfevents.1.h", first)
    convert(tmp_path / "logs", tmp_path / "s.db")
    appended_at = path.stat().st_size
    append_events(path, more)
    convert(tmp_path / "logs", tmp_path / "s.db")  # reads from the stored offset on
    version = Event(wall_time=1e9, file_version="brain.Event:2")
    expected = list(enumerate(_framed_offsets([version, *first], 0)[1:])) + list(
        zip(range(400, 800), _framed_offsets(more, appended_at), strict=True)
    )
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        found = connection.execute("SELECT step, record_offset FROM scalars ORDER BY step")
        assert found.fetchall() == expected


@pytest.mark.mutant_gap
def test_a_files_wall_time_span_covers_records_in_any_order(tmp_path: Path) -> None:
    # Enough single-scalar records for the NumPy block path (which leaves the last ~640 bytes
    # of a buffer to the general path), the extremes in the middle.
    times = [5e8 + 1000 - step for step in range(300)]
    times[100], times[150] = 4e8, 7e8
    events = [summary_event(step, t, [simple_value("loss", 0.5)]) for step, t in enumerate(times)]
    write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h", events, version_wall_time=6e8
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        span = connection.execute("SELECT first_wall_time, last_wall_time FROM event_files")
        assert span.fetchall() == [(4e8, 7e8)]


def _raw_events(path: Path, payloads: list[bytes]) -> Path:
    """An event file of raw Event payloads after a file-version record, framed as TFRecords."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(Event(wall_time=1e9, file_version="brain.Event:2").SerializeToString())
        for payload in payloads:
            writer.write(payload)
    return path


@pytest.mark.mutant_gap
def test_a_record_whose_first_field_is_not_the_wall_time_is_read_as_protobuf_reads_it(
    tmp_path: Path,
) -> None:
    # Two records start with an unknown fixed64 field (tag 0x79, field 15) where the others
    # have their wall time (0x09): protobuf reads wall time 0 and the same step and value.
    # One has step 100, the other step 0 (not written, so its summary is where a record
    # without a step has it).
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    payloads[100] = b"\x79" + payloads[100][1:]
    payloads[200] = (
        b"\x79" + summary_event(0, 5e8, [simple_value("loss", 7.0)]).SerializeToString()[1:]
    )
    odd = [Event.FromString(payloads[at]) for at in (100, 200)]
    assert [(e.wall_time, e.step, e.summary.value[0].simple_value) for e in odd] == [
        (0.0, 100, 50.0),
        (0.0, 0, 7.0),
    ]
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < 40  # the block path did read the others
    walls = {(row[1], row[6]): row[5] for row in general["rows"]["scalars"]}
    assert walls[100, exact(50.0)] == walls[0, exact(7.0)] == exact(0.0)
    assert walls[99, exact(49.5)] == exact(1e9 + 99)


@pytest.mark.mutant_gap
def test_a_record_whose_field_after_the_step_is_no_summary_is_no_scalar(tmp_path: Path) -> None:
    # Record 100's summary field (0x2a, field 5) is a graph_def (0x22, field 4) of the same
    # bytes: protobuf reads a graph, which is kept as one, not as a scalar.
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    at = payloads[100].index(b"\x2a\x0d")
    payloads[100] = payloads[100][:at] + b"\x22" + payloads[100][at + 1 :]
    assert Event.FromString(payloads[100]).WhichOneof("what") == "graph_def"
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert whole == general
    assert decoded_in_general < 40
    assert 100 not in [row[1] for row in general["rows"]["scalars"]]


@pytest.mark.mutant_gap
def test_the_first_series_of_a_file_is_known_to_the_block_path_like_any_other(
    tmp_path: Path,
) -> None:
    # The file's series are numbered from 0.  Two files of the same record sizes: in one,
    # "loss" is series 0; in the other, the first record's tag is "lost" (series 0), so
    # "loss" is series 1.  The general path decodes what the block path cannot: once per key
    # (the other file has one key more) and the records near the buffer's end, which lie
    # alike.  A known key must stay known in every block, whatever its series number.
    def decoded(first_tag: str) -> int:
        events = [
            summary_event(step, 1e9 + step, [simple_value(first_tag if step == 0 else "loss", 1)])
            for step in range(1000)
        ]
        path = write_events(tmp_path / first_tag / "events.out.tfevents.1.h", events)
        general, _ = decode_file(path, whole=False)
        whole, decoded_in_general = decode_file(path, whole=True, size=100)
        assert whole == general
        return decoded_in_general

    assert decoded("lost") == decoded("loss") + 1


@pytest.mark.mutant_gap
def test_the_decoder_counts_the_events_that_are_not_summaries(tmp_path: Path) -> None:
    log = Event(wall_time=2.0, step=1)
    log.log_message.message = "hello"
    session = Event(wall_time=3.0, step=2)
    session.session_log.status = 1
    empty_summary = Event(wall_time=5.0, step=4, summary=Summary())  # nothing to keep or count
    assert empty_summary.SerializeToString().endswith(b"\x2a\x00")
    events = [
        log,
        summary_event(3, 4.0, [simple_value("loss", 1.0)]),
        log,
        session,
        Event(),
        empty_summary,
    ]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    decoded, _ = decode_file(path, whole=False)
    # Session logs and log messages are kept (as tensors), the rest only counted.
    assert decoded["stats"][4] == {"file_version": 1, "empty": 1}
    assert decoded["stats"][0] == {"scalars": 1, "log_message": 2, "session_log": 1}


def _voice_clip(step: int, data: bytes, metadata: bool) -> Event:
    """One clip of the audio tag "voice"; with ``metadata``, the tag's WAV metadata too."""
    tensor = TensorProto(dtype=7, string_val=[data, b"label"])
    tensor.tensor_shape.dim.add(size=1)
    tensor.tensor_shape.dim.add(size=2)
    value = Summary.Value(tag="voice", tensor=tensor)
    if metadata:
        value.metadata.CopyFrom(
            audio_metadata.create_summary_metadata("voice", "", AudioPluginData.WAV)
        )
    return summary_event(step, 1e9 + step, [value])


@pytest.mark.mutant_gap
def test_later_audio_without_metadata_is_decoded_with_the_tags_first_metadata(
    tmp_path: Path,
) -> None:
    # TF2 writes a tag's metadata with its first value only.  The first one declares WAV, so
    # every clip of the tag is audio/wav, even bytes that do not start like a WAV file.
    write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h",
        [_voice_clip(1, b"pcm one", True), _voice_clip(2, b"pcm two", False)],
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        found = connection.execute("SELECT step, content_type FROM audio ORDER BY step")
        assert found.fetchall() == [(1, "audio/wav"), (2, "audio/wav")]


@pytest.mark.mutant_gap
def test_a_tags_values_before_its_first_metadata_do_not_fix_its_plugin(tmp_path: Path) -> None:
    # The decoder remembers how a tag's values are decoded only once the tag's first metadata
    # is known: a clip before it is a plain tensor, the clips from it on are audio.
    write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h",
        [
            _voice_clip(1, b"pcm one", False),
            _voice_clip(2, b"pcm two", True),
            _voice_clip(3, b"pcm three", False),
            _voice_clip(4, b"pcm four", False),
        ],
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        audio = connection.execute("SELECT step, content_type FROM audio ORDER BY step")
        assert audio.fetchall() == [(2, "audio/wav"), (3, "audio/wav"), (4, "audio/wav")]
        tensors = connection.execute(
            "SELECT t.step, s.plugin FROM tensors t JOIN series s ON s.id = t.series_id"
        )
        assert tensors.fetchall() == [(1, "tensor")]


@pytest.mark.mutant_gap
def test_a_tags_first_metadata_on_another_kind_of_value_fixes_its_plugin_anew(
    tmp_path: Path,
) -> None:
    # A clip as a tensor with no metadata is a plain tensor; then a TF1 Summary.Audio of the
    # same tag brings the audio metadata, and from then on the tag's tensors are audio too.
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "
    tf1_clip = Summary.Value(
        tag="voice",
        audio=Summary.Audio(sample_rate=8000, encoded_audio_string=wav, content_type="audio/wav"),
    )
    tf1_clip.metadata.CopyFrom(
        audio_metadata.create_summary_metadata("voice", "", AudioPluginData.WAV)
    )
    write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h",
        [
            _voice_clip(1, b"pcm one", False),
            summary_event(2, 1e9 + 2, [tf1_clip]),
            _voice_clip(3, b"pcm three", False),
        ],
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        audio = connection.execute("SELECT step FROM audio ORDER BY step")
        assert audio.fetchall() == [(2,), (3,)]
        tensors = connection.execute("SELECT step FROM tensors")
        assert tensors.fetchall() == [(1,)]


@pytest.mark.mutant_gap
def test_the_general_path_decodes_a_known_scalar_without_its_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tag's first simple_value or 4-byte DT_FLOAT tensor goes through its plugin's decoder;
    # later ones of the same tag are appended directly (the converter's hot loop).
    events = [
        summary_event(
            step,
            1e9 + step,
            [simple_value("loss", step / 2), tf2_scalar("acc", step / 4), tf2_scalar("lr", 1)],
        )
        for step in range(50)
    ]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    plugin_decoded: list[str] = []
    decode_value = EventDecoder._decode_value

    def counted(self: EventDecoder, value: Any, *args: Any) -> None:
        plugin_decoded.append(value.tag)
        decode_value(self, value, *args)

    monkeypatch.setattr(EventDecoder, "_decode_value", counted)
    decoded, general = decode_file(path, whole=False)
    assert general == 51 and len(decoded["rows"]["scalars"]) == 150
    assert plugin_decoded == ["loss", "acc", "lr"]


@pytest.mark.mutant_gap
def test_a_buffer_of_exactly_the_minimum_size_is_read_in_blocks(tmp_path: Path) -> None:
    # 64 records of 48-byte payloads: 64 * (12 + 48 + 4) = 4096 bytes, the least the block
    # path takes (records._WHOLE_MIN_BYTES).
    path = tmp_path / "records"
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for number in range(64):
            writer.write(bytes([number]) * 48)
    assert path.stat().st_size == 4096
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        items = list(reader.blocks(8192))
    assert [type(item).__name__ for item in items] == ["Block"]
    assert [bytes(payload) for _offset, payload in items[0].pairs()] == [
        bytes([number]) * 48 for number in range(64)
    ]


@pytest.mark.mutant_gap
def test_a_negative_zero_wall_time_next_to_a_zero_one_gives_the_general_paths_span(
    tmp_path: Path,
) -> None:
    # Record 100's wall time is -0.0 (written: it is not proto3's default 0.0), record 101's
    # is 0.0 (omitted).  The general path keeps the first of equal extremes, so the file's
    # first wall time is -0.0; the block path must leave such records to it.
    walls = [10.0 + step for step in range(300)]
    walls[100], walls[101] = -0.0, 0.0
    events = [
        summary_event(step, wall, [simple_value("loss", 1.0)]) for step, wall in enumerate(walls)
    ]
    assert events[100].SerializeToString()[:1] == b"\x09"  # the -0.0 is written
    assert events[101].SerializeToString()[:1] == b"\x10"  # the 0.0 is not
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events, version_wall_time=5)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert general["stats"][7] == exact(-0.0)  # first_wall_time, by its bits
    assert whole == general
    assert decoded_in_general < 40


@pytest.mark.mutant_gap
def test_records_the_template_rejects_are_never_learnt_as_one_key(tmp_path: Path) -> None:
    # Values that also carry a node_name (field 7 after the value) are not the block path's
    # template, though protobuf reads their tag, step and value as usual.  The rejected
    # records all have the same (empty) key, so none may be learnt: "acc" would then be
    # packed into "loss"'s series.
    def value(step: int) -> Summary.Value:
        if step in (150, 160):
            tag = "loss" if step == 150 else "acc"
            return Summary.Value(tag=tag, simple_value=step / 2, node_name="n")
        return simple_value("loss", step / 2)

    events = [summary_event(step, 1e9 + step, [value(step)]) for step in range(300)]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=100)
    assert [series[:2] for series in general["series"]] == [("loss", "scalars"), ("acc", "scalars")]
    assert [row[0] for row in general["rows"]["scalars"]].count(1) == 1  # one point of acc
    assert whole == general
    assert decoded_in_general < 40


def _length_whose_header_reads_as_a_template_start() -> int:
    """A record length whose header, read from its first byte as an Event, starts like the
    block path's template: length byte 0x09 (a wall-time field), then in the CRC a step
    field (0x10) holding a two-byte varint, so that the template's summary field begins at
    the record's payload."""
    for k in range(1, 1 << 16):
        raw = struct.pack("<Q", 9 + 256 * k)
        crc = struct.pack("<I", tb_masked_crc(raw))
        if crc[1] == 0x10 and crc[2] >= 0x80 and crc[3] < 0x80:
            return 9 + 256 * k
    raise AssertionError("no such length")


@pytest.mark.mutant_gap
def test_records_near_the_buffers_end_are_read_at_their_own_place(tmp_path: Path) -> None:
    # The block path leaves a buffer's last ~640 bytes to the general path, and reads nothing
    # for them.  Here the buffer's first record is built so that its header and payload, read
    # as a template record, give exactly the key of the file's "loss" scalars (27-byte Events
    # with two-byte steps): records read there instead of at their own place would be packed
    # with the first record's bytes.
    length = _length_whose_header_reads_as_a_template_start()
    steps = range(200, 600)
    loss = [summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]) for step in steps]
    summary_field = loss[0].SerializeToString()[12:]  # 2a 0d 0a 0b 0a 04 loss 15 <value>
    assert len(loss[0].SerializeToString()) == 27 and summary_field[:2] == b"\x2a\x0d"
    first = summary_field + b"\x00" * (length - len(summary_field))  # no Event: unparseable
    path = tmp_path / "run" / "events.out.tfevents.1.h"
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(first)
        for event in loss:
            writer.write(event.SerializeToString())
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert [row[1] for row in general["rows"]["scalars"]] == list(steps)
    assert whole == general
    assert decoded_in_general < 40


@pytest.mark.mutant_gap
def test_two_tags_whose_keys_hash_alike_stay_apart(tmp_path: Path) -> None:
    # A key's hash is linear in its 8-byte words (word i times (i + 1) * a constant), so
    # adding 3 to word 1 and taking 2 from word 2 keeps it.  Word 0 of these keys holds the
    # width, the lengths and the tag's first two bytes; words 1 and 2 the tag's bytes 2 to 9
    # and 10 to 17.  Tags whose byte 2 is 3 more and byte 10 2 less hash alike, and must
    # still be two series.
    first = "ab" + "a" + "cdefghi" + "c" + "1234567"
    second = "ab" + "d" + "cdefghi" + "a" + "1234567"
    assert len(first) == len(second) == 18
    events = [
        summary_event(step, 1e9 + step, [simple_value(first if step % 2 else second, step / 2)])
        for step in range(300)
    ]
    path = write_events(tmp_path / "run" / "events.out.tfevents.1.h", events)
    general, _ = decode_file(path, whole=False)
    whole, _ = decode_file(path, whole=True, size=100)
    assert [series[0] for series in general["series"]] == [second, first]
    assert whole == general


@pytest.mark.mutant_gap
def test_a_stream_without_a_file_descriptor_is_read_to_its_end(tmp_path: Path) -> None:
    # An in-memory stream has no fileno(): its size is found by seeking to its end, and the
    # reader then starts where the stream stood.  That size is a snapshot, as a file's is: a
    # record appended after the reader was made is not read.
    stream = io.BytesIO()
    writer = RecordWriter(stream)
    payloads = [bytes([number]) * (number + 1) for number in range(20)]
    for payload in payloads:
        writer.write(payload)
    size = stream.tell()
    stream.seek(0)
    reader = RecordReader(stream)
    stream.seek(0, io.SEEK_END)
    writer.write(b"appended later")
    stream.seek(0)
    assert [payload for batch in reader.batches() for _offset, payload in batch] == payloads
    assert reader.consumed == size and not reader.torn


_F32 = struct.Struct("<f")


def _crafted_tensor_event(step: int, decoy: float, content: float) -> bytes:
    """A TF2-style scalar of tag "w" whose DT_FLOAT tensor holds, between its dtype and its
    4-byte tensor_content, 4 bytes that protobuf keeps as an unknown field (version_number,
    an int32, with the wire type of bytes): ``decoy`` where a template record has its value,
    ``content`` the value protobuf reads."""
    tensor = b"\x08\x01\x1a\x04" + _F32.pack(decoy) + b"\x22\x04" + _F32.pack(content)
    value = b"\x0a\x01w\x42" + bytes([len(tensor)]) + tensor
    summary = b"\x0a" + bytes([len(value)]) + value
    assert step < 128  # a one-byte varint
    return (
        (b"\x09" + struct.pack("<d", 1e9 + step) + b"\x10" + bytes([step]) + b"\x2a")
        + bytes([len(summary)])
        + summary
    )


@pytest.mark.mutant_gap
def test_a_tensor_with_a_field_before_its_content_gives_protobufs_value(tmp_path: Path) -> None:
    # The block path reads a tensor's value at a fixed place, so it must refuse one whose
    # tensor_content is not there.  The first "w" carries the scalars metadata; the first
    # crafted one reads alike both ways (so the block path could learn its key); the later
    # ones hold another number where a template record has its value.
    first = summary_event(0, 1e9, [tf2_scalar("w", 1.5)]).SerializeToString()
    crafted = [_crafted_tensor_event(1, 1.5, 1.5)]
    crafted += [_crafted_tensor_event(step, float(step), 1.5) for step in range(2, 100)]
    read = Event.FromString(crafted[5]).summary.value[0].tensor
    assert (read.dtype, read.tensor_content) == (DT_FLOAT, _F32.pack(1.5))
    filler = [
        summary_event(step, 1e9 + step, [simple_value("loss", 0.5)]).SerializeToString()
        for step in range(100, 300)
    ]
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", [first, *crafted, *filler])
    general, _ = decode_file(path, whole=False)
    whole, _ = decode_file(path, whole=True, size=8192)
    assert [row[6] for row in general["rows"]["scalars"] if row[1] < 100] == [exact(1.5)] * 100
    assert whole == general


@pytest.mark.mutant_gap
def test_a_step_varint_with_a_zero_continuation_byte_is_read_whole(tmp_path: Path) -> None:
    # Record 100's step varint is 80 followed by the bytes of a "loss" summary field: a
    # varint byte 0x80 carries no bits but does continue, so protobuf reads the step on into
    # the summary's bytes and no scalar; it is no record of the block path's template.
    payloads = [
        summary_event(step, 1e9 + step, [simple_value("loss", step / 2)]).SerializeToString()
        for step in range(300)
    ]
    summary_field = payloads[1][payloads[1].index(b"\x2a\x0d") :]
    payloads[100] = b"\x09" + struct.pack("<d", 1e9 + 100) + b"\x10\x80" + summary_field
    path = _raw_events(tmp_path / "run" / "events.out.tfevents.1.h", payloads)
    general, _ = decode_file(path, whole=False)
    whole, decoded_in_general = decode_file(path, whole=True, size=8192)
    assert len(general["rows"]["scalars"]) == 299
    assert whole == general
    assert decoded_in_general < 40


@pytest.mark.mutant_gap
def test_audio_appended_after_its_first_metadata_is_decoded_with_the_stored_metadata(
    tmp_path: Path,
) -> None:
    # The second conversion reads on from the stored offset, past the tag's metadata: the
    # store's copy of it (plugin content included) says WAV, so the new clip is audio/wav
    # too, though its bytes do not start like a WAV file.
    path = write_events(
        tmp_path / "logs" / "run" / "events.out.tfevents.1.h", [_voice_clip(1, b"pcm one", True)]
    )
    convert(tmp_path / "logs", tmp_path / "s.db")
    append_events(path, [_voice_clip(2, b"pcm two", False)])
    convert(tmp_path / "logs", tmp_path / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        found = connection.execute("SELECT step, content_type FROM audio ORDER BY step")
        assert found.fetchall() == [(1, "audio/wav"), (2, "audio/wav")]


@pytest.mark.mutant_gap
def test_a_moved_file_read_in_several_chunks_is_one_move(tmp_path: Path) -> None:
    # --flat makes group/run/train a run of its own: its file moves there, and is read again
    # from its start in three chunks of 10 points; only the first one says so.
    logs, store = tmp_path / "logs", tmp_path / "s.db"
    write_events(
        logs / "group" / "run" / "train" / "events.out.tfevents.1.h",
        [summary_event(step, 1e9 + step, [simple_value("loss", 0.5)]) for step in range(30)],
    )
    convert(logs, store, chunk_points=10)
    flat = convert(logs, store, flat=True, chunk_points=10)
    assert (flat.files_moved, flat.files_read, flat.records_read) == (1, 1, 31)
    assert flat.points == {"scalars": 30}


@pytest.mark.mutant_gap
def test_known_good_lengths_keep_a_clean_file_on_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records of 60 different lengths: each new length's CRC is checked on the fast path and
    # remembered; the record-by-record path is only asked to start and at the end.
    path = tmp_path / "records"
    payloads = [bytes([number]) * (number + 1) for number in range(60)]
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for payload in payloads:
            writer.write(payload)
    slow_calls: list[int] = []
    slow = RecordReader._slow

    def counted(self: RecordReader, pos: int) -> int | None:
        slow_calls.append(pos)
        return slow(self, pos)

    monkeypatch.setattr(RecordReader, "_slow", counted)
    with open_event_file(str(path)) as f:
        reader = RecordReader(f, block_size=8 << 20)
        read = [payload for batch in reader.batches(1000) for _offset, payload in batch]
    assert read == payloads
    assert slow_calls == [0, path.stat().st_size]  # to fill the buffer, and at its end
