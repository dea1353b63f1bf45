"""Tensors that NumPy cannot hold, or that ask for absurd sizes, are kept raw, never fatal."""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from tbconvert import convert
from tests.support.eventfiles import event_file_name, summary_event, write_events
from tests.support.snapshots import view_rows

W0 = 1_700_000_000.0
SCALARS = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))


def _convert(tmp_path: Path, store: str, values: list[Summary.Value]):
    logdir = tmp_path / "logs"
    write_events(
        logdir / "run" / event_file_name(W0),
        [summary_event(step, W0 + step, [value]) for step, value in enumerate(values)],
    )
    summary = convert(logdir, store, progress=False)
    return summary, view_rows(store)


def test_bfloat16_scalars_decode_from_half_val_and_content(tmp_path: Path, store: str) -> None:
    bits = 0x3FC0  # bfloat16 1.5
    values = [
        Summary.Value(tag="b", metadata=SCALARS, tensor=TensorProto(dtype=14, half_val=[bits])),
        Summary.Value(
            tag="b", tensor=TensorProto(dtype=14, tensor_content=struct.pack("<H", 0xC000))
        ),
    ]
    summary, rows = _convert(tmp_path, store, values)
    assert summary.points["scalars"] == 2 and not summary.undecodable
    assert [row[4:] for row in rows["v_scalars"]] == [(0, W0, 1.5), (1, W0 + 1, -2.0)]


def test_absurd_shape_with_one_value_is_kept_raw(tmp_path: Path, store: str) -> None:
    tensor = TensorProto(dtype=1, float_val=[1.0])
    tensor.tensor_shape.dim.add(size=1 << 40)
    summary, rows = _convert(
        tmp_path, store, [Summary.Value(tag="huge", metadata=SCALARS, tensor=tensor)]
    )
    assert summary.exit_code == 0
    assert summary.undecodable == {"scalars": {"huge": 1}}
    ((_, _, _, tag, plugin, _, _, dtype, shape, data),) = rows["v_tensors"]
    assert (tag, plugin, dtype, shape) == ("huge", "scalars", "tensorproto", f"[{1 << 40}]")
    assert TensorProto.FromString(data) == tensor
