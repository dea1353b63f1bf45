"""Huge images end to end (issue #40): a record larger than the read buffer, decoded by the
huge-image path and written to SQLite in pieces, is stored byte for byte, on both backends,
once however often it is converted; and a record over ``max_record_size`` is skipped with
one line naming its file and offset, exit code 3, and the rest of the file converted.
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.reading.records import RecordReader
from tbconvert.reading.tuning import HUGE_RECORD_BYTES
from tbconvert.writing.sqlite import BLOB_PIECE
from tests.reading.test_huge_images import png_like
from tests.support.eventfiles import event_file_name, file_version_event, simple_value
from tests.support.snapshots import connect, rows
from tests.support.tfrecords import frame_large

BIG = (24 << 20) + 12345  # above the read buffer, the huge-record threshold and a blob piece


def big_image(seed: int) -> bytes:
    head = png_like(16, seed)
    return head + os.urandom(BIG - len(head))


def write_log(path: Path, images: list[bytes]) -> list[int]:
    """An event file of scalars around one image record per entry of ``images``; returns
    the offsets of its records."""
    events = [file_version_event(1.0)]
    for step, data in enumerate(images):
        events.append(
            Event(
                step=step, wall_time=2.0 + step, summary=Summary(value=[simple_value("loss", step)])
            )
        )
        image = Summary.Image(encoded_image_string=data, width=7, height=5, colorspace=3)
        value = Summary.Value(tag="big", image=image)
        events.append(Event(step=step, wall_time=2.5 + step, summary=Summary(value=[value])))
    events.append(Event(step=99, wall_time=9.0, summary=Summary(value=[simple_value("loss", 9)])))
    data, offsets = frame_large([event.SerializeToString() for event in events])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return offsets


def test_huge_images_are_stored_byte_for_byte(tmp_path: Path, store: str) -> None:
    assert max(HUGE_RECORD_BYTES, BLOB_PIECE, 8 << 20) < BIG
    images = [big_image(0), big_image(1)]
    write_log(tmp_path / "logs" / "run" / event_file_name(1.0), images)
    for _ in range(2):  # the second time, nothing new is stored
        summary = convert(tmp_path / "logs", store, progress=False, full=True)
        assert summary.exit_code == 0
        assert summary.points == {"images": 2, "scalars": 3}
    with closing(connect(store)) as conn:
        found = rows(conn, "SELECT step, data, format, width, height FROM v_images ORDER BY step")
        blobs = rows(conn, "SELECT count(*), sum(size) FROM blobs")
    assert [(step, bytes(data)) for step, data, *_ in found] == list(enumerate(images))
    assert [tuple(row[2:]) for row in found] == [("PNG", 7, 5)] * 2
    assert [tuple(row) for row in blobs] == [(2, 2 * BIG)]


def tf(tmp_path: Path, *options: str) -> Result:
    logs, store = str(tmp_path / "logs"), str(tmp_path / "s.db")
    return CliRunner().invoke(cli, ["tf", "--logdir", logs, "--store", store, *options])


def test_a_record_over_the_cap_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "run" / event_file_name(1.0)
    offsets = write_log(path, [png_like(3 << 20, 1)])
    result = tf(tmp_path, "--max-record-size", "2M", "--json")
    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    assert summary["points"] == {"scalars": 2} and summary["damaged_records"] == 1
    line = f"run/{path.name}: at byte {offsets[2]}: record of"
    assert line in result.stderr and "over --max-record-size (2097152 bytes)" in result.stderr
    # The next run says it again (the file still holds it), and reads nothing new.
    again = tf(tmp_path, "--max-record-size", "2M", "--json")
    assert again.exit_code == 3 and json.loads(again.stdout)["points"] == {}


@pytest.mark.parametrize("size", ["0", "2X", "-1", "M"])
def test_max_record_size_must_be_a_size(tmp_path: Path, size: str) -> None:
    result = tf(tmp_path, "--max-record-size", size)
    assert result.exit_code == 2 and "is not a size" in result.stderr


def test_max_record_size_is_at_least_a_megabyte(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    result = tf(tmp_path, "--max-record-size", "1023K")
    assert result.exit_code == 2 and "--max-record-size is 1047552 bytes" in result.stderr
    assert tf(tmp_path, "--max-record-size", "1M").exit_code == 0


def test_the_reader_default_cap_is_the_cli_default() -> None:
    help_text = CliRunner().invoke(cli, ["tf", "--help"]).stdout
    assert "[default: 1G]" in help_text
    assert RecordReader.__init__.__kwdefaults__["max_record"] == 1 << 30
