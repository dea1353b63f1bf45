"""Logdirs in an object store (design §12), against a real S3-compatible server on 127.0.0.1
(``tests/support/s3server.py``) whose own counts say what was fetched."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert, watch
from tbconvert.conversion import plan as plan_module
from tbconvert.errors import LogdirError, MissingDependency
from tests.safety.test_oracle import write_hand_built, write_tensorboardx
from tests.support import layouts
from tests.support.children import child_env
from tests.support.eventfiles import append_events, scalar_events, write_events
from tests.support.s3server import DENIED_KEY, S3Server
from tests.support.snapshots import view_rows, without_run_ids

_BUCKETS = itertools.count()
EVENTS = "events.out.tfevents.1"
# botocore's client settings (s3fs's ``config_kwargs``) for a single attempt per request.
UNRETRIED = {"retries": {"total_max_attempts": 1}}


def new_bucket(s3: S3Server) -> str:
    return s3.bucket(f"logs-{os.getpid()}-{next(_BUCKETS)}")


def every_writer(root: Path) -> None:
    """A logdir of every writer's layout and every plugin, sidecars included."""
    write_tensorboardx(root / "plugins")
    write_hand_built(root / "plugins")
    layouts.tensorboardx_sweep(root / "tbx")
    layouts.pytorch_sweep(root / "torch")
    layouts.lightning(root / "lightning")
    layouts.keras(root / "keras")
    layouts.tf2_hparams(root / "tf2")
    layouts.ray_tune(root / "ray")


def local_copy(fs: Any, url: str, target: Path) -> Path:
    """The objects under ``url`` downloaded one by one (the GCS emulator answers concurrent
    requests slowly), with the times of the download, not the objects': nothing in the store
    may depend on a file's time (design §6)."""
    root = url.split("://", 1)[1]
    for path in fs.find(root):
        local = target / path[len(root) :].lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(fs.cat_file(path))
    return target


def comparable(store: Path, logdir: str) -> dict[str, list[tuple[object, ...]]]:
    """Every view's rows, with the logdir (the one column that names where it was read
    from) replaced."""
    views = view_rows(store)
    return {
        view: [tuple("LOGDIR" if value == logdir else value for value in row) for row in found]
        for view, found in views.items()
    }


def convert_url(s3: S3Server, url: str, store: Path, **options: Any) -> Any:
    return convert(url, store, storage_options=s3.storage_options, progress=False, **options)


@pytest.fixture(params=["s3", "gs", "az"])
def object_store(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    """An object store of each protocol in turn: (something with ``bucket`` and ``upload``,
    the storage options that reach it)."""
    if request.param == "s3":
        s3: S3Server = request.getfixturevalue("s3")
        return s3, s3.storage_options
    emulator = request.getfixturevalue({"gs": "gcs", "az": "azurite"}[request.param])
    return emulator, emulator.storage_options


@pytest.mark.slow
def test_a_logdir_of_every_writer_converts_as_its_local_copy(
    object_store: tuple[Any, dict[str, Any]], tmp_path: Path
) -> None:
    store, options = object_store
    every_writer(tmp_path / "logs")
    url = store.upload(tmp_path / "logs", store.bucket(f"every-{next(_BUCKETS)}"), "exp/2026")
    import fsspec

    fs = fsspec.filesystem(url.split("://")[0], **options)
    copy = local_copy(fs, url, tmp_path / "copy")

    remote = convert(url, tmp_path / "remote.db", storage_options=options, progress=False)
    local = convert(copy, tmp_path / "local.db", progress=False)

    assert remote.exit_code == local.exit_code == 0
    assert remote.logdir == url
    assert remote.runs == local.runs > 10
    assert comparable(tmp_path / "remote.db", url) == comparable(tmp_path / "local.db", str(copy))


def test_a_rerun_over_an_unchanged_sweep_fetches_no_object_data(
    s3: S3Server, tmp_path: Path
) -> None:
    for run in range(20):
        write_events(tmp_path / "logs" / f"run{run}" / EVENTS, scalar_events("loss", range(50)))
    url = s3.upload(tmp_path / "logs", new_bucket(s3), "sweep")
    s3.counts(reset=True)
    first = convert_url(s3, url, tmp_path / "runs.db")
    fetched = s3.counts(reset=True)
    size = sum(path.stat().st_size for path in (tmp_path / "logs").rglob("*") if path.is_file())

    again = convert_url(s3, url, tmp_path / "runs.db")
    counts = s3.counts(reset=True)

    # Every object once, and the first bytes of three that tell whether the store holds
    # this logdir under another name (``conversion.sources``).
    assert first.files_read == 20
    assert size <= fetched["object_bytes"] <= size + 3 * (size // 20)
    assert again.files_unchanged == 20
    assert counts["object_gets"] == 0 and counts["object_bytes"] == 0


@pytest.mark.parametrize("grows", ["run", "run/loss_train"], ids=["run", "sub-writer"])
def test_an_object_grown_by_reupload_is_read_from_its_offset(
    s3: S3Server, tmp_path: Path, grows: str
) -> None:
    """The new bytes and one head (16 KiB) per pass: the layout (for a sub-writer's file),
    the planner and the reader all look at the first record, and share one fetch."""
    logs = tmp_path / "logs"
    for directory in ("run", "run/loss_train"):
        write_events(logs / directory / EVENTS, scalar_events("loss", range(20_000)))
    path = logs / grows / EVENTS
    bucket = new_bucket(s3)
    url = s3.upload(logs, bucket, "grow")
    convert_url(s3, url, tmp_path / "runs.db")
    before = path.stat().st_size
    append_events(path, scalar_events("loss", range(20_000, 21_000)))
    added = path.stat().st_size - before
    # Object stores have no append: the object is replaced (and only it: the other keeps its
    # time, as a writer's other files do).
    s3.client().put_object(Bucket=bucket, Key=f"grow/{grows}/{EVENTS}", Body=path.read_bytes())
    s3.counts(reset=True)

    grown = convert_url(s3, url, tmp_path / "runs.db")
    counts = s3.counts(reset=True)
    local = convert(logs, tmp_path / "local.db", progress=False)

    assert grown.exit_code == local.exit_code == 0 and grown.total_points == 1000
    assert counts["object_gets"] == 2  # the head, then the bytes from the stored offset
    assert counts["object_bytes"] == added + (16 << 10)
    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


def test_a_replaced_object_is_read_again(s3: S3Server, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    bucket = new_bucket(s3)
    write_events(logs / "run" / EVENTS, scalar_events("loss", range(100)))
    url = s3.upload(logs, bucket, "replace")
    convert_url(s3, url, tmp_path / "runs.db")
    write_events(logs / "run" / EVENTS, scalar_events("acc", range(500), base=2e9))
    s3.upload(logs, bucket, "replace")

    convert_url(s3, url, tmp_path / "runs.db")
    convert(logs, tmp_path / "local.db", progress=False)

    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


def test_a_truncated_object_converts_as_the_same_local_file(s3: S3Server, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    path = write_events(logs / "run" / EVENTS, scalar_events("loss", range(300)))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])  # torn inside the last record
    url = s3.upload(logs, new_bucket(s3), "torn")

    remote = convert_url(s3, url, tmp_path / "runs.db")
    local = convert(logs, tmp_path / "local.db", progress=False)

    assert remote.exit_code == local.exit_code
    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


def test_an_object_deleted_between_listing_and_reading_is_reported(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    for run in ("a", "b"):
        write_events(logs / run / EVENTS, scalar_events("loss", range(10)))
    bucket = new_bucket(s3)
    url = s3.upload(logs, bucket, "gone")
    plan_files = plan_module.plan_files

    def plan_then_delete(*args: Any, **kwargs: Any) -> Any:
        plans = plan_files(*args, **kwargs)
        s3.client().delete_object(Bucket=bucket, Key="gone/b/events.out.tfevents.1")
        return plans

    monkeypatch.setattr("tbconvert.conversion.job.plan_files", plan_then_delete)
    summary = convert_url(s3, url, tmp_path / "runs.db")

    assert summary.exit_code == 3
    assert [problem.path for problem in summary.problems] == ["b/events.out.tfevents.1"]
    monkeypatch.undo()
    again = convert_url(s3, url, tmp_path / "runs.db")
    (logs / "b" / "events.out.tfevents.1").unlink()
    convert(logs, tmp_path / "local.db", progress=False)
    assert again.exit_code == 0
    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


@pytest.mark.parametrize(
    ("logdir", "options", "message"),
    [
        ("s3://no-such-bucket/logs", {}, "does not exist"),
        ("s3://{bucket}/logs", {"key": DENIED_KEY}, "access denied"),
        (
            "s3://{bucket}/logs",
            # One attempt: botocore's retries of a refused connection take seconds to end
            # in the same error.
            {"endpoint_url": "http://127.0.0.1:9", "config_kwargs": UNRETRIED},
            "cannot list the logdir",
        ),
    ],
)
def test_a_logdir_that_cannot_be_listed_is_one_line_and_writes_nothing(
    s3: S3Server, tmp_path: Path, logdir: str, options: dict[str, Any], message: str
) -> None:
    url = logdir.format(bucket=new_bucket(s3))
    with pytest.raises(LogdirError) as raised:
        convert(url, tmp_path / "runs.db", storage_options={**s3.storage_options, **options})
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert text.startswith(url)
    assert s3.storage_options["secret"] not in text
    assert not (tmp_path / "runs.db").exists()


def test_a_protocol_without_its_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.registry import _registry

    monkeypatch.setitem(sys.modules, "gcsfs", None)
    monkeypatch.delitem(_registry, "gs", raising=False)  # imported by an earlier test
    with pytest.raises(MissingDependency, match=r"pip install '\.\[gcs\]'"):
        convert("gs://bucket/logs", tmp_path / "runs.db")
    assert not (tmp_path / "runs.db").exists()


def test_watch_follows_a_url_logdir(s3: S3Server, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_events(logs / "first" / EVENTS, scalar_events("loss", range(10)))
    bucket = new_bucket(s3)
    url = s3.upload(logs, bucket, "watched")
    passes: list[int] = []

    def add_a_run(summary: Any) -> None:
        passes.append(summary.files_read)
        if len(passes) == 1:
            write_events(logs / "second" / EVENTS, scalar_events("loss", range(10)))
            s3.upload(logs / "second", bucket, "watched/second")

    total = watch(
        url,
        tmp_path / "runs.db",
        interval=0,
        passes=2,
        on_pass=add_a_run,
        storage_options=s3.storage_options,
        progress=False,
    )

    assert passes == [1, 1]
    assert total.exit_code == 0
    convert(logs, tmp_path / "local.db", progress=False)
    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


def test_a_dry_run_lists_the_bytes_to_fetch(s3: S3Server, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    path = write_events(logs / "run" / EVENTS, scalar_events("loss", range(100)))
    url = s3.upload(logs, new_bucket(s3), "dry")
    s3.counts(reset=True)

    summary = convert_url(s3, url, tmp_path / "runs.db", dry_run=True)

    assert [(row["action"], row["bytes"]) for row in summary.plan] == [("new", path.stat().st_size)]
    assert s3.counts()["object_bytes"] == 0
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.slow
def test_a_conversion_killed_mid_fetch_is_completed_by_the_next(
    s3: S3Server, tmp_path: Path
) -> None:
    """kill -9 once the server has served k objects (the fetch under way when it dies),
    for several k; each next run completes the store exactly."""
    logs = tmp_path / "logs"
    for run in range(120):
        write_events(logs / f"sweep/run{run:03}" / EVENTS, scalar_events("loss", range(200)))
    write_events(logs / "long" / EVENTS, scalar_events("loss", range(60_000)))
    url = s3.upload(logs, new_bucket(s3), "crash")
    store = tmp_path / "runs.db"
    command = [sys.executable, "-m", "tbconvert", "tf", "--logdir", url, "--store", str(store)]
    env = child_env(**s3.env)
    killed = 0
    for served in (1, 8, 40, 100):
        s3.counts(reset=True)
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 300  # only bounds the wait, generously on a loaded host
        while process.poll() is None and s3.counts()["object_gets"] < served:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed += 1
        process.wait()
    assert killed >= 2  # the kills landed while objects were being fetched

    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    convert(logs, tmp_path / "local.db", progress=False)
    assert comparable(store, url) == comparable(tmp_path / "local.db", str(logs))


def test_the_command_finds_credentials_in_the_environment_and_fails_in_one_line(
    s3: S3Server, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    write_events(logs / "run" / EVENTS, scalar_events("loss", range(10)))
    url = s3.upload(logs, new_bucket(s3), "cli")
    env = child_env(**s3.env)
    command = [sys.executable, "-m", "tbconvert", "tf", "--store", str(tmp_path / "runs.db")]

    done = subprocess.run([*command, "--logdir", url], env=env, capture_output=True, text=True)
    missing = subprocess.run(
        [*command, "--logdir", "s3://no-such-bucket/x"], env=env, capture_output=True, text=True
    )
    denied = subprocess.run(
        [*command, "--logdir", url],
        env={**env, "AWS_ACCESS_KEY_ID": DENIED_KEY},
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr
    assert f"Converted {url}" in done.stderr
    for failed, message in ((missing, "does not exist"), (denied, "access denied")):
        assert failed.returncode == 1
        assert failed.stderr.count("\n") == 1 and message in failed.stderr
        assert s3.env["AWS_SECRET_ACCESS_KEY"] not in failed.stderr


def test_an_http_listing_converts_and_grows_as_the_local_logdir(tmp_path: Path) -> None:
    """Python's own HTTP server: directory listings as links, no sizes, and Range ignored
    (every ranged read gets the whole object back)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    logs = tmp_path / "logs"
    layouts.tensorboardx_sweep(logs / "tbx")
    grown = write_events(logs / "long" / EVENTS, scalar_events("loss", range(2_000)))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(logs))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        first = convert(url, tmp_path / "runs.db", progress=False)
        append_events(grown, scalar_events("loss", range(2_000, 2_500)))
        second = convert(url, tmp_path / "runs.db", progress=False)
    finally:
        server.shutdown()
    convert(logs, tmp_path / "local.db", progress=False)

    assert first.exit_code == second.exit_code == 0
    assert second.files_read == 1
    assert comparable(tmp_path / "runs.db", url) == comparable(tmp_path / "local.db", str(logs))


def test_workers_read_a_url_logdir_as_one_process_does(s3: S3Server, tmp_path: Path) -> None:
    """``--jobs 2``: forked workers make their own file-system instances (fsspec's)."""
    logs = tmp_path / "logs"
    for run in range(6):
        write_events(logs / f"run{run}" / EVENTS, scalar_events("loss", range(3000)))
    url = s3.upload(logs, new_bucket(s3), "jobs")

    two = convert_url(s3, url, tmp_path / "two.db", jobs=2)
    one = convert_url(s3, url, tmp_path / "one.db")

    assert two.exit_code == one.exit_code == 0 and two.files_read == 6
    assert comparable(tmp_path / "two.db", url) == comparable(tmp_path / "one.db", url)


def test_a_rerun_over_sub_writers_fetches_nothing_either(
    s3: S3Server, tmp_path: Path, store: str
) -> None:
    """add_scalars and add_hparams make directories inside a run, which the layout tells from
    runs by their files' first records: read once, then kept in the store with the size and
    time they were read at (on both backends)."""
    layouts.tensorboardx_sweep(tmp_path / "logs")
    url = s3.upload(tmp_path / "logs", new_bucket(s3), "nested")
    first = convert_url(s3, url, store)
    s3.counts(reset=True)

    again = convert_url(s3, url, store)
    counts = s3.counts(reset=True)

    assert first.exit_code == again.exit_code == 0
    assert again.files_unchanged == again.files_total > again.runs
    assert counts["object_gets"] == 0 and counts["object_bytes"] == 0


def test_a_sub_writer_file_replaced_is_read_again_by_the_layout(
    s3: S3Server, tmp_path: Path
) -> None:
    """A nested directory whose first file changes is classified from its new first records:
    here an add_scalars key directory becomes a run of its own (other tags than its main)."""
    logs = tmp_path / "logs"
    layouts.tensorboardx_sweep(logs)
    bucket = new_bucket(s3)
    url = s3.upload(logs, bucket, "changed")
    convert_url(s3, url, tmp_path / "runs.db")
    key_dir = sorted(logs.glob("*/acc/train"))[0]
    (event_file,) = key_dir.iterdir()
    write_events(event_file, scalar_events("other", range(5)) + scalar_events("more", range(5)))
    s3.upload(logs, bucket, "changed")

    remote = convert_url(s3, url, tmp_path / "runs.db")
    local = convert(logs, tmp_path / "local.db", progress=False)

    assert remote.runs == local.runs > 3  # the key directory no longer folds into its run
    # Runs made on the second pass come after the first pass's: compare without run ids.
    assert without_run_ids(comparable(tmp_path / "runs.db", url)) == without_run_ids(
        comparable(tmp_path / "local.db", str(logs))
    )
