"""Audio, end to end (design §5 audio, §6 v_audio): clips written the way TF1, torch and TF2 write
them come back byte for byte (compared by sha256), with sample rate, channels, frame count,
content type, label, idx, step and wall_time.

The WAVs are built with the stdlib ``wave`` module, so the expected header values are the
ones the test chose; tensorboardX's ``add_audio`` needs ``soundfile``, which the project does
not depend on, so its ``Summary.Audio`` (1 channel, WAV, ``audio/wav``) is built by hand.
"""

from __future__ import annotations

import hashlib
import io
import wave
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.audio import metadata as audio_metadata
from tensorboard.plugins.audio.plugin_data_pb2 import AudioPluginData

from tbconvert import convert
from tests.support.eventfiles import event_file_name, summary_event, write_events
from tests.support.snapshots import connect, rows

W0 = 1_795_000_000.0
WAV = AudioPluginData.WAV
# (tag, step, idx) -> (sha256, sample_rate, num_channels, length_frames, content_type, label,
#                      wall_time)
Key = tuple[str, int, int]
Row = tuple[str, float | None, int | None, int | None, str | None, str | None, float]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wav(seed: int, rate: int, channels: int, frames: int) -> bytes:
    samples = np.random.default_rng(seed).integers(-3000, 3000, frames * channels, dtype="<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(channels)
        clip.setsampwidth(2)
        clip.setframerate(rate)
        clip.writeframes(samples.tobytes())
    return out.getvalue()


def audio_value(
    tag: str,
    data: bytes,
    rate: float = 0.0,
    channels: int = 0,
    frames: int = 0,
    content_type: str = "",
) -> Summary.Value:
    audio = Summary.Audio(
        encoded_audio_string=data,
        sample_rate=rate,
        num_channels=channels,
        length_frames=frames,
        content_type=content_type,
    )
    return Summary.Value(tag=tag, audio=audio)


def tf2_audio(
    tag: str,
    clips: list[tuple[bytes, ...]],
    encoding: int | None = WAV,
    shape: tuple[int, ...] | None = None,
) -> Summary.Value:
    tensor = TensorProto(dtype=7, string_val=[item for clip in clips for item in clip])
    for size in shape if shape is not None else (len(clips), 2):
        tensor.tensor_shape.dim.add(size=size)
    value = Summary.Value(tag=tag, tensor=tensor)
    if encoding is not None:
        value.metadata.CopyFrom(audio_metadata.create_summary_metadata(tag, "", encoding))
    return value


def stored(store: str) -> dict[Key, Row]:
    with closing(connect(store)) as conn:
        view = rows(conn, "SELECT tag, step, idx, data, sample_rate, wall_time FROM v_audio")
        extra = rows(
            conn,
            "SELECT s.name, a.step, a.idx, a.num_channels, a.length_frames, "
            "a.content_type, a.label FROM audio AS a "
            "JOIN series AS s ON s.id = a.series_id",
        )
    details = {(t, s, i): rest for t, s, i, *rest in extra}
    assert len(view) == len(details) == len(extra), "one row per (tag, step, idx)"
    return {
        (t, s, i): (sha(d), rate, *details[(t, s, i)], wall_time)
        for t, s, i, d, rate, wall_time in view
    }


def convert_ok(logdir: Path, store: str) -> Any:
    summary = convert(logdir, store, progress=False)
    assert summary.exit_code == 0
    return summary


def test_summary_audio_keeps_writer_fields(tmp_path: Path, store: str) -> None:
    mono, stereo, opaque = wav(1, 16_000, 1, 800), wav(2, 44_100, 2, 441), b"OggS not a wav"
    events = [
        summary_event(
            step,
            W0 + step / 2,
            [
                audio_value("torch", mono, 16_000.0, 1, 800, "audio/wav"),
                audio_value("unset_fields", stereo),  # proto3 zeros: the WAV header fills them in
                audio_value("ogg", opaque, 22_050.0, 1, 10, "audio/ogg"),
            ],
        )
        for step in range(3)
    ]
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    summary = convert_ok(tmp_path / "logs", store)
    assert summary.to_dict()["undecodable"] == {}
    expected = {}
    for step in range(3):
        wall_time = W0 + step / 2
        expected[("torch", step, 0)] = (sha(mono), 16_000.0, 1, 800, "audio/wav", None, wall_time)
        expected[("unset_fields", step, 0)] = (
            sha(stereo),
            44_100.0,
            2,
            441,
            "audio/wav",
            None,
            wall_time,
        )
        expected[("ogg", step, 0)] = (sha(opaque), 22_050.0, 1, 10, "audio/ogg", None, wall_time)
    assert stored(store) == expected


def test_tf2_audio_tensors_with_labels(tmp_path: Path, store: str) -> None:
    steps = [0, 3, 7]
    clips = {
        step: [wav(10 + step, 8_000, 1, 100 + step), wav(20 + step, 22_050, 2, 50)]
        for step in steps
    }
    labels = [b"", "caf\u00e9 \u266a".encode()]
    events = [
        summary_event(
            step,
            W0 + step,
            [
                tf2_audio("every", list(zip(clips[step], labels, strict=False))),
                tf2_audio(
                    "first_only",
                    list(zip(clips[step], labels, strict=False)),
                    WAV if n == 0 else None,
                ),
            ],
        )
        for n, step in enumerate(steps)
    ]
    events.append(summary_event(8, W0 + 8, [tf2_audio("every", [])]))  # k = 0: no rows
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    summary = convert_ok(tmp_path / "logs", store)
    assert summary.to_dict()["undecodable"] == {}
    expected = {}
    for tag in ("every", "first_only"):
        for step in steps:
            first, second = clips[step]
            expected[(tag, step, 0)] = (
                sha(first),
                8_000.0,
                1,
                100 + step,
                "audio/wav",
                "",
                W0 + step,
            )
            expected[(tag, step, 1)] = (
                sha(second),
                22_050.0,
                2,
                50,
                "audio/wav",
                "caf\u00e9 \u266a",
                W0 + step,
            )
    assert stored(store) == expected
    with closing(connect(store)) as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 2 * len(steps)
        plugins = rows(conn, "SELECT DISTINCT plugin FROM series")
    assert plugins == [("audio",)]


def test_unusual_clips_are_stored_never_fatal(tmp_path: Path, store: str) -> None:
    good = wav(5, 16_000, 1, 64)
    broken_wav = good[:12] + b"\xff" * 30  # RIFF....WAVE, then garbage
    events = [
        summary_event(
            1,
            W0,
            [
                tf2_audio("declared_wav", [(broken_wav, b"\xffbad utf-8")]),
                tf2_audio(
                    "unknown_encoding", [(b"raw pcm?", b"x"), (good, b"y")], AudioPluginData.UNKNOWN
                ),
                tf2_audio("clips_only", [(good,)], shape=(1,)),
            ],
        )
    ]
    write_events(tmp_path / "logs" / event_file_name(W0), events)
    summary = convert_ok(tmp_path / "logs", store)
    assert summary.to_dict()["undecodable"] == {}
    assert stored(store) == {
        ("declared_wav", 1, 0): (
            sha(broken_wav),
            None,
            None,
            None,
            "audio/wav",
            "\ufffdbad utf-8",
            W0,
        ),
        ("unknown_encoding", 1, 0): (sha(b"raw pcm?"), None, None, None, None, "x", W0),
        ("unknown_encoding", 1, 1): (sha(good), 16_000.0, 1, 64, "audio/wav", "y", W0),
        ("clips_only", 1, 0): (sha(good), 16_000.0, 1, 64, "audio/wav", None, W0),
    }


def test_malformed_audio_tensor_is_kept_raw_and_counted(tmp_path: Path, store: str) -> None:
    value = tf2_audio("odd", [(b"a", b"b", b"c")], shape=(1, 3))
    write_events(tmp_path / "logs" / event_file_name(W0), [summary_event(0, W0, [value])])
    summary = convert_ok(tmp_path / "logs", store)
    assert summary.to_dict()["undecodable"] == {"audio": {"odd": 1}}
    with closing(connect(store)) as conn:
        assert conn.execute("SELECT count(*) FROM audio").fetchone()[0] == 0
        assert rows(conn, "SELECT plugin FROM v_tensors WHERE tag='odd'") == [("audio",)]
