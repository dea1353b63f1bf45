"""Audio (design §5 audio): TF1 / torch / tensorboardX ``Summary.Audio`` values (one clip per
value) and TF2 ``[k, 2]`` string tensors of (encoded clip, label) rows, k clips per step.

The encoded bytes are stored unchanged and content-addressed, so a clip logged at every step
is stored once.  TF2 puts the sample rate nowhere but in the WAV itself, so rate, channels and
frame count are read from the WAV header (stdlib ``wave``, header only); a ``Summary.Audio``
keeps its writer's fields and falls back to the header only for fields left unset (0 or "").
Labels are stored exactly as written (an empty label stays ``""``); a ``Summary.Audio`` has
none (NULL).
"""

from __future__ import annotations

import io
import wave
from typing import Any

from google.protobuf.message import DecodeError
from tensorboard.plugins.audio import plugin_data_pb2

from tbconvert.plugins._tensorproto import shape_of
from tbconvert.plugins.base import Decoded, DecodeFailure, blob
from tbconvert.plugins.images import string_elements

TABLE = "audio"
WAV_CONTENT_TYPE = "audio/wav"

WavHeader = tuple[float | None, int | None, int | None]  # (sample_rate, channels, frames)


def decode(value: Any, metadata: Any) -> Decoded:
    """Decode one audio value into ``(idx, blob_id, sample_rate, num_channels, length_frames,
    content_type, label)`` rows.

    Args:
        value: A ``Summary.Value`` whose oneof is ``audio`` or a DT_STRING ``tensor``.
        metadata: The value's metadata, else the tag's first one, or None; for tensors its
            ``AudioPluginData.encoding`` says whether the clips are WAV.

    Returns:
        One row for a ``Summary.Audio``; k rows (idx 0..k-1) for a TF2 ``[k, 2]`` tensor (or a
        ``[k]`` tensor of clips without labels).

    Raises:
        DecodeFailure: the value is neither a ``Summary.Audio`` nor a string tensor of that
            shape.
    """
    kind = value.WhichOneof("value")
    if kind == "audio":
        return _summary_audio(value.audio)
    if kind == "tensor":
        return _audio_tensor(value.tensor, _declares_wav(metadata))
    raise DecodeFailure(f"audio must be a Summary.Audio or a string tensor, got {kind}")


def wav_header(data: bytes) -> WavHeader:
    """Sample rate, channel count and frame count from a WAV header, or Nones.

    Never raises: bytes that are not a WAV the ``wave`` module reads give ``(None, None,
    None)``.  Only the header chunks are parsed; the samples are not read.
    """
    if not is_wav(data):
        return None, None, None
    try:
        with wave.open(io.BytesIO(data), "rb") as clip:
            return float(clip.getframerate()), clip.getnchannels(), clip.getnframes()
    except Exception:
        return None, None, None


def is_wav(data: bytes) -> bool:
    """True when the bytes start like a RIFF/WAVE file."""
    return data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def _summary_audio(audio: Any) -> Decoded:
    data = bytes(audio.encoded_audio_string)
    rate, channels, frames = wav_header(data)
    content_type = audio.content_type or (WAV_CONTENT_TYPE if is_wav(data) else None)
    blobs: dict[str, bytes] = {}
    row = (
        0,
        blob(data, blobs),
        audio.sample_rate or rate,
        audio.num_channels or channels,
        audio.length_frames or frames,
        content_type,
        None,
    )
    return Decoded(TABLE, [row], None, blobs)


def _audio_tensor(tensor: Any, wav_declared: bool) -> Decoded:
    dims = shape_of(tensor)
    elements = string_elements(tensor)
    if len(dims) == 2 and dims[1] == 2:
        clips: list[tuple[bytes, bytes | None]] = [
            (elements[i], elements[i + 1]) for i in range(0, len(elements), 2)
        ]
    elif len(dims) == 1:  # clips only, as TensorBoard's own read side projects them
        clips = [(element, None) for element in elements]
    else:
        raise DecodeFailure(f"a TF2 audio tensor has shape [k, 2], got {dims}")
    blobs: dict[str, bytes] = {}
    rows = []
    for idx, (data, label) in enumerate(clips):
        rate, channels, frames = wav_header(data)
        content_type = WAV_CONTENT_TYPE if wav_declared or is_wav(data) else None
        text = None if label is None else label.decode("utf-8", errors="replace")
        rows.append((idx, blob(data, blobs), rate, channels, frames, content_type, text))
    return Decoded(TABLE, rows, "string", blobs)


def _declares_wav(metadata: Any) -> bool:
    """True when the metadata is the audio plugin's and its content says WAV."""
    if metadata is None or metadata.plugin_data.plugin_name != "audio":
        return False
    try:
        content = plugin_data_pb2.AudioPluginData.FromString(metadata.plugin_data.content)
    except DecodeError:
        return False
    return bool(content.encoding == plugin_data_pb2.AudioPluginData.WAV)
