"""design §9: every kind of bad input gets one clear line, the right exit code, and a store that
is untouched or consistent."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from tbconvert.cli import cli
from tbconvert.reading.crc import masked_crc32c
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.snapshots import view_rows, without_run_ids


def run(*args: str) -> tuple[int, dict | None, str]:
    result = CliRunner().invoke(cli, ["tf", *args, "--json"])
    summary = json.loads(result.stdout) if result.stdout.strip() else None
    return result.exit_code, summary, result.stderr


def scalars(steps: range) -> list[Event]:
    return [summary_event(step, 1000.0 + step, [simple_value("loss", step)]) for step in steps]


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    write_events(root / "good" / "events.out.tfevents.1.host", scalars(range(10)))
    return root


def test_empty_and_header_only_files_are_fine(logdir: Path, tmp_path: Path) -> None:
    (logdir / "empty").mkdir()
    (logdir / "empty" / "events.out.tfevents.1.host").write_bytes(b"")
    write_events(logdir / "header" / "events.out.tfevents.1.host", [])
    code, summary, _ = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 0
    assert summary["points"] == {"scalars": 10} and summary["problems"] == []


def test_truncated_file_is_partial_not_an_error(logdir: Path, tmp_path: Path) -> None:
    path = logdir / "good" / "events.out.tfevents.1.host"
    path.write_bytes(path.read_bytes()[:-5])
    code, summary, stderr = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 0 and summary["points"] == {"scalars": 9}
    assert summary["files"]["partial"] == 1 and "still being written" in stderr


def test_corrupt_crc_in_the_middle_costs_one_record(logdir: Path, tmp_path: Path) -> None:
    path = logdir / "good" / "events.out.tfevents.1.host"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))
    code, summary, stderr = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 3
    assert summary["points"] == {"scalars": 9} and summary["damaged_records"] == 1
    assert "good/events.out.tfevents.1.host: at byte" in stderr


@pytest.mark.parametrize("valid_crc", [True, False], ids=["torn", "damaged"])
def test_huge_length_field(logdir: Path, tmp_path: Path, valid_crc: bool) -> None:
    path = logdir / "good" / "events.out.tfevents.1.host"
    header = struct.pack("<Q", 1 << 60)
    crc = masked_crc32c(header) if valid_crc else 0xDEADBEEF
    with path.open("ab") as handle:
        handle.write(header + struct.pack("<I", crc) + b"\x00" * 64)
    code, summary, _ = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert summary["points"] == {"scalars": 10}
    if valid_crc:  # a header that checks out: the record may still be coming
        assert code == 0 and summary["files"]["partial"] == 1
    else:
        assert code == 3 and summary["damaged_records"] == 1


def test_non_utf8_tag_is_repaired_and_kept(tmp_path: Path) -> None:
    event = Event(
        step=1,
        wall_time=5.0,
        summary=Summary(value=[Summary.Value(tag="accXuracy", simple_value=0.5)]),
    )
    payload = event.SerializeToString().replace(b"accXuracy", b"acc\xffuracy")
    path = tmp_path / "logs" / "run" / "events.out.tfevents.1.host"
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        RecordWriter(handle).write(payload)
    store = tmp_path / "s.db"
    code, summary, stderr = run("--logdir", str(tmp_path / "logs"), "--store", str(store))
    assert code == 0 and summary["lossy_records"] == 1 and "invalid UTF-8" in stderr
    assert [row[3:] for row in view_rows(store)["v_scalars"]] == [("acc\\xffuracy", 1, 5.0, 0.5)]


def test_non_event_file_named_like_one(logdir: Path, tmp_path: Path) -> None:
    (logdir / "good" / "events.out.tfevents.notes.txt").write_text("just some notes\n" * 100)
    code, summary, stderr = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 3 and summary["points"] == {"scalars": 10}
    assert any("not an event file" in problem for problem in summary["problems"])
    assert "events.out.tfevents.notes.txt" in stderr


def test_damage_stays_visible_until_it_is_fixed(logdir: Path, tmp_path: Path) -> None:
    """Every run exits 3, with one summary line, while a file holds damaged records or none
    valid; a cron job sees it until the file is replaced or removed."""
    damaged = logdir / "good" / "events.out.tfevents.1.host"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0x55
    damaged.write_bytes(bytes(data))
    noise = logdir / "noise" / "events.out.tfevents.2.host"
    noise.parent.mkdir()
    noise.write_bytes(os.urandom(4096))
    store = str(tmp_path / "s.db")
    code, summary, _ = run("--logdir", str(logdir), "--store", store)
    assert code == 3 and summary["still_damaged"] == []
    for _ in range(2):
        result = CliRunner().invoke(cli, ["tf", "--logdir", str(logdir), "--store", store])
        assert result.exit_code == 3
        assert (
            "damaged:  2 files still hold damaged or no valid records (first: "
            "good/events.out.tfevents.1.host)" in result.stderr
        )
    code, summary, _ = run("--logdir", str(logdir), "--store", store)
    assert code == 3 and summary["still_damaged"] == [
        "good/events.out.tfevents.1.host",
        "noise/events.out.tfevents.2.host",
    ]
    listing = CliRunner().invoke(cli, ["runs", "--store", store])
    assert listing.exit_code == 0, listing.output
    marks = {line.split()[1]: line.split()[-2:] for line in listing.stdout.splitlines()[1:]}
    # A file of no valid record makes no run: its directory is not listed.
    assert marks == {"good": ["1", "damaged"]}
    damaged.touch()  # touched, read on from its offset: its damage is still there
    code, summary, _ = run("--logdir", str(logdir), "--store", store)
    assert code == 3 and "good/events.out.tfevents.1.host" in summary["still_damaged"]
    noise.unlink()
    write_events(damaged, scalars(range(10)), version_wall_time=5.0)  # replaced
    code, summary, _ = run("--logdir", str(logdir), "--store", store)
    assert code == 0 and summary["still_damaged"] == [] and summary["problems"] == []


def test_unreadable_file(logdir: Path, tmp_path: Path, monkeypatch) -> None:
    import tbconvert.reading.chunks as module

    bad = logdir / "other" / "events.out.tfevents.1.host"
    write_events(bad, scalars(range(3)))
    real_open = module.open_event_file

    def guarded(path: str, *args):
        if path == str(bad):  # root ignores chmod, so refuse the way the OS would
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args)

    monkeypatch.setattr(module, "open_event_file", guarded)
    code, summary, stderr = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 3 and summary["points"] == {"scalars": 10}
    assert "other/events.out.tfevents.1.host: cannot read: Permission denied" in stderr


def test_symlink_loop_is_reported_and_finishes(logdir: Path, tmp_path: Path) -> None:
    os.symlink(logdir, logdir / "good" / "loop")
    code, summary, stderr = run("--logdir", str(logdir), "--store", str(tmp_path / "s.db"))
    assert code == 0 and summary["points"] == {"scalars": 10}
    assert "loop" in stderr and summary["warnings"]


def test_read_only_store(logdir: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert run("--logdir", str(logdir), "--store", str(store))[0] == 0
    write_events(logdir / "more" / "events.out.tfevents.1.host", scalars(range(5)))
    before = view_rows(store)
    # Root ignores file modes, so ask SQLite itself for a read-only connection.
    code, summary, stderr = run(
        "--logdir", str(logdir), "--store", f"sqlite:///file:{store}?mode=ro&uri=true"
    )
    assert code == 1 and summary is None
    assert "read-only" in stderr and len(stderr.strip().splitlines()) == 1
    assert view_rows(store) == before


def test_full_disk_leaves_a_consistent_store_the_next_run_completes(
    logdir: Path, tmp_path: Path, monkeypatch
) -> None:
    import tbconvert.store.engine as engine_module

    store = tmp_path / "s.db"
    assert run("--logdir", str(logdir), "--store", str(store))[0] == 0
    for index in range(3):
        write_events(logdir / f"big_{index}" / "events.out.tfevents.1.host", scalars(range(20_000)))
    real_connect = engine_module.set_up_sqlite_connection

    def small_disk(dbapi_connection, record) -> None:
        real_connect(dbapi_connection, record)
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 300}")

    monkeypatch.setattr(engine_module, "set_up_sqlite_connection", small_disk)
    code, _summary, stderr = run("--logdir", str(logdir), "--store", str(store))
    assert code == 1 and "no space left on" in stderr and "points of this run kept" in stderr
    monkeypatch.setattr(engine_module, "set_up_sqlite_connection", real_connect)
    assert run("--logdir", str(logdir), "--store", str(store))[0] == 0
    clean = tmp_path / "clean.db"
    assert run("--logdir", str(logdir), "--store", str(clean))[0] == 0
    # "good" was converted first here, so run ids differ from the clean store's.
    assert without_run_ids(view_rows(store)) == without_run_ids(view_rows(clean))
