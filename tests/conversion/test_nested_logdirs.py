"""Logdirs inside or around a stored one: one event file in one run of a store (issue #44).

Converting ``logs/sweep`` and then ``logs`` into one store gives the views of converting
``logs`` alone; ``logs`` then ``logs/sweep`` gives the union of the two sources with every
event file once: ``logs`` without the sweep's runs, plus ``logs/sweep`` alone.  The files
taken over are not read again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tbconvert import convert
from tbconvert.cli import cli
from tests.conversion.test_invariant import text_value
from tests.support.eventfiles import append_events, simple_value, summary_event, write_events
from tests.support.snapshots import (
    VIEWS,
    StoreFactory,
    query_rows,
    view_rows,
    without_run_ids,
)

SWEEP_RUNS = ("lr_0.1", "lr_0.01", "lr_0.001")


def events(tag: str, steps: range, base: float) -> list:
    return [
        summary_event(
            step,
            base + step,
            [simple_value(tag, 1.0 / (step + 1))]
            + ([text_value("notes", f"{tag} {step}")] if step % 5 == 0 else []),
        )
        for step in steps
    ]


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A parent logdir of two runs of its own and a sweep of three runs, one with train/val
    contexts and one with a Lightning ``hparams.yaml``."""
    root = tmp_path / "logs"
    write_events(root / "baseline" / "events.out.tfevents.1.host", events("loss", range(20), 1e3))
    write_events(root / "probe" / "events.out.tfevents.1.host", events("acc", range(8), 2e3))
    for index, run in enumerate(SWEEP_RUNS):
        base = 1e4 * (index + 1)
        if index == 0:
            for offset, context in enumerate(("train", "val")):
                path = root / "sweep" / run / context / "events.out.tfevents.1.host"
                write_events(path, events("loss", range(15), base + offset * 100))
        else:
            path = root / "sweep" / run / "events.out.tfevents.1.host"
            write_events(path, events("loss", range(12 + index), base))
    (root / "sweep" / "lr_0.01" / "hparams.yaml").write_text("lr: 0.01\nlayers: [64, 32]\n")
    return root


def views(store: str) -> dict:
    """The store's views, minus run ids (runs are made in another order than a clean run's)."""
    return without_run_ids(view_rows(store))


def clean_views(logdir: Path, store: str) -> dict:
    convert(logdir, store)
    return views(store)


def sources(store: str) -> list[tuple[object, ...]]:
    return query_rows(store, "SELECT DISTINCT source FROM runs ORDER BY source")


def test_child_then_parent_equals_the_parent_alone(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    expected = clean_views(logs, make_store(tmp_path, "clean"))
    store = make_store(tmp_path, "nested")
    child = convert(logs / "sweep", store)
    assert child.runs == 3 and child.bytes_read > 0

    parent = convert(logs, store)

    assert views(store) == expected
    assert sources(store) == [(str(logs),)]
    # The sweep's five files (four event files and the sidecar) moved, none read again:
    # only the parent's own two files were read.
    assert parent.files_taken_over == 5
    assert parent.files_read == 2 and parent.files_unchanged == 5
    sizes = sum(
        path.stat().st_size
        for path in (logs / "baseline", logs / "probe")
        for path in path.iterdir()
    )
    assert parent.bytes_read == sizes
    assert parent.taken_over == [f"took over 5 files of 3 runs stored from {logs / 'sweep'}"]
    # A second pass has nothing left to take over.
    again = convert(logs, store)
    assert again.files_taken_over == 0 and again.files_read == 0 and again.taken_over == []


def test_parent_then_child_keeps_each_file_once(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    """The union of the two sources: ``logs`` without the sweep's runs, plus ``logs/sweep``
    alone (each stored into a store of its own, then compared run by run)."""
    store = make_store(tmp_path, "nested")
    convert(logs, store)
    child = convert(logs / "sweep", store)
    assert child.files_taken_over == 5 and child.files_read == 0 and child.bytes_read == 0

    sweep_alone = clean_views(logs / "sweep", make_store(tmp_path, "sweep"))
    parent_alone = clean_views(logs, make_store(tmp_path, "parent"))
    found = views(store)
    for view in VIEWS:
        parent_rest = [row for row in parent_alone[view] if not _in_sweep(row)]
        assert found[view] == sorted(sweep_alone[view] + parent_rest, key=repr), view
    # Every event file once, each in one run.
    paths = query_rows(
        store, "SELECT r.source, f.path FROM event_files AS f JOIN runs AS r ON r.id = f.run_id"
    )
    assert sorted(paths) == sorted(
        [
            (str(logs), "baseline/events.out.tfevents.1.host"),
            (str(logs), "probe/events.out.tfevents.1.host"),
        ]
        + [(str(logs / "sweep"), path) for path in _sweep_files(logs)]
    )
    # Back to the parent: the sweep's files come back to it, still unread.
    parent = convert(logs, store)
    assert parent.files_taken_over == 5 and parent.bytes_read == 0
    assert views(store) == parent_alone


def _in_sweep(row: tuple[object, ...]) -> bool:
    """Whether a view row (without its run id) belongs to a run of the sweep."""
    return any(isinstance(value, str) and value.startswith("sweep/") for value in row[:4])


def _sweep_files(logs: Path) -> list[str]:
    sweep = logs / "sweep"
    return sorted(
        str(path.relative_to(sweep))
        for path in sweep.rglob("*")
        if path.is_file() and ("tfevents" in path.name or path.name == "hparams.yaml")
    )


def test_a_grown_file_taken_over_reads_only_its_new_bytes(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store(tmp_path, "nested")
    convert(logs / "sweep", store)
    grown = logs / "sweep" / "lr_0.001" / "events.out.tfevents.1.host"
    before = grown.stat().st_size
    append_events(grown, events("loss", range(14, 30), 3e4))
    parent = convert(logs, store)
    assert parent.files_taken_over == 5
    own = sum(p.stat().st_size for p in (logs / "baseline", logs / "probe") for p in p.iterdir())
    assert parent.bytes_read == own + grown.stat().st_size - before
    assert views(store) == clean_views(logs, make_store(tmp_path, "clean"))


def test_a_store_holding_files_twice_is_repaired(
    logs: Path, make_store: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store an earlier version wrote with the sweep's files twice (once per source)
    keeps the parent's copy, and reads nothing."""
    store = make_store(tmp_path, "twice")
    convert(logs / "sweep", store)
    with monkeypatch.context() as earlier:  # what an earlier version did: read them again
        earlier.setattr("tbconvert.conversion.job.take_over", lambda *_args: None)
        convert(logs, store)
    assert len(sources(store)) == 2
    repaired = convert(logs, store)
    assert repaired.files_taken_over == 5 and repaired.bytes_read == 0
    assert views(store) == clean_views(logs, make_store(tmp_path, "clean"))
    assert sources(store) == [(str(logs),)]


def test_dry_run_says_what_would_be_taken_over_and_writes_nothing(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store(tmp_path, "nested")
    convert(logs / "sweep", store)
    before = view_rows(store)
    result = CliRunner().invoke(
        cli, ["tf", "--logdir", str(logs), "--store", store, "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["files"]["taken_over"] == 5
    assert summary["taken_over"] == [f"took over 5 files of 3 runs stored from {logs / 'sweep'}"]
    to_read = {entry["path"] for entry in summary["plan"] if entry["bytes"]}
    assert to_read == {"baseline/events.out.tfevents.1.host", "probe/events.out.tfevents.1.host"}
    assert f"would take over 5 files of 3 runs stored from {logs / 'sweep'}" in result.stderr
    assert view_rows(store) == before


def test_the_cli_says_what_it_took_over(logs: Path, store: str) -> None:
    convert(logs / "sweep", store)
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(logs), "--store", store])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "took over" in line]
    assert lines == [f"  taken:    took over 5 files of 3 runs stored from {logs / 'sweep'}"]


def test_a_symlink_to_the_parent_takes_over_too(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store(tmp_path, "nested")
    convert(logs / "sweep", store)
    link = tmp_path / "link"
    link.symlink_to(logs)
    assert convert(link, store).files_taken_over == 5
    assert views(store) == clean_views(logs, make_store(tmp_path, "clean"))


def test_sibling_logdirs_are_left_alone(logs: Path, store: str) -> None:
    convert(logs / "sweep" / "lr_0.1", store)
    assert convert(logs / "sweep" / "lr_0.01", store).files_taken_over == 0
    assert len(sources(store)) == 2


def test_a_file_deleted_since_is_taken_over_as_gone(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    """Found by the invariant's state machine: the parent source's file of the sweep that is
    no longer there becomes the sweep's, marked gone, rather than staying the parent's."""
    store = make_store(tmp_path, "nested")
    convert(logs, store)
    (logs / "sweep" / "lr_0.001" / "events.out.tfevents.1.host").unlink()
    child = convert(logs / "sweep", store)
    assert child.files_taken_over == 5 and child.files_gone == 1
    assert sources(store) == [(str(logs),), (str(logs / "sweep"),)]
    gone = query_rows(
        store,
        "SELECT r.source, r.run_path, f.path FROM event_files AS f "
        "JOIN runs AS r ON r.id = f.run_id WHERE f.status = 'gone'",
    )
    assert gone == [(str(logs / "sweep"), "lr_0.001", "lr_0.001/events.out.tfevents.1.host")]
    # A conversion of some runs only takes over only what it converts.
    assert convert(logs, store, runs=["baseline"]).files_taken_over == 0
    assert convert(logs, store).files_taken_over == 5


def test_url_logdirs_nest_by_bucket_and_prefix(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    from tests.reading.test_remote import memory_copy

    url = memory_copy(logs)
    expected = views_after(url, make_store(tmp_path, "clean"), {})
    store = make_store(tmp_path, "nested")
    convert(f"{url}/sweep", store)
    # A logdir inside the sweep takes its files over from the sweep's source, and a prefix
    # that only starts like the sweep's is another logdir.
    assert convert(f"{url}/sweep/lr_0.1", store).files_taken_over == 2
    assert convert(f"{url}/swee", store).files_taken_over == 0
    parent = convert(url, store)
    assert parent.files_taken_over == 5
    assert parent.taken_over == [
        f"took over 3 files of 2 runs stored from {url}/sweep",
        f"took over 2 files of 1 run stored from {url}/sweep/lr_0.1",
    ]
    assert views(store) == expected
    # The same prefix in a local directory is no URL's.
    assert convert(logs / "sweep", store).files_taken_over == 0


def views_after(url: str, store: str, options: dict[str, Any]) -> dict:
    convert(url, store, **options)
    return views(store)


def test_push_marks_follow_the_taken_over_files(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    """A sweep pushed before its parent took it over is not pushed again: its tracker runs
    and marks are the parent's runs' now (``tbconvert.push.state`` reads them)."""
    from tbconvert.push.state import new_scalars, remote_run, save_marks, save_run
    from tbconvert.store.engine import create_store_engine, store_url

    where = "mlflow http://tracker experiment 1"
    store = make_store(tmp_path, "pushed")
    convert(logs / "sweep", store)
    engine = create_store_engine(store_url(store))
    try:
        with engine.begin() as conn:
            for run_id, run_path in conn.exec_driver_sql("SELECT id, run_path FROM runs").all():
                save_run(conn, where, run_id, f"remote {run_path}", pending=False)
            series = [row[0] for row in conn.exec_driver_sql("SELECT id FROM series").all()]
            last: dict[tuple[int, int], Any] = {}
            for point, _covered in new_scalars(conn, where, series):
                last[point.series_id, point.file_id] = point
            save_marks(conn, where, "scalars", [(point, 1) for point in last.values()])
        convert(logs, store)
        with engine.connect() as conn:
            runs = dict(conn.exec_driver_sql("SELECT run_path, id FROM runs").all())
            for run in SWEEP_RUNS:
                assert remote_run(conn, where, runs[f"sweep/{run}"]) == (f"remote {run}", False)
            series = [row[0] for row in conn.exec_driver_sql("SELECT id FROM series").all()]
            left = {point.file_path for point, _covered in new_scalars(conn, where, series)}
    finally:
        engine.dispose()
    # Only the parent's own runs have points no push sent.
    assert left == {"baseline/events.out.tfevents.1.host", "probe/events.out.tfevents.1.host"}


def test_a_taken_over_s3_sweep_is_not_fetched_even_to_classify_it(
    make_store: StoreFactory, tmp_path: Path, s3: Any
) -> None:
    """The parent reads only its own objects: PyTorch's ``add_scalars`` directories are told
    from runs by their first records, and the parent classifies the sweep's objects by the
    heads the sweep's conversion read."""
    from tests.support import layouts

    local = tmp_path / "logs"
    layouts.pytorch_sweep(local / "sweep")
    write_events(local / "baseline" / "events.out.tfevents.1.host", events("loss", range(9), 1e3))
    url = s3.upload(local, s3.bucket(f"heads-{make_store.backend}"), "logs")
    options = {"storage_options": s3.storage_options, "progress": False}
    expected = views_after(url, make_store(tmp_path, "clean"), options)
    store = make_store(tmp_path, "nested")
    convert(f"{url}/sweep", store, **options)
    s3.counts(reset=True)
    parent = convert(url, store, **options)
    fetched = s3.counts(reset=True)
    own = (local / "baseline" / "events.out.tfevents.1.host").stat().st_size
    assert parent.files_taken_over == 12 and parent.bytes_read == own
    assert fetched["object_bytes"] == own, fetched
    assert views(store) == expected
    # The heads are the parent's now: a re-run fetches nothing.
    convert(url, store, **options)
    assert s3.counts(reset=True)["object_bytes"] == 0


def test_a_parent_converted_while_its_sweep_is_read_takes_over_without_doubling(
    logs: Path, make_store: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's conversion runs whole between two chunks of the sweep's: it takes over
    the file the sweep was reading and reads it on; the sweep's conversion leaves that file to
    it, and at its end takes the sweep's files back.  Every file is in one run throughout."""
    from tbconvert.conversion import job as job_module

    big = logs / "sweep" / "lr_0.001" / "events.out.tfevents.1.host"
    write_events(big, events("loss", range(200), 3e4))
    store = make_store(tmp_path, "together")
    account = job_module.Job.account
    parent: list[Any] = []

    def account_then_the_parent_converts(job: Any, outcome: Any, advance: Any) -> None:
        account(job, outcome, advance)
        if not parent and outcome.task.path == str(big) and not outcome.chunk.done:
            parent.append(convert(logs, store))

    monkeypatch.setattr(job_module.Job, "account", account_then_the_parent_converts)
    child = convert(logs / "sweep", store, chunk_points=40)
    monkeypatch.undo()

    assert parent and parent[0].files_taken_over >= 1
    assert child.files_taken_over == 5  # back from the parent, at the child's end
    assert _each_file_once(store, logs)
    expected = clean_views(logs, make_store(tmp_path, "clean"))
    again = convert(logs, store)
    assert again.files_taken_over == 5 and again.bytes_read == 0
    assert views(store) == expected


def _each_file_once(store: str, logs: Path) -> bool:
    held = query_rows(
        store,
        "SELECT r.logdir, f.path FROM event_files AS f JOIN runs AS r ON r.id = f.run_id",
    )
    absolute = [Path(str(logdir)) / str(path) for logdir, path in held]
    on_disk = [
        path
        for path in logs.rglob("*")
        if path.is_file() and ("tfevents" in path.name or path.name == "hparams.yaml")
    ]
    return sorted(absolute) == sorted(on_disk)


def test_a_watch_pass_that_only_took_files_over_says_so(
    logs: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tbconvert.cli.convert import _print_pass

    convert(logs, store)
    summary = convert(logs / "sweep", store)
    assert summary.files_read == 0
    _print_pass(summary)
    line = capsys.readouterr().err
    assert "pass: 0 files read, 5 taken over; 0 points (none)" in line


def test_a_run_of_several_files_moves_point_by_point(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    """A resumed run (two files in one directory) cannot move its series whole with its
    first file: the points move to series of the same tags, the summaries are recounted."""
    resumed = logs / "sweep" / "lr_0.01" / "events.out.tfevents.2.host"
    write_events(resumed, events("loss", range(10, 30), 2.5e4))
    store = make_store(tmp_path, "nested")
    convert(logs / "sweep", store)
    parent = convert(logs, store)
    assert parent.files_taken_over == 6 and parent.files_read == 2
    assert views(store) == clean_views(logs, make_store(tmp_path, "clean"))


def test_a_named_source_nests_by_where_it_was_read(
    logs: Path, make_store: StoreFactory, tmp_path: Path
) -> None:
    store = make_store(tmp_path, "named")
    convert(logs / "sweep", store, source="the-sweep")
    parent = convert(logs, store, source="the-logs")
    assert parent.files_taken_over == 5 and parent.files_read == 2
    assert sources(store) == [("the-logs",)]
