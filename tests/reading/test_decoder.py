"""The general path (``tbconvert.reading.decoder.EventDecoder``): what it makes of records that
are not a plain scalar, and how a tag's first metadata fixes how its later values decode.

Graphs are one row at their record; events that are not summaries are counted (session logs
and log messages are kept as tensors); a tag's values are routed by the first metadata seen
for it, in this file or stored by an earlier conversion; and a tag's later scalars skip the
plugin call.  Whether the block path reads the same as this one is ``test_block_scalars.py``'s
question.  Every file and expectation is built here from TensorBoard's own protos.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.audio import metadata as audio_metadata
from tensorboard.plugins.audio.plugin_data_pb2 import AudioPluginData

from tbconvert import convert
from tbconvert.plugins import scalars as scalars_plugin
from tests.support.decoding import decode_file
from tests.support.eventfiles import (
    append_events,
    simple_value,
    summary_event,
    tf2_scalar,
    write_events,
)


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
    decode = scalars_plugin.decode

    def counted(value: Any, metadata: Any) -> Any:
        plugin_decoded.append(value.tag)
        return decode(value, metadata)

    monkeypatch.setattr(scalars_plugin, "decode", counted)
    decoded, general = decode_file(path, whole=False)
    assert general == 51 and len(decoded["rows"]["scalars"]) == 150
    assert plugin_decoded == ["loss", "acc", "lr"]


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
