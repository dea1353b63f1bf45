"""The file layer of URL logdirs (``reading.remote``), on fsspec's in-memory file system:
listing, ranged reads against the bytes themselves, and the options a user types."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import fsspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tbconvert import convert
from tbconvert.errors import LogdirError
from tbconvert.reading import remote
from tbconvert.reading.discovery import classify
from tbconvert.urls import redacted
from tests.support import layouts
from tests.support.snapshots import view_rows

_ROOTS = itertools.count()


def memory_copy(local: Path) -> str:
    """Every file below ``local`` copied into a fresh ``memory://`` directory; its URL."""
    fs = fsspec.filesystem("memory")
    root = f"/copy{next(_ROOTS)}"
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return f"memory://{root}"


def test_a_listing_classifies_as_the_local_walk(tmp_path: Path) -> None:
    layouts.tensorboardx_sweep(tmp_path / "tbx")
    layouts.lightning(tmp_path / "pl")
    url = memory_copy(tmp_path)

    listed, walked = classify(url), classify(tmp_path)

    assert listed.logdir == url
    assert [(run.run_path, run.group_path) for run in listed.runs] == [
        (run.run_path, run.group_path) for run in walked.runs
    ]
    assert [(f.rel_path, f.context, f.sidecar) for f in listed.files] == [
        (f.rel_path, f.context, f.sidecar) for f in walked.files
    ]
    sizes = {f.rel_path: f.listed for f in listed.files}
    assert all(sizes[f.rel_path][0] == Path(f.path).stat().st_size for f in walked.files)  # type: ignore[index]


def test_a_memory_logdir_converts_as_the_local_one(tmp_path: Path) -> None:
    layouts.pytorch_sweep(tmp_path / "logs" / "torch")
    layouts.keras(tmp_path / "logs" / "keras")
    url = memory_copy(tmp_path / "logs")

    convert(url, tmp_path / "remote.db", progress=False)
    convert(tmp_path / "logs", tmp_path / "local.db", progress=False)

    def without_logdir(store: Path, logdir: str) -> dict[str, list[tuple[object, ...]]]:
        return {
            view: [tuple(None if v == logdir else v for v in row) for row in found]
            for view, found in view_rows(store).items()
        }

    assert without_logdir(tmp_path / "remote.db", url) == without_logdir(
        tmp_path / "local.db", str(tmp_path / "logs")
    )


def test_an_object_as_logdir_is_refused(tmp_path: Path) -> None:
    fsspec.filesystem("memory").pipe_file("/lonely/events.out.tfevents.1", b"x")
    with pytest.raises(LogdirError, match="not a directory"):
        classify("memory://lonely/events.out.tfevents.1")


def test_an_empty_prefix_is_an_empty_logdir() -> None:
    assert classify("memory://nothing-here").warnings == (
        "no event files under memory://nothing-here",
    )


_DATA = bytes(range(256)) * 400  # 100 KiB: above the small-read size, so both paths run


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["read", "seek", "readinto"]),
            st.integers(-1, len(_DATA) + 10),
            st.sampled_from([io.SEEK_SET, io.SEEK_CUR, io.SEEK_END]),
        ),
        max_size=12,
    )
)
def test_ranged_reads_give_the_bytes_a_local_file_gives(
    operations: list[tuple[str, int, int]],
) -> None:
    fsspec.filesystem("memory").pipe_file("/ranged/object", _DATA)
    remote_file = remote.open_remote("memory://ranged/object", len(_DATA))
    local = io.BytesIO(_DATA)
    try:
        for operation, number, whence in operations:
            if operation == "read":
                assert remote_file.read(number) == local.read(number)
            elif operation == "readinto":
                mine, theirs = bytearray(max(number, 0)), bytearray(max(number, 0))
                assert remote_file.readinto(mine) == local.readinto(theirs)  # type: ignore[attr-defined]
                assert mine == theirs
            elif (whence == io.SEEK_SET and number >= 0) or whence != io.SEEK_SET:
                target = max(0, {0: 0, 1: local.tell(), 2: len(_DATA)}[whence] + number)
                local.seek(target)
                remote_file.seek(number, whence)
            assert remote_file.tell() == local.tell()
    finally:
        remote_file.close()


@pytest.mark.parametrize(
    ("pairs", "options"),
    [
        (["anon=true", "use_ssl=False"], {"anon": True, "use_ssl": False}),
        (["endpoint_url=http://127.0.0.1:9000"], {"endpoint_url": "http://127.0.0.1:9000"}),
        (["secret=0123"], {"secret": "0123"}),  # digits stay a string: secrets may be digits
        (
            ['client_kwargs={"region_name": "eu-west-1"}'],
            {"client_kwargs": {"region_name": "eu-west-1"}},
        ),
        (["token=a=b"], {"token": "a=b"}),
    ],
)
def test_storage_options_parse_as_typed(pairs: list[str], options: dict[str, object]) -> None:
    assert remote.parse_storage_options(pairs) == options


def test_a_storage_option_without_a_value_never_echoes_it() -> None:
    with pytest.raises(ValueError) as raised:
        remote.parse_storage_options(["hunter2"])
    assert "hunter2" not in str(raised.value)


def test_credentials_in_a_url_are_never_shown() -> None:
    assert redacted("s3://user:pass@bucket/logs") == "s3://bucket/logs"
    assert redacted("https://me:token@mlflow.example:5000/") == "https://mlflow.example:5000/"
    assert redacted("gs://bucket/a@b/logs") == "gs://bucket/a@b/logs"
    assert redacted("/local/a@b") == "/local/a@b"


def test_a_gzipped_remote_event_file_reads_as_the_local_one(tmp_path: Path) -> None:
    import gzip

    from tbconvert.reading.records import RecordReader, open_event_file
    from tests.support.eventfiles import scalar_events, write_events

    path = write_events(tmp_path / "events.out.tfevents.1", scalar_events("loss", range(3000)))
    packed = gzip.compress(path.read_bytes())
    fsspec.filesystem("memory").pipe_file("/gz/events.out.tfevents.1.gz", packed)
    with open_event_file(str(path)) as local:
        expected = list(RecordReader(local))
    with open_event_file("memory://gz/events.out.tfevents.1.gz", len(packed)) as stream:
        assert isinstance(stream, gzip.GzipFile)
        assert list(RecordReader(stream)) == expected
