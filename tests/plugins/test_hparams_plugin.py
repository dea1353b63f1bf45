"""HParams, end to end (design §5 hparams, reference §2.5, §4 items 2, 16, 21).

Every writer's layout is written for real (tensorboardX ``add_hparams``) or by hand with
tensorboard's own protos (torch, TF2), converted, and compared with what was written: each
``session_start_info`` becomes typed ``v_params`` rows of the (run, context) where it was
written; ``experiment`` and ``session_end_info`` are kept byte for byte in ``v_tensors``.
"""

from __future__ import annotations

import math
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.plugins.hparams import summary_v2 as hp

from tbconvert import convert
from tbconvert.plugins import hparams
from tbconvert.plugins.base import DecodeFailure
from tests.support.eventfiles import event_file_name, summary_event, tf2_scalar, write_events
from tests.support.snapshots import StoreFactory, connect, rows

W0 = 1_795_000_000.0
EXP, START, END = (
    hp_metadata.EXPERIMENT_TAG,
    hp_metadata.SESSION_START_INFO_TAG,
    hp_metadata.SESSION_END_INFO_TAG,
)
HPARAMS = {"lr": 0.1, "bs": 32, "opt": "adam", "nesterov": True}
PARAMS_SQL = (
    "SELECT key, value, value_num, value_type FROM v_params "
    "WHERE run_path = ? AND context = ? ORDER BY key"
)
SERIES_CONTENT_SQL = (
    "SELECT s.plugin_content FROM series s JOIN runs r ON r.id = s.run_id "
    "JOIN contexts c ON c.id = s.context_id "
    "WHERE r.run_path = ? AND c.name = ? AND s.name = ?"
)
RAW_SQL = (
    "SELECT plugin, dtype, shape, data FROM v_tensors "
    "WHERE run_path = ? AND context = ? AND tag = ?"
)


def params(store: str, run_path: str, context: str) -> list[tuple[Any, ...]]:
    with closing(connect(store)) as conn:
        return rows(conn, PARAMS_SQL, (run_path, context))


def raw_record(
    store: str, run_path: str, context: str, tag: str
) -> plugin_data_pb2.HParamsPluginData:
    """The one v_tensors row of a tag, checked to be a raw hparams record, parsed back."""
    with closing(connect(store)) as conn:
        found = rows(conn, RAW_SQL, (run_path, context, tag))
    assert len(found) == 1, found
    plugin, dtype, shape, data = found[0]
    assert (plugin, dtype, shape) == ("hparams", "hparams_plugin_data", "[]")
    return plugin_data_pb2.HParamsPluginData.FromString(data)


def hparams_value(
    tag: str, data: plugin_data_pb2.HParamsPluginData, *, null_tensor: bool
) -> Summary.Value:
    """torch/tensorboardX: metadata only; TF2: plus the NULL tensor (DT_FLOAT, shape [0])."""
    value = Summary.Value(tag=tag, metadata=hp_metadata.create_summary_metadata(data))
    if null_tensor:
        value.tensor.CopyFrom(hp_metadata.NULL_TENSOR)
    return value


# --------------------------------------------------------------------------- tensorboardX


@pytest.fixture(scope="module")
def tbx(
    tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> tuple[str, Any, list[str]]:
    """logs/exp/run_1 holds the SummaryWriter; add_hparams twice -> two timestamp sub-dirs,
    stored as contexts ``hparams`` and ``hparams.2`` in the order of their times."""
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("tbx_hparams")
    run_dir = root / "logs" / "exp" / "run_1"
    with SummaryWriter(logdir=str(run_dir), flush_secs=3600) as writer:
        writer.add_hparams(HPARAMS, {"hparam/acc": 0.9})
        writer.add_hparams(HPARAMS, {"hparam/acc": 0.9})
    directories = sorted((p.name for p in run_dir.iterdir() if p.is_dir()), key=float)
    assert len(directories) == 2
    sessions = ["hparams", "hparams.2"]
    store = make_store(root)
    summary = convert(root / "logs", store, progress=False)
    return store, summary, sessions


def test_tbx_sessions_are_contexts_of_the_writers_run(tbx: tuple[str, Any, list[str]]) -> None:
    store, summary, sessions = tbx
    assert len(sessions) == 2
    assert summary.runs == 1 and summary.orphans == []
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT run_path, group_path FROM v_runs") == [("exp/run_1", "exp")]
        contexts = rows(conn, "SELECT DISTINCT context FROM v_params ORDER BY 1")
    assert [c for (c,) in contexts] == sessions


def test_tbx_params_typed_per_session(tbx: tuple[str, Any, list[str]]) -> None:
    store, summary, sessions = tbx
    expected = [
        ("bs", "32.0", 32.0, "number"),
        ("lr", "0.1", 0.1, "number"),
        ("nesterov", "true", 1.0, "bool"),
        ("opt", "adam", None, "string"),
    ]
    for session in sessions:
        assert params(store, "exp/run_1", session) == expected
    assert params(store, "exp/run_1", "") == []
    assert summary.undecodable == {} and summary.skipped == {}
    # Per session: 4 params, the experiment and the session end.
    assert summary.points["hparams"] == 2 * 6


def test_tbx_metric_is_a_scalar_of_each_session(tbx: tuple[str, Any, list[str]]) -> None:
    store, _, sessions = tbx
    with closing(connect(store)) as conn:
        got = rows(
            conn,
            "SELECT context, step, value FROM v_scalars WHERE tag = 'hparam/acc' ORDER BY context",
        )
    assert got == [(session, 0, float(np.float32(0.9))) for session in sessions]


def test_tbx_experiment_and_session_end_kept_exactly(tbx: tuple[str, Any, list[str]]) -> None:
    from tensorboardX.summary import hparams as tbx_hparams

    store, _, sessions = tbx
    written = [
        plugin_data_pb2.HParamsPluginData.FromString(s.value[0].metadata.plugin_data.content)
        for s in tbx_hparams(HPARAMS, {"hparam/acc": 0.9})
    ]
    for session in sessions:
        assert raw_record(store, "exp/run_1", session, EXP) == written[0]
        assert raw_record(store, "exp/run_1", session, END) == written[2]
        assert (
            raw_record(store, "exp/run_1", session, END).session_end_info.status
            == api_pb2.STATUS_SUCCESS
        )


# --------------------------------------------------------------------------- torch


def test_torch_bools_stay_numbers(tmp_path: Path, store: str) -> None:
    """torch writes a bool as number_value 1.0 typed DATA_TYPE_FLOAT64: kept as a number."""
    experiment = plugin_data_pb2.HParamsPluginData(
        experiment=api_pb2.Experiment(
            hparam_infos=[
                api_pb2.HParamInfo(name="flag", type=api_pb2.DATA_TYPE_FLOAT64),
                api_pb2.HParamInfo(name="lr", type=api_pb2.DATA_TYPE_FLOAT64),
            ],
            metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag="acc"))],
        )
    )
    start = plugin_data_pb2.HParamsPluginData()
    start.session_start_info.hparams["flag"].number_value = 1.0
    start.session_start_info.hparams["lr"].number_value = 0.001
    end = plugin_data_pb2.HParamsPluginData(
        session_end_info=plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    )
    # The writer's own file, then add_hparams' session in a directory of its own (its
    # time as name), stored as context "hparams".
    write_events(tmp_path / "logs" / "run" / event_file_name(W0), [], version_wall_time=W0)
    sub = tmp_path / "logs" / "run" / "1795246946.4808772"
    events = [
        summary_event(0, W0 + i, [hparams_value(tag, data, null_tensor=False)])
        for i, (tag, data) in enumerate(((EXP, experiment), (START, start), (END, end)))
    ]
    write_events(sub / event_file_name(W0), events)
    summary = convert(tmp_path / "logs", store, progress=False)
    assert params(store, "run", "hparams") == [
        ("flag", "1.0", 1.0, "number"),
        ("lr", "0.001", 0.001, "number"),
    ]
    assert raw_record(store, "run", "hparams", EXP) == experiment
    assert raw_record(store, "run", "hparams", END) == end
    assert summary.undecodable == {}


# --------------------------------------------------------------------------- TF2


TRIALS = {
    "trial_0": ({"lr": 0.01, "units": 16, "opt": "sgd", "dropout": False}, W0 + 10),
    "trial_1": ({"lr": 1e-3, "units": 32, "opt": "adam", "dropout": True}, W0 + 20),
}


def write_tf2(parent: Path) -> dict[str, Any]:
    """hp.hparams_config in the parent, hp.hparams + session end in each trial directory."""
    config = hp.hparams_config_pb(
        hparams=[
            hp.HParam("lr", hp.RealInterval(1e-4, 1.0)),
            hp.HParam("units", hp.Discrete([16, 32])),
            hp.HParam("opt", hp.Discrete(["sgd", "adam"])),
            hp.HParam("dropout", hp.Discrete([False, True])),
        ],
        metrics=[hp.Metric("epoch_accuracy", group="validation")],
    )
    write_events(parent / event_file_name(W0), [summary_event(0, W0, config.value)])
    written: dict[str, Any] = {"experiment": config.value[0].metadata.plugin_data.content}
    for name, (values, start_time) in TRIALS.items():
        start = hp.hparams_pb(values, trial_id=f"group-{name}", start_time_secs=start_time)
        end = plugin_data_pb2.HParamsPluginData(
            session_end_info=plugin_data_pb2.SessionEndInfo(
                status=api_pb2.STATUS_SUCCESS, end_time_secs=start_time + 5
            )
        )
        events = [
            summary_event(0, start_time, start.value),
            summary_event(1, start_time + 1, [tf2_scalar("epoch_accuracy", 0.75)]),
            summary_event(0, start_time + 5, [hparams_value(END, end, null_tensor=True)]),
        ]
        write_events(parent / name / event_file_name(start_time), events)
        written[name] = (start.value[0].metadata.plugin_data.content, end)
    return written


def test_tf2_trials_experiment_and_session_ends(tmp_path: Path, store: str) -> None:
    """logs/tuning: each trial directory a run of its own; the experiment, in the directory
    that holds them, belongs to no trial: an orphan, kept as run 'tuning'."""
    written = write_tf2(tmp_path / "logs" / "tuning")
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.undecodable == {} and summary.skipped == {}
    assert summary.orphans == [f"tuning/{event_file_name(W0)}"]
    assert raw_record(store, "tuning", "", EXP) == plugin_data_pb2.HParamsPluginData.FromString(
        written["experiment"]
    )
    for name, (values, _) in TRIALS.items():
        run = f"tuning/{name}"
        assert params(store, run, "") == [
            ("dropout", "true" if values["dropout"] else "false", float(values["dropout"]), "bool"),
            ("lr", repr(values["lr"]), values["lr"], "number"),
            ("opt", values["opt"], None, "string"),
            ("units", repr(float(values["units"])), float(values["units"]), "number"),
        ]
        start_content, end = written[name]
        assert raw_record(store, run, "", END) == end
        # group_name and start_time_secs are kept as the series' plugin content.
        with closing(connect(store)) as conn:
            ((content,),) = rows(conn, SERIES_CONTENT_SQL, (run, "", START))
        assert content == start_content
        info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
        assert (info.group_name, info.start_time_secs) == (f"group-{name}", TRIALS[name][1])


def test_tf2_experiment_in_the_logdir_root_is_an_orphan(tmp_path: Path, store: str) -> None:
    """`tensorboard --logdir logs/tuning` as the TF2 tutorial does: design §3 makes the root's
    experiment file an orphan, reported and (with --skip-orphans) not converted; the trials
    are runs."""
    write_tf2(tmp_path / "tuning")
    summary = convert(tmp_path / "tuning", store, progress=False, skip_orphans=True)
    assert summary.orphans == [event_file_name(W0)]
    assert [row[0] for row in params(store, "trial_0", "")] == ["dropout", "lr", "opt", "units"]
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT count(*) FROM v_tensors WHERE tag = ?", (EXP,)) == [(0,)]


# --------------------------------------------------------------------------- decoder


def start_metadata(**values: struct_pb2.Value) -> SummaryMetadata:
    data = plugin_data_pb2.HParamsPluginData()
    for key, value in values.items():
        data.session_start_info.hparams[key].CopyFrom(value)
    return hp_metadata.create_summary_metadata(data)


def test_value_kinds() -> None:
    nested = struct_pb2.Value()
    nested.struct_value.update({"b": [1, "x", None], "a": True})
    nonfinite = struct_pb2.Value()
    nonfinite.list_value.values.add(number_value=math.inf)
    nonfinite.list_value.values.add(number_value=math.nan)
    metadata = start_metadata(
        z=struct_pb2.Value(number_value=-0.0),
        nan=struct_pb2.Value(number_value=math.nan),
        big=struct_pb2.Value(number_value=2.0**62 + 2**10),
        s=struct_pb2.Value(string_value="é/x"),
        off=struct_pb2.Value(bool_value=False),
        null=struct_pb2.Value(null_value=0),
        nested=nested,
        nonfinite=nonfinite,
    )
    decoded = hparams.decode(Summary.Value(tag=START), metadata)
    assert decoded.table == "params"
    rows = {row[0]: row[1:] for row in decoded.rows}
    assert [row[0] for row in decoded.rows] == sorted(rows)
    assert rows["z"] == ("-0.0", -0.0, "number")
    assert rows["nan"][0] == "nan" and math.isnan(rows["nan"][1])
    assert rows["big"] == (repr(2.0**62 + 2**10), 2.0**62 + 2**10, "number")
    assert rows["s"] == ("é/x", None, "string")
    assert rows["off"] == ("false", 0.0, "bool")
    assert rows["null"] == ("null", None, "json")
    assert rows["nested"] == ('{"a":true,"b":[1.0,"x",null]}', None, "json")
    assert rows["nonfinite"] == ('["Infinity","NaN"]', None, "json")


@pytest.mark.parametrize("content", [b"\xff\xff\xff", b"\x1a\x05ab", b""])
def test_unreadable_content_is_a_decode_failure(content: bytes) -> None:
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=content)
    )
    with pytest.raises(DecodeFailure):
        hparams.decode(Summary.Value(tag=START), metadata)
    with pytest.raises(DecodeFailure):
        hparams.decode(Summary.Value(tag=START), None)


def test_tensor_data_is_a_decode_failure() -> None:
    value = Summary.Value(tag=START, tensor=TensorProto(dtype=1, float_val=[1.0]))
    with pytest.raises(DecodeFailure):
        hparams.decode(value, start_metadata(a=struct_pb2.Value(number_value=1)))


def test_unreadable_tf2_record_is_kept_raw_and_counted(tmp_path: Path, store: str) -> None:
    """A NULL-tensor value with broken content: undecodable, kept by the generic decoder."""
    broken = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=b"\xff\xff\xff")
    )
    value = Summary.Value(tag=START, metadata=broken, tensor=hp_metadata.NULL_TENSOR)
    write_events(tmp_path / "logs" / "run" / event_file_name(W0), [summary_event(0, W0, [value])])
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.undecodable == {"hparams": {START: 1}}
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT plugin, dtype, shape, data FROM v_tensors") == [
            ("hparams", "float32", "[0]", b"")
        ]
        assert rows(conn, "SELECT plugin_content FROM series") == [(b"\xff\xff\xff",)]


def test_unreadable_metadata_only_record_is_kept_raw_and_counted(
    tmp_path: Path, store: str
) -> None:
    """A metadata-only value with broken content: undecodable, its metadata kept whole."""
    broken = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=b"\xff\xff\xff")
    )
    value = Summary.Value(tag=START, metadata=broken)
    write_events(tmp_path / "logs" / "run" / event_file_name(W0), [summary_event(0, W0, [value])])
    summary = convert(tmp_path / "logs", store, progress=False)
    assert summary.undecodable == {"hparams": {START: 1}}
    assert summary.skipped == {}
    with closing(connect(store)) as conn:
        assert rows(conn, "SELECT plugin_content FROM series") == [(b"\xff\xff\xff",)]
        ((plugin, data),) = rows(conn, "SELECT plugin, data FROM v_tensors")
    assert plugin == "hparams" and SummaryMetadata.FromString(data) == broken
