"""Discovery's exact warnings and errors, and the classification edges mutants showed no
test pinned down (docs/mutation.md).  Expected texts are written from the paths made here."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from tbconvert.errors import LogdirError
from tbconvert.reading import discovery
from tbconvert.reading.discovery import classify
from tests.support.eventfiles import simple_value, summary_event, write_events

FILE = "events.out.tfevents.1.h"


def _event_file(directory: Path, name: str = FILE) -> Path:
    return write_events(directory / name, [summary_event(0, 1.0, [simple_value("x", 1.0)])])


@pytest.mark.mutant_gap
def test_each_kind_of_link_gets_its_own_warning(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    _event_file(logdir / "run_5")
    _event_file(logdir / "group" / "run_1")
    (logdir / "run_5" / "up").symlink_to(logdir, target_is_directory=True)
    (logdir / "group" / "run_1" / "again").symlink_to(
        logdir / "group" / "run_1", target_is_directory=True
    )
    (logdir / "group" / "same").symlink_to(logdir / "run_5", target_is_directory=True)
    (logdir / "self").symlink_to(logdir / "self")
    (logdir / "gone").symlink_to(tmp_path / "missing")
    result = classify(logdir)
    # group/run_1 is two levels down: group is the run and run_1 its context.
    assert [(f.run_path, f.context) for f in result.files] == [("group", "run_1"), ("run_5", "")]
    assert result.warnings == tuple(
        sorted(
            [
                f"{logdir}/gone: broken symlink, ignored",
                f"{logdir}/run_5/up: symlink loop back to the logdir, not followed",
                f"{logdir}/group/run_1/again: symlink loop back to group/run_1, not followed",
                f"{logdir}/group/same: same directory as run_5, walked only once",
                f"{logdir}/self: symlink loop, not followed",
            ]
        )
    )


class _FailingEntry:
    """A directory entry whose type cannot be read (an I/O error on a network mount)."""

    def __init__(self, path: Path) -> None:
        self.name, self.path = path.name, str(path)

    def is_dir(self) -> bool:
        raise OSError(errno.EIO, "Input/output error", self.path)

    def is_symlink(self) -> bool:
        raise AssertionError("not asked once is_dir failed")


@pytest.mark.mutant_gap
def test_an_entry_that_cannot_be_examined_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _event_file(tmp_path / "run")
    scan = discovery._Walker._scan

    def scan_with_a_bad_entry(walker: Any, rel: str, path: str) -> list[Any]:
        entries = scan(walker, rel, path)
        return [*entries, _FailingEntry(Path(path) / "zz_bad")] if rel == "" else entries

    monkeypatch.setattr(discovery._Walker, "_scan", scan_with_a_bad_entry)
    result = classify(tmp_path)
    assert [run.run_path for run in result.runs] == ["run"]
    assert result.warnings == (f"{tmp_path}/zz_bad: Input/output error, skipped",)


@pytest.mark.mutant_gap
def test_an_unreadable_subdirectory_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _event_file(tmp_path / "run_ok")
    _event_file(tmp_path / "run_locked")
    locked, real_scandir = str(tmp_path / "run_locked"), os.scandir

    def scandir(path: str) -> Any:
        if os.fspath(path) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert classify(tmp_path).warnings == (
        f"{locked}: cannot read directory (Permission denied), skipped",
    )


@pytest.mark.mutant_gap
def test_an_unreadable_logdir_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scandir(path: str) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(LogdirError) as caught:
        classify(tmp_path)
    assert caught.value.path == str(tmp_path)
    assert caught.value.hint == "check its permissions"
    assert "cannot read the logdir (Permission denied)" in str(caught.value)


@pytest.mark.mutant_gap
def test_missing_logdir_and_a_file_as_logdir_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(LogdirError) as missing:
        classify(tmp_path / "nope")
    assert missing.value.hint == "check the --logdir path"
    assert "logdir does not exist" in str(missing.value)
    event = _event_file(tmp_path)
    with pytest.raises(LogdirError) as a_file:
        classify(event)
    assert a_file.value.path == str(event)
    assert a_file.value.hint == "pass the directory that holds the event files, not a file"


@pytest.mark.mutant_gap
def test_an_empty_logdir_is_a_warning_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = classify(tmp_path)
    assert result.runs == () and result.warnings == (f"no event files under {tmp_path}",)


@pytest.mark.mutant_gap
def test_depths_and_roles(tmp_path: Path) -> None:
    # A run three levels down: its parent is the run, the files a context, the grandparent
    # a group; a file beside the run's directory in the group is an orphan of the group.
    for directory in ("a/b/c/ctx", "x", "a/b/c"):
        _event_file(tmp_path / directory)
    _event_file(tmp_path / "a" / "b", "events.out.tfevents.2.h")
    result = classify(tmp_path)
    layout = {(f.rel_path, f.run_path, f.context) for f in result.files}
    assert layout == {
        (f"a/b/c/ctx/{FILE}", "a/b/c", "ctx"),
        (f"a/b/c/{FILE}", "a/b/c", ""),
        (f"x/{FILE}", "x", ""),
        ("a/b/events.out.tfevents.2.h", "a/b", ""),
    }
    assert result.groups == ("a/b",)
    assert result.orphans == ("a/b/events.out.tfevents.2.h",)
    assert {run.run_path: run.orphans for run in result.runs} == {
        "a/b": True,
        "a/b/c": False,
        "x": False,
    }
    flat = classify(tmp_path, flat=True)
    assert {(f.rel_path, f.run_path, f.context) for f in flat.files} == {
        (f"a/b/c/ctx/{FILE}", "a/b/c/ctx", ""),
        (f"a/b/c/{FILE}", "a/b/c", ""),
        (f"x/{FILE}", "x", ""),
        ("a/b/events.out.tfevents.2.h", "a/b", ""),
    }
    # With --flat a/b/c holds a run (ctx), so it is a group and its own file an orphan.
    assert flat.groups == ("a", "a/b/c")
    assert flat.orphans == (f"a/b/c/{FILE}",)


@pytest.mark.mutant_gap
def test_a_link_to_a_file_that_is_no_event_file_is_ignored_without_a_warning(
    tmp_path: Path,
) -> None:
    logdir = tmp_path / "logs"
    _event_file(logdir / "run")
    (tmp_path / "notes.txt").write_text("hello\n")
    (logdir / "run" / "notes").symlink_to(tmp_path / "notes.txt")
    result = classify(logdir)
    assert [f.rel_path for f in result.files] == [f"run/{FILE}"]
    assert result.warnings == ()


@pytest.mark.mutant_gap
def test_a_context_keeps_every_character_of_its_name(tmp_path: Path) -> None:
    # Only the "/" after the run's path is taken off (characters such as X stay).
    logdir = tmp_path / "logs"
    for context in ("XXtrain", "X"):
        _event_file(logdir / "run" / context)
    result = classify(logdir)
    assert [(f.run_path, f.context) for f in result.files] == [("run", "X"), ("run", "XXtrain")]


@pytest.mark.mutant_gap
@pytest.mark.parametrize("skip", [False, True])
def test_the_classification_says_whether_orphans_are_skipped(tmp_path: Path, skip: bool) -> None:
    logdir = tmp_path / "logs"
    _event_file(logdir / "group" / "run" / "train")
    _event_file(logdir / "group")  # an orphan in the group
    result = classify(logdir, skip_orphans=skip)
    assert result.skip_orphans is skip
    assert result.orphans == (f"group/{FILE}",)
    assert len(result.files) == (1 if skip else 2)
