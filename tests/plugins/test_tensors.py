"""The generic path, end to end (design §5: pr_curves, custom_scalars, mesh, graphs and unknown
plugins are kept as dtype, shape, raw bytes, plugin name and metadata content; so are the
session logs and log messages of TF1 writers: nothing is dropped silently).

tensorboardX writes what it can for real; graph events, session logs, log messages and an
unknown plugin are hand-built (``add_graph`` needs torch, the others TensorFlow).  Every
stored byte string is parsed back and compared with what the test wrote, never with the
converter's own idea of it.
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.event_pb2 import Event, LogMessage, SessionLog, TaggedRunMetadata
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.meta_graph_pb2 import MetaGraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData

from tbconvert import convert
from tests.support.eventfiles import event_file_name, summary_event, write_events
from tests.support.snapshots import StoreFactory, connect, rows

W0 = 1_795_000_000.0
ROW_SQL = (
    "SELECT plugin, step, wall_time, dtype, shape, data FROM v_tensors "
    "WHERE run_path = ? AND tag = ? ORDER BY step"
)
LAYOUT = {
    "losses": {
        "loss": ["Multiline", ["loss/train", "loss/val"]],
        "band": ["Margin", ["acc", "acc_low", "acc_high"]],
    }
}
MY_CONTENT = b"\x08\x01my plugin's own config"
GRAPH = GraphDef(
    node=[NodeDef(name="x", op="Const"), NodeDef(name="y", op="Identity", input=["x"])]
)
RUN_METADATA = RunMetadata(
    function_graphs=[RunMetadata.FunctionGraphs(pre_optimization_graph=GRAPH)]
)
META_GRAPH = MetaGraphDef(graph_def=GRAPH)
# What a TF1 session writes when it starts again and when it saves a checkpoint.
SESSION_START = SessionLog(status=SessionLog.START, msg="restarted")
SESSION_CHECKPOINT = SessionLog(
    status=SessionLog.CHECKPOINT, checkpoint_path="/ckpt/model.ckpt-7", msg="saved"
)
LOG_MESSAGE = LogMessage(level=LogMessage.WARN, message="learning rate clipped")


class Row(NamedTuple):
    plugin: str
    step: int
    wall_time: float
    dtype: str
    shape: list[int]
    data: bytes


class Converted(NamedTuple):
    logdir: Path
    store: str
    summary: Any
    written: dict[str, Summary.Value]  # tag -> value as read back from the tensorboardX file


def int_tensor(array: np.ndarray, *, packed: bool) -> TensorProto:
    tensor = TensorProto(dtype=3)  # DT_INT32
    for size in array.shape:
        tensor.tensor_shape.dim.add(size=size)
    if packed:
        tensor.tensor_content = array.astype("<i4").tobytes()
    else:
        tensor.int_val.extend(int(x) for x in array.reshape(-1))
    return tensor


MY_ARRAYS = [
    np.arange(6, dtype=np.int32).reshape(2, 3) - 3,
    np.array([[2**31 - 1, -(2**31), 0], [7, 8, 9]], dtype=np.int32),
]
VERTICES = np.array([[[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.1, 0.2, 1.5]]], dtype=np.float32)
FACES = np.array([[[0, 1, 2], [0, 2, 3]]], dtype=np.int32)
COLORS = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [9, 9, 9]]], dtype=np.uint8)
STRINGS = [b"a\x00b", "é".encode()]


def write_logdir(logdir: Path) -> dict[str, Summary.Value]:
    from tensorboardX import SummaryWriter

    tbx_dir = logdir / "tbx"
    with SummaryWriter(logdir=str(tbx_dir), flush_secs=3600) as writer:
        writer.add_pr_curve(
            "pr",
            np.array([0, 1, 1, 0, 1]),
            np.array([0.1, 0.9, 0.6, 0.4, 0.3]),
            global_step=1,
            num_thresholds=7,
            walltime=W0 + 1,
        )
        writer.add_custom_scalars(LAYOUT)
        writer.add_mesh(
            "mesh", VERTICES, colors=COLORS, faces=FACES, global_step=3, walltime=W0 + 3
        )
    (path,) = tbx_dir.glob("*tfevents*")
    written = {
        value.tag: value
        for record in RawEventFileLoader(str(path)).Load()
        for value in Event.FromString(record).summary.value
    }

    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="my_plugin", content=MY_CONTENT)
    )
    strings = TensorProto(dtype=7, string_val=STRINGS)
    strings.tensor_shape.dim.add(size=2)
    events = [
        # TF1 style: metadata on the first occurrence only.
        summary_event(
            0,
            W0,
            [
                Summary.Value(
                    tag="mine", metadata=metadata, tensor=int_tensor(MY_ARRAYS[0], packed=True)
                )
            ],
        ),
        summary_event(
            1, W0 + 1, [Summary.Value(tag="mine", tensor=int_tensor(MY_ARRAYS[1], packed=False))]
        ),
        summary_event(0, W0 + 2, [Summary.Value(tag="words", metadata=metadata, tensor=strings)]),
        Event(step=0, wall_time=W0 + 3, graph_def=GRAPH.SerializeToString()),
        Event(step=0, wall_time=W0 + 4, meta_graph_def=META_GRAPH.SerializeToString()),
        Event(
            step=5,
            wall_time=W0 + 5,
            tagged_run_metadata=TaggedRunMetadata(
                tag="step1", run_metadata=RUN_METADATA.SerializeToString()
            ),
        ),
        Event(step=6, wall_time=W0 + 6, session_log=SESSION_START),
        Event(step=7, wall_time=W0 + 7, session_log=SESSION_CHECKPOINT),
        Event(step=8, wall_time=W0 + 8, log_message=LOG_MESSAGE),
    ]
    write_events(logdir / "hand" / event_file_name(W0), events)
    return written


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> Converted:
    root = tmp_path_factory.mktemp("tensors")
    written = write_logdir(root / "logs")
    store = make_store(root)
    return Converted(root / "logs", store, convert(root / "logs", store, progress=False), written)


@pytest.fixture(scope="module")
def conn(converted: Converted) -> Any:
    connection = connect(converted.store)
    yield connection
    connection.close()


def tensor_rows(conn: Any, run_path: str, tag: str) -> list[Row]:
    return [
        Row(p, s, w, d, json.loads(shape), data)
        for p, s, w, d, shape, data in conn.execute(ROW_SQL, (run_path, tag))
    ]


def plugin_content(conn: Any, run_path: str, tag: str) -> bytes | None:
    ((content,),) = rows(
        conn,
        "SELECT s.plugin_content FROM series s JOIN runs r "
        "ON r.id = s.run_id WHERE r.run_path = ? AND s.name = ?",
        (run_path, tag),
    )
    return content


def test_pr_curve_float32_6xN(conn: Any, converted: Converted) -> None:
    (row,) = tensor_rows(conn, "tbx", "pr")
    assert row[:5] == ("pr_curves", 1, W0 + 1, "float32", [6, 7])
    expected = np.array(converted.written["pr"].tensor.float_val, dtype=np.float32).reshape(6, 7)
    assert row.data == expected.astype("<f4").tobytes()
    curve = np.frombuffer(row.data, dtype="<f4").reshape(6, 7)
    np.testing.assert_array_equal(curve, expected)
    assert curve[0, 0] == 3 and curve[1, 0] == 2  # TP, FP at threshold 0: every label
    assert plugin_content(conn, "tbx", "pr") == converted.written["pr"].metadata.plugin_data.content


def test_custom_scalars_layout(conn: Any) -> None:
    (row,) = tensor_rows(conn, "tbx", "custom_scalars__config__")
    assert row[:5] == ("custom_scalars", 0, row.wall_time, "string", [])
    expected = layout_pb2.Layout(
        category=[
            layout_pb2.Category(
                title="losses",
                chart=[
                    layout_pb2.Chart(
                        title="loss",
                        multiline=layout_pb2.MultilineChartContent(tag=["loss/train", "loss/val"]),
                    ),
                    layout_pb2.Chart(
                        title="band",
                        margin=layout_pb2.MarginChartContent(
                            series=[
                                layout_pb2.MarginChartContent.Series(
                                    value="acc", lower="acc_low", upper="acc_high"
                                )
                            ]
                        ),
                    ),
                ],
            )
        ]
    )
    assert layout_pb2.Layout.FromString(row.data) == expected


def test_mesh_three_values_with_their_shapes(conn: Any, converted: Converted) -> None:
    for index, array in ((1, VERTICES), (2, FACES), (3, COLORS)):
        tag = f"mesh_{index}"
        (row,) = tensor_rows(conn, "tbx", tag)
        assert row[:5] == ("mesh", 3, W0 + 3, "float32", list(array.shape))
        assert row.data == array.astype("<f4").tobytes()
        content = MeshPluginData.FromString(plugin_content(conn, "tbx", tag))
        assert (content.name, content.content_type) == ("mesh", index)
        assert list(content.shape) == list(array.shape)
    assert converted.summary.points["mesh"] == 3


def test_unknown_plugin_int32_exact(conn: Any) -> None:
    got = tensor_rows(conn, "hand", "mine")
    assert [row[:5] for row in got] == [
        ("my_plugin", 0, W0, "int32", [2, 3]),
        ("my_plugin", 1, W0 + 1, "int32", [2, 3]),
    ]
    assert [row.data for row in got] == [a.astype("<i4").tobytes() for a in MY_ARRAYS]
    assert plugin_content(conn, "hand", "mine") == MY_CONTENT


def test_unknown_plugin_string_tensor_keeps_the_tensorproto(conn: Any) -> None:
    (row,) = tensor_rows(conn, "hand", "words")
    assert row[:5] == ("my_plugin", 0, W0 + 2, "string_tensorproto", [2])
    tensor = TensorProto.FromString(row.data)
    assert list(tensor.string_val) == STRINGS
    assert [dim.size for dim in tensor.tensor_shape.dim] == [2]


@pytest.mark.parametrize(
    "tag, plugin, step, wall_time, data",
    [
        ("__run_graph__", "graphs", 0, W0 + 3, GRAPH.SerializeToString()),
        ("__meta_graph_def__", "graphs", 0, W0 + 4, META_GRAPH.SerializeToString()),
        ("step1", "graph_tagged_run_metadata", 5, W0 + 5, RUN_METADATA.SerializeToString()),
    ],
)
def test_graph_events_kept_as_bytes(
    conn: Any, tag: str, plugin: str, step: int, wall_time: float, data: bytes
) -> None:
    (row,) = tensor_rows(conn, "hand", tag)
    assert (row.plugin, row.step, row.wall_time, row.shape, row.data) == (
        plugin,
        step,
        wall_time,
        [],
        data,
    )


def test_session_logs_and_log_messages_kept_as_their_protos(conn: Any) -> None:
    sessions = tensor_rows(conn, "hand", "__session_log__")
    assert [row[:5] for row in sessions] == [
        ("session_log", 6, W0 + 6, "session_log", []),
        ("session_log", 7, W0 + 7, "session_log", []),
    ]
    assert [SessionLog.FromString(row.data) for row in sessions] == [
        SESSION_START,
        SESSION_CHECKPOINT,
    ]
    (message,) = tensor_rows(conn, "hand", "__log_message__")
    assert message[:5] == ("log_message", 8, W0 + 8, "log_message", [])
    assert LogMessage.FromString(message.data) == LOG_MESSAGE


def test_summary_counts(converted: Converted) -> None:
    summary = converted.summary
    assert summary.skipped == {} and summary.undecodable == {}
    assert {plugin: summary.points[plugin] for plugin in summary.points} == {
        "pr_curves": 1,
        "custom_scalars": 1,
        "mesh": 3,
        "my_plugin": 3,
        "graphs": 2,
        "graph_tagged_run_metadata": 1,
        "session_log": 2,
        "log_message": 1,
    }


def test_second_conversion_adds_nothing(
    converted: Converted, tmp_path: Path, make_store: StoreFactory
) -> None:
    store = make_store(tmp_path, "again")
    convert(converted.logdir, store, progress=False)
    second = convert(converted.logdir, store, progress=False, full=True)
    assert second.total_points == 14
    with closing(connect(store)) as again:
        assert rows(again, "SELECT count(*) FROM v_tensors") == [(14,)]
        assert rows(again, "SELECT count(*) FROM blobs") == [(14,)]


def test_plugins_filter_skips_and_names_everything(converted: Converted, store: str) -> None:
    summary = convert(converted.logdir, store, plugins=["scalars"], progress=False)
    assert summary.to_dict()["skipped"] == {
        "pr_curves": {"pr": 1},
        "custom_scalars": {"custom_scalars__config__": 1},
        "mesh": {"mesh_1": 1, "mesh_2": 1, "mesh_3": 1},
        "my_plugin": {"mine": 2, "words": 1},
        "graphs": {"__run_graph__": 1, "__meta_graph_def__": 1},
        "graph_tagged_run_metadata": {"step1": 1},
        "session_log": {"__session_log__": 2},
        "log_message": {"__log_message__": 1},
    }
    assert summary.total_points == 0
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT count(*) FROM v_tensors") == [(0,)]
        assert rows(conn, "SELECT count(*) FROM series") == [(0,)]


# --------------------------------------------------------------------------- edge cases


def test_unknown_plugin_metadata_only_value_is_kept(tmp_path: Path, store: str) -> None:
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="my_plugin", content=MY_CONTENT)
    )
    write_events(
        tmp_path / "logs" / "run" / event_file_name(W0),
        [summary_event(0, W0, [Summary.Value(tag="meta_only", metadata=metadata)])],
    )
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.skipped == {} and summary.points["my_plugin"] == 1
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT plugin_content FROM series") == [(MY_CONTENT,)]
        ((plugin, data),) = rows(conn, "SELECT plugin, data FROM v_tensors")
    assert plugin == "my_plugin" and SummaryMetadata.FromString(data) == metadata


def _uint32() -> TensorProto:
    return TensorProto(dtype=22, uint32_val=[7, 2**32 - 1])  # DT_UINT32


def _bfloat16() -> TensorProto:
    return TensorProto(dtype=14, half_val=[0x3F80])  # DT_BFLOAT16 1.0 as its bit pattern


@pytest.mark.parametrize("make", [_uint32, _bfloat16], ids=["uint32_val", "bfloat16_half_val"])
def test_tensor_numpy_cannot_read_is_still_kept(make: Any, tmp_path: Path, store: str) -> None:
    tensor = make()
    tensor.tensor_shape.dim.add(size=len(tensor.uint32_val) or len(tensor.half_val))
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="my_plugin"))
    write_events(
        tmp_path / "logs" / "run" / event_file_name(W0),
        [summary_event(0, W0, [Summary.Value(tag="t", metadata=metadata, tensor=tensor)])],
    )
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.skipped == {} and summary.points["my_plugin"] == 1
    with closing(connect(store)) as conn:
        ((dtype, shape, data),) = rows(conn, "SELECT dtype, shape, data FROM v_tensors")
    assert (dtype, json.loads(shape)) == ("tensorproto", [tensor.tensor_shape.dim[0].size])
    assert TensorProto.FromString(data) == tensor
