"""Test-only writers of REAL TensorBoard event files.

Two writers, never TensorFlow:

* tensorboardX's own ``SummaryWriter`` (what torch/tensorboardX users produce): see
  :func:`write_tbx_scalars`.  Its file names carry no pid, so two writers in one directory
  within the same second need distinct ``filename_suffix`` values.
* hand-built ``tensorboard.compat.proto`` Events framed by tensorboard's own
  ``RecordWriter``, for the encodings tensorboardX cannot produce (TF1, TF2, torch
  ``new_style``, integer and half tensors...): see :func:`write_events` and the value builders.

The value builders take the number as the writer's caller would pass it; what the reader must
get back is for the test to work out (float32 widening, exact float64, ...), never for this
module.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.summary.writer.record_writer import RecordWriter

__all__ = [
    "DTYPES",
    "FILE_VERSION",
    "ScalarPoint",
    "append_events",
    "double_content_scalar",
    "event_file_name",
    "file_version_event",
    "half_scalar",
    "int_scalar",
    "scalar_events",
    "scalar_metadata",
    "shape1_scalar",
    "simple_value",
    "strip_repeated_metadata",
    "summary_event",
    "tensor_value",
    "tf2_scalar",
    "torch_double_scalar",
    "torch_new_style_scalar",
    "write_events",
    "write_tbx_run",
    "write_tbx_scalars",
]

FILE_VERSION = "brain.Event:2"
DEFAULT_HOST = "testhost"

# dtype name -> (TensorProto DataType enum, little-endian NumPy dtype, repeated *_val field)
DTYPES: dict[str, tuple[int, str, str]] = {
    "float32": (1, "<f4", "float_val"),  # DT_FLOAT
    "float64": (2, "<f8", "double_val"),  # DT_DOUBLE
    "int32": (3, "<i4", "int_val"),  # DT_INT32
    "int64": (9, "<i8", "int64_val"),  # DT_INT64
    "float16": (19, "<f2", "half_val"),  # DT_HALF: half_val holds the uint16 bit pattern
}


class ScalarPoint(NamedTuple):
    """One scalar as a writer is asked to log it: (tag, step, wall_time, value)."""

    tag: str
    step: int
    wall_time: float
    value: float


# --------------------------------------------------------------------------- file level


def event_file_name(wall_time: float, host: str = DEFAULT_HOST, suffix: str = "") -> str:
    """A TF-style event file name: ``events.out.tfevents.<%010d secs>.<host><suffix>``."""
    return f"events.out.tfevents.{int(wall_time):010d}.{host}{suffix}"


def file_version_event(wall_time: float) -> Event:
    """The ``file_version = "brain.Event:2"`` record every modern writer starts a file with."""
    return Event(wall_time=wall_time, file_version=FILE_VERSION)


def summary_event(step: int, wall_time: float, values: Iterable[Summary.Value]) -> Event:
    """An Event carrying one or several (TF1 ``merge_all``) summary values."""
    return Event(step=step, wall_time=wall_time, summary=Summary(value=list(values)))


def scalar_events(tag: str, steps: range, base: float = 1e9) -> list[Event]:
    """One TF1 scalar of ``tag`` a step: ``step / 2`` at wall time ``base + step``."""
    return [summary_event(step, base + step, [simple_value(tag, step / 2)]) for step in steps]


def write_events(
    path: str | Path,
    events: Iterable[Event],
    *,
    file_version: bool = True,
    version_wall_time: float | None = None,
) -> Path:
    """Write ``events`` into a new event file at ``path`` (parents created), framed as TFRecords.

    Args:
        path: The file to create (truncated if it exists).
        events: The Events, written in order.
        file_version: Start with a ``brain.Event:2`` record, as real writers do.
        version_wall_time: Its wall time; default: the first event's, else 0.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    events = list(events)
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        if file_version:
            if version_wall_time is None:
                version_wall_time = events[0].wall_time if events else 0.0
            writer.write(file_version_event(version_wall_time).SerializeToString())
        for event in events:
            writer.write(event.SerializeToString())
    return path


def append_events(path: str | Path, events: Iterable[Event]) -> Path:
    """Append Events to an existing event file, as a live writer flushing later would."""
    path = Path(path)
    with path.open("ab") as handle:
        writer = RecordWriter(handle)
        for event in events:
            writer.write(event.SerializeToString())
    return path


def strip_repeated_metadata(events: Iterable[Event]) -> list[Event]:
    """Copies of ``events`` as a TF1 ``FileWriter.add_summary`` writes them: the metadata of a
    value is dropped when this writer has already seen its tag (first occurrence keeps it)."""
    seen: set[str] = set()
    result = []
    for event in events:
        copy = Event()
        copy.CopyFrom(event)
        for value in copy.summary.value:
            if value.tag in seen:
                value.ClearField("metadata")
            seen.add(value.tag)
        result.append(copy)
    return result


# --------------------------------------------------------------------------- value builders


def scalar_metadata() -> SummaryMetadata:
    """``plugin_data.plugin_name = "scalars"`` with empty content (TF2, torch new_style)."""
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))


def simple_value(
    tag: str, value: float, *, metadata: SummaryMetadata | None = None
) -> Summary.Value:
    """TF1 / torch / tensorboardX ``simple_value`` (float32 on the wire), no metadata by default."""
    result = Summary.Value(tag=tag, simple_value=value)
    if metadata is not None:
        result.metadata.CopyFrom(metadata)
    return result


def tensor_value(
    tag: str,
    value: Any,
    *,
    dtype: str = "float32",
    field: str = "content",
    shape: Sequence[int] | None = (),
    metadata: SummaryMetadata | None = None,
    with_metadata: bool = True,
) -> Summary.Value:
    """A one-element numeric tensor value, in any encoding.

    Args:
        tag: The tag.
        value: The number as the caller passes it to the writer (cast to ``dtype``).
        dtype: A key of :data:`DTYPES`.
        field: ``"content"`` for packed little-endian ``tensor_content``, ``"val"`` for the
            repeated ``*_val`` field (``half_val`` gets the float16 bit pattern).
        shape: ``None``: no ``tensor_shape`` field at all (torch); ``()``: the field present
            with no dims (rank 0, TF2); ``(1,)``: one dim of size 1.
        metadata: The value's metadata (default: :func:`scalar_metadata`).
        with_metadata: False to write no metadata at all.
    """
    enum, np_dtype, val_field = DTYPES[dtype]
    tensor = TensorProto(dtype=enum)
    if shape is not None:
        tensor.tensor_shape.SetInParent()  # present even when it has no dims
        for size in shape:
            tensor.tensor_shape.dim.add(size=size)
    number = np.array(value, dtype=np_dtype)
    if field == "content":
        tensor.tensor_content = number.tobytes()
    elif field == "val":
        if dtype == "float16":
            tensor.half_val.append(int(number.view(np.uint16)))
        else:
            getattr(tensor, val_field).append(number.item())
    else:
        raise ValueError(f"unknown field {field!r}")
    result = Summary.Value(tag=tag, tensor=tensor)
    if with_metadata:
        result.metadata.CopyFrom(metadata if metadata is not None else scalar_metadata())
    return result


def tf2_scalar(tag: str, value: float) -> Summary.Value:
    """TF2 ``tf.summary.scalar``: DT_FLOAT, rank 0 (shape present, no dims), 4 bytes in
    ``tensor_content``, metadata ``scalars``."""
    return tensor_value(tag, value, dtype="float32", field="content", shape=())


def torch_new_style_scalar(tag: str, value: float) -> Summary.Value:
    """torch ``add_scalar(new_style=True)``: DT_FLOAT ``float_val=[v]``, no shape, md scalars."""
    return tensor_value(tag, value, dtype="float32", field="val", shape=None)


def torch_double_scalar(tag: str, value: float) -> Summary.Value:
    """torch ``add_scalar(new_style=True, double_precision=True)``: DT_DOUBLE ``double_val``."""
    return tensor_value(tag, value, dtype="float64", field="val", shape=None)


def double_content_scalar(tag: str, value: float) -> Summary.Value:
    """DT_DOUBLE rank 0 with 8 bytes in ``tensor_content`` (custom ``tf.summary.write``)."""
    return tensor_value(tag, value, dtype="float64", field="content", shape=())


def shape1_scalar(
    tag: str, value: float, dtype: str = "float32", field: str = "content"
) -> Summary.Value:
    """A scalar stored as a shape ``[1]`` tensor."""
    return tensor_value(tag, value, dtype=dtype, field=field, shape=(1,))


def int_scalar(tag: str, value: int, dtype: str = "int64", field: str = "val") -> Summary.Value:
    """DT_INT32 (``int_val``) or DT_INT64 (``int64_val``) scalar, or either in tensor_content."""
    if dtype not in ("int32", "int64"):
        raise ValueError(dtype)
    return tensor_value(tag, value, dtype=dtype, field=field, shape=())


def half_scalar(tag: str, value: float, field: str = "val") -> Summary.Value:
    """DT_HALF scalar: ``half_val`` holds the uint16 bit pattern, or 2 bytes of tensor_content."""
    return tensor_value(tag, value, dtype="float16", field=field, shape=())


# --------------------------------------------------------------------------- tensorboardX


def write_tbx_run(logdir: Path, run: str, steps: int = 20) -> None:
    """The run ``logdir/run`` as tensorboardX writes it: ``loss`` = 1 / (step + 1) for
    ``steps`` steps, at the writer's own wall times."""
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(logdir / run)) as writer:
        for step in range(steps):
            writer.add_scalar("loss", 1.0 / (step + 1), step)


def write_tbx_scalars(
    logdir: str | Path,
    points: Iterable[ScalarPoint | tuple[str, int | None, float, float]],
    *,
    suffix: str = "",
) -> Path:
    """Log ``points`` with tensorboardX's real ``SummaryWriter.add_scalar`` (simple_value).

    Each point is ``(tag, step, wall_time, value)``; ``step=None`` lets the writer default it
    (to 0).  Tags should already be clean (tensorboardX rewrites characters outside
    ``[-/\\w.]``).

    Returns:
        The event file the writer created.
    """
    from tensorboardX import SummaryWriter

    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    before = set(logdir.iterdir())
    with SummaryWriter(logdir=str(logdir), filename_suffix=suffix, flush_secs=3600) as writer:
        for tag, step, wall_time, value in points:
            writer.add_scalar(tag, value, step, walltime=wall_time)
    created = [p for p in set(logdir.iterdir()) - before if "tfevents" in p.name]
    if len(created) != 1:
        raise RuntimeError(
            f"expected one new event file in {logdir}, got {created} "
            "(pass a distinct suffix for each writer)"
        )
    return created[0]


def wav_clip() -> bytes:
    """A short mono 16-bit WAV (tensorboardX's ``add_audio`` needs soundfile; a clip made here
    goes into a ``Summary.Audio`` by hand)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(np.arange(-400, 400, 10, dtype="<i2").tobytes())
    return out.getvalue()
