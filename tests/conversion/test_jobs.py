"""--jobs N decodes in worker processes; the store must equal the one --jobs 1 makes."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tbconvert import convert
from tbconvert.cli import cli
from tbconvert.conversion import workers
from tbconvert.conversion.options import ConvertTuning, read_tuning_from_environment
from tbconvert.errors import ConverterError
from tbconvert.filters import Selection
from tbconvert.reading import chunks
from tbconvert.reading.fast.batch import BatchParts
from tests.support.eventfiles import (
    simple_value,
    strip_repeated_metadata,
    summary_event,
    tf2_scalar,
    torch_new_style_scalar,
    write_events,
)
from tests.support.snapshots import view_rows


def _logdir(root: Path) -> Path:
    for run in range(5):
        for context in ("train", "validate"):
            write_events(
                root / "group" / f"run_{run}" / context / "events.out.tfevents.1.h",
                [summary_event(s, 1e9 + s, [simple_value("loss", s / 7.0)]) for s in range(2000)],
            )
    # TF1 FileWriter.reopen: metadata only in the first of two files of one (run, context).
    tf1 = strip_repeated_metadata(
        summary_event(s, 2e9 + s, [tf2_scalar("acc", s / 3.0)]) for s in range(40)
    )
    write_events(root / "group" / "run_9" / "eval" / "events.out.tfevents.1.h", tf1[:20])
    write_events(root / "group" / "run_9" / "eval" / "events.out.tfevents.2.h", tf1[20:])
    return root


def test_jobs_2_gives_the_same_store_as_jobs_1(tmp_path: Path) -> None:
    logdir = _logdir(tmp_path / "logs")
    one = convert(logdir, tmp_path / "one.db", jobs=1, chunk_points=700)
    two = convert(logdir, tmp_path / "two.db", jobs=2, chunk_points=700)
    assert two.points == one.points == {"scalars": 20_040}
    assert two.exit_code == one.exit_code == 0
    assert view_rows(tmp_path / "two.db") == view_rows(tmp_path / "one.db")
    again = convert(logdir, tmp_path / "two.db", jobs=2)
    assert again.total_points == 0 and again.files_unchanged == 12


def test_jobs_option_on_the_command_line(tmp_path: Path) -> None:
    logdir = _logdir(tmp_path / "logs")
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logdir), "--store", str(tmp_path / "s.db"), "--jobs", "2", "-q"]
    )
    assert result.exit_code == 0, result.stderr
    assert view_rows(tmp_path / "s.db") == view_rows(_reference(logdir, tmp_path))


def _reference(logdir: Path, tmp_path: Path) -> Path:
    store = tmp_path / "reference.db"
    convert(logdir, store)
    return store


def test_jobs_2_sends_block_rows_packed_in_record_order(tmp_path: Path) -> None:
    # Workers send the rows of single-scalar records packed; the writer must unpack them
    # between the rows the general path made (multi-value events, histograms, odd encodings)
    # in record order, whatever the chunk size.
    logdir = tmp_path / "logs"
    for run in range(3):
        events = []
        for s in range(3000):
            values = [simple_value("loss", s / 7.0), tf2_scalar("acc", s / 3.0)]
            if s % 50 == 0:
                values.append(torch_new_style_scalar("odd", float(s)))
            events.append(summary_event(s + 2**33, 1e9 + s, values[:1]))
            events.append(summary_event(s + 2**33, 1e9 + s, values[1:]))
        write_events(logdir / f"run_{run}" / "events.out.tfevents.1.h", events)
    stores = {}
    for jobs, chunk in ((1, 50_000), (2, 50_000), (2, 333)):
        store = tmp_path / f"jobs{jobs}-{chunk}.db"
        summary = convert(logdir, store, jobs=jobs, chunk_points=chunk)
        assert summary.points == {"scalars": 3 * (6000 + 60)}
        stores[(jobs, chunk)] = view_rows(store)
    assert stores[(2, 50_000)] == stores[(1, 50_000)] == stores[(2, 333)]


def test_a_worker_killed_midway_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = _logdir(tmp_path / "logs")
    read_file = chunks.read_file

    def killed_at_run_3(
        task: chunks.FileTask,
        settings: chunks.ReadSettings,
        known_metadata: chunks.KnownMetadataByOwner,
    ) -> Iterator[Any]:
        if "run_3" in task.run_path:
            os._exit(9)  # as the kernel's OOM killer would end it: no exception, no message
        yield from read_file(task, settings, known_metadata)

    monkeypatch.setattr(chunks, "read_file", killed_at_run_3)  # inherited by forked workers
    with pytest.raises(ConverterError, match=r"worker exited \(code 9\)"):
        convert(logdir, tmp_path / "s.db", jobs=2)
    # Files before it were committed; a run without the fault completes the store.
    monkeypatch.setattr(chunks, "read_file", read_file)
    convert(logdir, tmp_path / "s.db", jobs=2)
    assert view_rows(tmp_path / "s.db") == view_rows(_reference(logdir, tmp_path))


def _sweep(root: Path, runs: int) -> Path:
    for run in range(runs):
        write_events(
            root / f"run_{run:03d}" / "events.out.tfevents.1.h",
            [summary_event(s, 1e9 + s, [simple_value("loss", run + s / 7.0)]) for s in range(20)],
        )
    return root


@pytest.mark.by_record_switch  # small files in batches, as a sweep's are
@pytest.mark.parametrize("parcel", [1, 3, 256])
def test_jobs_2_sends_small_files_in_parcels_in_task_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parcel: int
) -> None:
    # A sweep's chunks travel in lists; however they are cut, the writer must get every
    # chunk once, in task order, as --jobs 1 does.
    logdir = _sweep(tmp_path / "logs", 40)
    tuning = ConvertTuning(parcel_chunks=parcel)
    two = convert(logdir, tmp_path / "two.db", jobs=2, chunk_points=100, tuning=tuning)
    assert two.points == {"scalars": 40 * 20} and two.files_read == 40
    assert view_rows(tmp_path / "two.db") == view_rows(_reference(logdir, tmp_path))


@pytest.mark.skipif(not hasattr(os, "nice"), reason="niceness is POSIX's")
def test_workers_decode_at_a_lower_priority_than_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer sets the pace: a worker yields the CPU to it when both want it.
    seen = tmp_path / "niceness"
    read_files = workers.read_files

    def noting_niceness(*args: Any) -> Iterator[Any]:
        seen.write_text(str(os.nice(0)))  # in the forked worker
        yield from read_files(*args)

    monkeypatch.setattr(workers, "read_files", noting_niceness)
    logdir = _sweep(tmp_path / "logs", 4)
    convert(logdir, tmp_path / "two.db", jobs=2)
    assert int(seen.read_text()) == min(os.nice(0) + workers._WORKER_NICENESS, 19)
    assert view_rows(tmp_path / "two.db") == view_rows(_reference(logdir, tmp_path))


def test_the_writer_commits_what_it_holds_when_the_workers_have_nothing_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two small files of one run (one worker): the worker holds back the second until the
    # store shows the first committed.  A writer that only commits full groups would wait
    # for the second file with the first one held in its group.
    logdir = tmp_path / "logs"
    for number in (1, 2):
        write_events(
            logdir / "run" / f"events.out.tfevents.{number}.h",
            [summary_event(s, 1e9 + s, [simple_value("loss", s / 7.0)]) for s in range(30)],
        )
    store = tmp_path / "s.db"
    seen = tmp_path / "seen"
    read_files = workers.read_files

    def holding_back_the_second(*args: Any) -> Iterator[Any]:
        for task, chunk in read_files(*args):
            if task.index == 1:
                seen.write_text(_wait_for_commit(store, "run/events.out.tfevents.1.h"))
            yield task, chunk

    monkeypatch.setattr(workers, "read_files", holding_back_the_second)  # forked workers
    at_once = ConvertTuning(parcel_seconds=0.0)  # send each chunk at once
    summary = convert(logdir, store, jobs=2, tuning=at_once)
    assert seen.read_text() == "committed"
    assert summary.points == {"scalars": 60} and summary.files_read == 2
    assert view_rows(store) == view_rows(_reference(logdir, tmp_path))


def _wait_for_commit(store: Path, path: str) -> str:
    import time

    deadline = time.monotonic() + 120  # a bound on a wait for the commit, generous when loaded
    found: list[Any] = []
    while time.monotonic() < deadline:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        # OperationalError: the tables are not made yet.
        with contextlib.suppress(sqlite3.OperationalError), contextlib.closing(db):
            query = "SELECT offset_consumed FROM event_files WHERE path = ?"
            found = db.execute(query, (path,)).fetchall()
        if found:
            return "committed"
        time.sleep(0.01)
    return "not committed within 120 s"


def test_a_worker_sends_a_parcel_once_it_took_its_time_to_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slow files of few points (mixed plugins) must not gather into one parcel while the
    # writer waits; quick ones (a sweep's) still do.
    logdir = _sweep(tmp_path / "logs", 6)
    tasks = [
        chunks.FileTask(
            i, str(p), p.name, str(p.parent), "", p.stat().st_size, 0, 0, None, None, {}
        )
        for i, p in enumerate(sorted(logdir.glob("*/events*")))
    ]
    # Decoding in this process leaves its priority and signals alone: a worker process sets
    # those up for itself (a renice here slowed the rest of the suite on a busy machine).
    niceness, on_sigint = os.nice(0), signal.getsignal(signal.SIGINT)
    parcels: dict[float, list[int]] = {}
    read = chunks.ReadSettings(Selection(), 1000, tuning=read_tuning_from_environment())
    for seconds in (0.0, 3600.0):
        sent: list[list[Any]] = []

        class Sent:
            put = staticmethod(sent.append)

        workers._work(tasks, read, ConvertTuning(parcel_seconds=seconds), Sent())
        parcels[seconds] = [len(parcel) for parcel in sent]
    assert parcels == {0.0: [1] * 6, 3600.0: [6]}
    assert (os.nice(0), signal.getsignal(signal.SIGINT)) == (niceness, on_sigint)


@pytest.mark.by_record_switch
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_decoder_failing_midway_raises_after_committing_what_was_read_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    logdir = _sweep(tmp_path / "logs", 40)
    # With --jobs 2 the failing worker (odd runs) sends runs 1-9, 11-19, then 21 and the
    # failure.
    tuning = ConvertTuning(parcel_chunks=5)
    settled = BatchParts.settled

    def failing_at_run_23(self: Any, file: Any, *args: Any) -> Any:
        if file.task.run_path.endswith("run_023"):
            raise RuntimeError("decoder broke on run_023")
        return settled(self, file, *args)

    monkeypatch.setattr(BatchParts, "settled", failing_at_run_23)
    with pytest.raises(RuntimeError, match="run_023"):
        convert(logdir, tmp_path / "s.db", jobs=jobs, chunk_points=100, tuning=tuning)
    # A group ends at 100 points (5 files of 20): runs 20-22 were held in an open group when
    # the failure came, and are committed with the groups before them.
    with sqlite3.connect(tmp_path / "s.db") as db:
        stored = [row[0] for row in db.execute("SELECT path FROM event_files ORDER BY path")]
    assert stored == [f"run_{n:03d}/events.out.tfevents.1.h" for n in range(23)]
    monkeypatch.setattr(BatchParts, "settled", settled)
    convert(logdir, tmp_path / "s.db", jobs=jobs)
    assert view_rows(tmp_path / "s.db") == view_rows(_reference(logdir, tmp_path))


def test_a_parcel_weighs_about_one_chunk_of_points_or_of_image_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Files of a few images are few points of many bytes: a parcel must end on its bytes too,
    # or a worker would hold hundreds of such files at once.
    import io

    import numpy as np
    from PIL import Image
    from tensorboard.compat.proto.summary_pb2 import Summary

    def png(seed: int) -> bytes:
        noise = np.random.default_rng(seed).integers(0, 256, (48, 48, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(noise).save(out, format="PNG")
        return out.getvalue()

    paths = []
    for run in range(12):
        images = [png(run * 2 + step) for step in range(2)]
        paths.append(tmp_path / f"run_{run:02d}" / "events.out.tfevents.1.h")
        write_events(
            paths[-1],
            [
                summary_event(
                    step,
                    1e9 + step,
                    [Summary.Value(tag="sample", image=Summary.Image(encoded_image_string=image))],
                )
                for step, image in enumerate(images)
            ],
        )
    image_bytes = len(png(0))
    tasks = [
        chunks.FileTask(
            i, str(p), p.name, str(p.parent), "", p.stat().st_size, 0, 0, None, None, {}
        )
        for i, p in enumerate(paths)
    ]
    tuning = ConvertTuning(parcel_bytes=3 * image_bytes, parcel_seconds=3600.0)
    sent: list[list[Any]] = []

    class Sent:
        put = staticmethod(sent.append)

    read = chunks.ReadSettings(Selection(), 1000, tuning=read_tuning_from_environment())
    workers._work(tasks, read, tuning, Sent())
    # Two files of two images each pass three images' bytes: each parcel holds two files.
    assert [len(parcel) for parcel in sent] == [2] * 6
    assert [len(chunk.blobs) for parcel in sent for chunk in parcel] == [2] * 12
