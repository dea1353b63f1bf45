"""Text, end to end (design §5 text, §6 v_texts): string tensors of every shape a real writer
produces come back as one row per element, in row-major order, with the tag exactly as
written (tensorboardX's ``/text_summary`` suffix kept).

Expected rows come from what the test wrote: the strings handed to the writer, flattened in
C order, UTF-8 decoded with ``errors="backslashreplace"`` (the documented rule).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from tbconvert import convert
from tbconvert.plugins import text
from tbconvert.plugins.base import DecodeFailure
from tests.support.eventfiles import (
    event_file_name,
    strip_repeated_metadata,
    summary_event,
    write_events,
)
from tests.support.snapshots import StoreFactory, connect, is_server, rows

W0 = 1_795_000_000.0
SPEC_COLUMNS = ["run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "value"]
UNICODE = "héllo wörld — 世界 🚀 \u00a0\u200b"
MARKDOWN = "# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\ttab and \\backslash"
INVALID = [b"ok \xff\xfe end", b"cut \xc3", b"surrogate \xed\xa0\x80", b"nul \x00 byte"]


class Row(NamedTuple):
    tag: str
    step: int
    wall_time: float
    idx: int
    value: str


Expected = dict[str, list[Row]]  # run -> rows in file order
Converted = tuple[Expected, Any, Any]  # expected, summary, read-only store connection


def text_metadata() -> SummaryMetadata:
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))


def string_value(tag: str, elements: Any, *, shape: Sequence[int] | None = ()) -> Summary.Value:
    """A DT_STRING tensor (TF1/TF2 text), ``shape=None`` for no tensor_shape field at all."""
    array = np.asarray(elements, dtype=object)
    tensor = TensorProto(dtype=7)
    if shape is not None:
        tensor.tensor_shape.SetInParent()
        for size in array.shape if shape == () else shape:
            tensor.tensor_shape.dim.add(size=size)
    for item in array.reshape(-1):
        tensor.string_val.append(item if isinstance(item, bytes) else item.encode("utf-8"))
    return Summary.Value(tag=tag, tensor=tensor, metadata=text_metadata())


def expected_rows(tag: str, step: int, wall: float, elements: Any) -> list[Row]:
    flat = np.asarray(elements, dtype=object).reshape(-1, order="C")
    return [
        Row(
            tag,
            step,
            wall,
            idx,
            item.decode("utf-8", errors="backslashreplace") if isinstance(item, bytes) else item,
        )
        for idx, item in enumerate(flat)
    ]


def write_tbx(run: Path, expected: list[Row]) -> None:
    from tensorboardX import SummaryWriter

    strings = ["plain", UNICODE, "", MARKDOWN]
    with SummaryWriter(logdir=str(run), flush_secs=3600) as writer:
        for step, string in enumerate(strings):
            for tag in ("notes", "eval/notes"):
                writer.add_text(tag, string, step * 10, walltime=W0 + step)
                expected.append(Row(f"{tag}/text_summary", step * 10, W0 + step, 0, string))


def write_tf2(run: Path, expected: list[Row]) -> None:
    """TF2 ``tf.summary.text``: rank 0 (empty shape field), one string; also no shape field."""
    events = []
    for step, string in enumerate(["first", UNICODE, MARKDOWN]):
        wall = W0 + step * 0.5
        events.append(
            summary_event(
                step,
                wall,
                [string_value("rank0", string), string_value("noshape", string[::-1], shape=None)],
            )
        )
        expected += expected_rows("rank0", step, wall, string)
        expected += expected_rows("noshape", step, wall, string[::-1])
    write_events(run / event_file_name(W0), events)


def write_tf1(run: Path, expected: list[Row]) -> None:
    """TF1 ``summary.text`` of tables and lists, metadata only on each tag's first event."""
    tables = [
        [["a", "b"], ["c", "d"]],
        [["r0c0", UNICODE], ["r1c0", ""]],
        [[INVALID[0], b"fine"], [INVALID[1], INVALID[2]]],
    ]
    events = []
    for step, table in enumerate(tables):
        wall = W0 + step
        wide = [[f"{step}:{i},{j}" for j in range(3)] for i in range(2)]
        values = [
            string_value("table", table),
            string_value("wide", wide),
            string_value("list", [f"item {step}", "é", INVALID[3]]),
        ]
        events.append(summary_event(step, wall, values))
        for tag, elements in (
            ("table", table),
            ("wide", wide),
            ("list", [f"item {step}", "é", INVALID[3]]),
        ):
            expected += expected_rows(tag, step, wall, elements)
    events = strip_repeated_metadata(events)
    assert not events[2].summary.value[0].HasField("metadata")
    write_events(run / event_file_name(W0), events)


WRITERS = {"tbx": write_tbx, "tf2": write_tf2, "tf1": write_tf1}


@pytest.fixture(scope="module")
def converted(
    tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> Iterator[Converted]:
    root = tmp_path_factory.mktemp("text")
    expected: Expected = {}
    for run, write in WRITERS.items():
        write(root / "logdir" / run, expected.setdefault(run, []))
    store = make_store(root)
    summary = convert(root / "logdir", store, progress=False)
    if is_server(store):  # PostgreSQL text cannot hold U+0000: the documented spelling
        expected = {
            run: [row._replace(value=row.value.replace("\x00", "\\x00")) for row in written]
            for run, written in expected.items()
        }
    with closing(connect(store)) as conn:
        yield expected, summary, conn


def test_every_element_is_one_row(converted: Converted) -> None:
    expected, summary, conn = converted
    total = sum(len(rows) for rows in expected.values())
    assert summary.exit_code == 0 and summary.undecodable == {} and summary.skipped == {}
    assert summary.points == Counter({"text": total})
    assert conn.execute("SELECT COUNT(*) FROM texts").fetchone()[0] == total
    assert conn.execute("SELECT COUNT(*) FROM v_texts").fetchone()[0] == total
    columns = [d[0] for d in conn.execute("SELECT * FROM v_texts LIMIT 0").description]
    assert columns == SPEC_COLUMNS


@pytest.mark.parametrize("run", list(WRITERS))
def test_rows_exact_in_file_order(converted: Converted, run: str) -> None:
    expected, _, conn = converted
    stored = rows(
        conn,
        "SELECT s.name, p.step, p.wall_time, p.idx, p.value FROM texts p "
        "JOIN series s ON s.id = p.series_id JOIN runs r ON r.id = s.run_id "
        "WHERE r.run_path = ? ORDER BY p.file_id, p.record_offset, p.value_index, p.idx",
        (run,),
    )
    assert [Row(*row) for row in stored] == expected[run]
    view = rows(
        conn,
        "SELECT tag, step, wall_time, idx, value FROM v_texts WHERE run_path = ? AND context = ''",
        (run,),
    )
    assert sorted(view) == sorted(expected[run])


def test_tags_stored_as_written(converted: Converted) -> None:
    _, _, conn = converted
    got = set(
        rows(
            conn,
            "SELECT r.run_path, s.name, s.plugin, s.dtype FROM series s "
            "JOIN runs r ON r.id = s.run_id",
        )
    )
    tags = {
        "tbx": ["notes/text_summary", "eval/notes/text_summary"],
        "tf2": ["rank0", "noshape"],
        "tf1": ["table", "wide", "list"],
    }
    assert got == {(run, tag, "text", "string") for run, names in tags.items() for tag in names}


def test_table_row_major_and_invalid_bytes(converted: Converted) -> None:
    _, _, conn = converted
    table = rows(
        conn, "SELECT step, idx, value FROM v_texts WHERE tag = ? ORDER BY step, idx", ("table",)
    )
    assert table[:4] == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "d")]
    assert table[8:] == [
        (2, 0, "ok \\xff\\xfe end"),
        (2, 1, "fine"),
        (2, 2, "cut \\xc3"),
        (2, 3, "surrogate \\xed\\xa0\\x80"),
    ]
    wide = rows(conn, "SELECT idx, value FROM v_texts WHERE tag = 'wide' AND step = 1 ORDER BY idx")
    assert wide == [(i * 3 + j, f"1:{i},{j}") for i in range(2) for j in range(3)]
    nul = conn.execute(
        "SELECT value FROM v_texts WHERE tag = 'list' AND idx = 2 LIMIT 1"
    ).fetchone()[0]
    on_sqlite = isinstance(conn, sqlite3.Connection)  # else PostgreSQL: the spelling of NUL
    assert nul == ("nul \x00 byte" if on_sqlite else "nul \\x00 byte")


def bad(tensor: TensorProto, shape: Sequence[int]) -> Summary.Value:
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    return Summary.Value(tag="bad", tensor=tensor, metadata=text_metadata())


BAD = {
    "float": bad(TensorProto(dtype=1, float_val=[1.0]), []),
    "empty": bad(TensorProto(dtype=7), [0]),
    "no_strings": bad(TensorProto(dtype=7), [2]),
    "too_many": bad(TensorProto(dtype=7, string_val=[b"a", b"b"]), [1]),
    "broadcast": bad(TensorProto(dtype=7, string_val=[b"a"]), [1 << 40]),
    "content": bad(TensorProto(dtype=7, tensor_content=b"\x01a"), [1]),
    "scalar": Summary.Value(tag="bad", simple_value=1.0),
}


@pytest.mark.parametrize("case", list(BAD))
def test_unreadable_values_raise_decode_failure(case: str) -> None:
    with pytest.raises(DecodeFailure):
        text.decode(BAD[case], text_metadata())


def test_short_string_val_fills_like_tensorflow() -> None:
    value = bad(TensorProto(dtype=7, string_val=[b"x", b"y"]), [2, 2])
    assert text.decode(value, None).rows == [(0, "x"), (1, "y"), (2, "y"), (3, "y")]


def test_unreadable_values_are_kept_raw(tmp_path: Path, store: str) -> None:
    values = [BAD["float"], BAD["empty"], string_value("ok", "fine")]
    write_events(tmp_path / "logdir" / event_file_name(W0), [summary_event(1, W0, values)])
    summary = convert(tmp_path / "logdir", store, progress=False)
    assert summary.undecodable == {"text": {"bad": 2}}
    assert summary.points == Counter({"text": 3})  # two raw tensors and one text row
    with closing(connect(store)) as conn:
        assert sorted(rows(conn, "SELECT tag, dtype, shape FROM v_tensors")) == [
            ("bad", "float32", "[]"),
            ("bad", "string_tensorproto", "[0]"),
        ]
        assert rows(conn, "SELECT tag, idx, value FROM v_texts") == [("ok", 0, "fine")]
