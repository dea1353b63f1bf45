"""Tests for tbconvert.reading.discovery: design §3 classification on real tensorboardX files,
and discovery's exact warnings and errors (links, unreadable entries, a logdir that is
missing, a file, unreadable or empty), whose expected texts are written from the paths made
here."""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from tensorboardX import SummaryWriter

from tbconvert import convert
from tbconvert.errors import LogdirError
from tbconvert.reading.discovery import (
    Classification,
    EventFileSource,
    classify,
    filter_runs,
    is_event_file,
)
from tbconvert.reading.walk import Walker
from tests.support.eventfiles import scalar_events, simple_value, summary_event, write_events
from tests.support.snapshots import sqlite_rows

# tensorboardX names files by the second and hostname only, so two writers in one directory
# within a second would collide without a distinct suffix.
_suffixes = itertools.count()


def write_event_file(directory: Path, tag: str = "loss") -> Path:
    """Write a real event file holding one scalar into ``directory`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    before = set(directory.iterdir())
    with SummaryWriter(logdir=str(directory), filename_suffix=f".f{next(_suffixes)}") as writer:
        writer.add_scalar(tag, 1.0, 0)
    (created,) = set(directory.iterdir()) - before
    return created


def rel(path: Path, logdir: Path) -> str:
    return path.relative_to(logdir).as_posix()


def placement(result: Classification) -> dict[str, tuple[str, str]]:
    """Map each classified file's rel_path to its (run_path, context)."""
    return {f.rel_path: (f.run_path, f.context) for f in result.files}


def assert_each_file_once(result: Classification, written: list[Path], logdir: Path) -> None:
    skipped = list(result.orphans) if result.skip_orphans else []
    classified = [f.rel_path for f in result.files] + skipped
    assert sorted(classified) == sorted(rel(p, logdir) for p in written)
    assert len(set(classified)) == len(classified)


# An event file of one hand-built scalar, named here (tensorboardX names its own files).
FILE = "events.out.tfevents.1.h"


def _event_file(directory: Path, name: str = FILE) -> Path:
    return write_events(directory / name, [summary_event(0, 1.0, [simple_value("x", 1.0)])])


@pytest.fixture
def aim_tree(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    """Aim's documented example tree (convert_data.md), files f1..f13."""
    logdir = tmp_path / "my_logdir"
    layout = {
        1: "run_1", 2: "run_1", 3: "group_1",
        4: "group_1/run_2/train", 5: "group_1/run_2/train",
        6: "group_1/run_2/validate", 7: "group_1/run_2/validate",
        8: "group_1/run_2", 9: "group_1/run_2",
        10: "group_1/run_3", 11: "group_1/run_3",
        12: "", 13: "",
    }  # fmt: skip
    files = {n: rel(write_event_file(logdir / d, tag=f"f{n}"), logdir) for n, d in layout.items()}
    return logdir, files


def test_aim_tree_default_mode(aim_tree: tuple[Path, dict[int, str]]) -> None:
    logdir, f = aim_tree
    result = classify(logdir, skip_orphans=True)
    assert [r.run_path for r in result.runs] == ["group_1/run_2", "group_1/run_3", "run_1"]
    assert placement(result) == {
        f[1]: ("run_1", ""), f[2]: ("run_1", ""),
        f[4]: ("group_1/run_2", "train"), f[5]: ("group_1/run_2", "train"),
        f[6]: ("group_1/run_2", "validate"), f[7]: ("group_1/run_2", "validate"),
        f[8]: ("group_1/run_2", ""), f[9]: ("group_1/run_2", ""),
        f[10]: ("group_1/run_3", ""), f[11]: ("group_1/run_3", ""),
    }  # fmt: skip
    assert result.orphans == tuple(sorted([f[3], f[12], f[13]]))
    assert result.groups == ("group_1",)
    assert [r.group_path for r in result.runs] == ["group_1", "group_1", ""]
    assert result.warnings == ()
    assert not result.flat
    assert result.logdir == str(logdir)


def test_aim_tree_flat_mode(aim_tree: tuple[Path, dict[int, str]]) -> None:
    logdir, f = aim_tree
    result = classify(logdir, flat=True, skip_orphans=True)
    assert [r.run_path for r in result.runs] == [
        "group_1/run_2/train",
        "group_1/run_2/validate",
        "group_1/run_3",
        "run_1",
    ]
    assert placement(result) == {
        f[1]: ("run_1", ""), f[2]: ("run_1", ""),
        f[4]: ("group_1/run_2/train", ""), f[5]: ("group_1/run_2/train", ""),
        f[6]: ("group_1/run_2/validate", ""), f[7]: ("group_1/run_2/validate", ""),
        f[10]: ("group_1/run_3", ""), f[11]: ("group_1/run_3", ""),
    }  # fmt: skip
    assert result.orphans == tuple(sorted([f[3], f[8], f[9], f[12], f[13]]))
    assert result.groups == ("group_1", "group_1/run_2")
    assert result.flat


@pytest.mark.parametrize("flat", [False, True], ids=["default", "flat"])
def test_aim_tree_orphans_are_kept_as_runs_of_their_directories(
    aim_tree: tuple[Path, dict[int, str]], flat: bool
) -> None:
    """design §3: the documented runs, groups and contexts, and besides them the orphans of
    each directory as a run at its path ("." for the logdir), context ''."""
    logdir, f = aim_tree
    skipped = classify(logdir, flat=flat, skip_orphans=True)
    kept = classify(logdir, flat=flat)
    assert [r for r in kept.runs if not r.orphans] == list(skipped.runs)
    assert kept.orphans == skipped.orphans and kept.groups == skipped.groups
    orphan_runs = {r.run_path: [s.rel_path for s in r.files] for r in kept.runs if r.orphans}
    expected = {".": sorted([f[12], f[13]]), "group_1": [f[3]]}
    if flat:
        expected["group_1/run_2"] = sorted([f[8], f[9]])
    assert orphan_runs == expected
    assert all(s.context == "" for r in kept.runs if r.orphans for s in r.files)
    assert_each_file_once(kept, [logdir / path for path in f.values()], logdir)


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


def test_event_file_paths_and_run_order(aim_tree: tuple[Path, dict[int, str]]) -> None:
    logdir, _ = aim_tree
    result = classify(logdir, skip_orphans=True)
    for source in result.files:
        assert os.path.isabs(source.path)
        assert Path(source.path) == logdir / source.rel_path
    run_2 = result.runs[0]
    assert [(s.context, Path(s.rel_path).name) for s in run_2.files] == sorted(
        (s.context, Path(s.rel_path).name) for s in run_2.files
    )
    assert [s.context for s in run_2.files] == ["", "", "train", "train", "validate", "validate"]


def test_logdir_that_is_a_single_run(tmp_path: Path) -> None:
    written = [write_event_file(tmp_path), write_event_file(tmp_path)]
    (tmp_path / "notes.txt").write_text("not an event file")
    for flat in (False, True):
        result = classify(tmp_path, flat=flat)
        assert [(r.run_path, r.group_path) for r in result.runs] == [(".", "")]
        assert placement(result) == {p.name: (".", "") for p in written}
        assert result.orphans == ()
        assert result.groups == ()


@pytest.mark.mutant_gap
def test_a_run_at_the_logdir_root_is_named_after_the_logdir(tmp_path: Path) -> None:
    logs, store = tmp_path / "my_experiment", tmp_path / "s.db"
    write_events(logs / FILE, scalar_events("loss", range(2)))
    convert(logs, store)
    assert sqlite_rows(store, "SELECT run_path, group_path, name FROM runs") == [
        (".", "", "my_experiment")
    ]


def test_plain_two_level_layout(tmp_path: Path) -> None:
    # SummaryWriter('logs/exp/run_a') lays files out like this. Aim's rules make the parent
    # `exp` the run and run_a/run_b its contexts; --flat and the auto layout give two runs in
    # group `exp`, as TensorBoard shows them.
    a = write_event_file(tmp_path / "exp" / "run_a")
    b = write_event_file(tmp_path / "exp" / "run_b")
    auto = classify(tmp_path)
    assert [(r.run_path, r.group_path) for r in auto.runs] == [
        ("exp/run_a", "exp"),
        ("exp/run_b", "exp"),
    ]
    assert auto.groups == ("exp",)
    default = classify(tmp_path, layout="aim")
    assert [r.run_path for r in default.runs] == ["exp"]
    assert placement(default) == {
        rel(a, tmp_path): ("exp", "run_a"),
        rel(b, tmp_path): ("exp", "run_b"),
    }
    assert default.groups == ()
    flat = classify(tmp_path, flat=True)
    assert [(r.run_path, r.group_path) for r in flat.runs] == [
        ("exp/run_a", "exp"),
        ("exp/run_b", "exp"),
    ]
    assert placement(flat) == {
        rel(a, tmp_path): ("exp/run_a", ""),
        rel(b, tmp_path): ("exp/run_b", ""),
    }
    assert flat.groups == ("exp",)


def test_nested_runs_claim_each_file_once(tmp_path: Path) -> None:
    # Aim converts a/b/c/d twice (as a context of `a` and of `a/b/c`); we do it once.
    top = [write_event_file(tmp_path / "a"), write_event_file(tmp_path / "a")]
    deep = [write_event_file(tmp_path / "a/b/c/d"), write_event_file(tmp_path / "a/b/c/d")]
    default = classify(tmp_path, layout="aim")
    assert_each_file_once(default, top + deep, tmp_path)
    assert placement(default) == {
        **{rel(p, tmp_path): ("a", "") for p in top},
        **{rel(p, tmp_path): ("a/b/c", "d") for p in deep},
    }
    assert default.groups == ("a/b",)
    flat = classify(tmp_path, flat=True)
    assert_each_file_once(flat, top + deep, tmp_path)
    assert placement(flat) == {
        **{rel(p, tmp_path): ("a", "") for p in top},
        **{rel(p, tmp_path): ("a/b/c/d", "") for p in deep},
    }


def test_same_basename_in_different_subpaths_stays_distinct(tmp_path: Path) -> None:
    # Aim keys a context by its directory's basename, merging a/d and a/b/c/d into context
    # `d` of run `a`. Here each directory keeps its own (run, context).
    own = write_event_file(tmp_path / "a")
    shallow = write_event_file(tmp_path / "a/d")
    deep = write_event_file(tmp_path / "a/b/c/d")
    result = classify(tmp_path, layout="aim")
    assert placement(result) == {
        rel(own, tmp_path): ("a", ""),
        rel(shallow, tmp_path): ("a", "d"),
        rel(deep, tmp_path): ("a/b/c", "d"),
    }
    # Two runs whose contexts share the basename `train` stay apart as well.
    x = write_event_file(tmp_path / "exp/x/train")
    y = write_event_file(tmp_path / "exp/y/train")
    result = classify(tmp_path, layout="aim")
    assert placement(result)[rel(x, tmp_path)] == ("exp/x", "train")
    assert placement(result)[rel(y, tmp_path)] == ("exp/y", "train")


@pytest.mark.mutant_gap
def test_depths_and_roles(tmp_path: Path) -> None:
    # A run three levels down: its parent is the run, the files a context, the grandparent
    # a group; a file beside the run's directory in the group is an orphan of the group.
    for directory in ("a/b/c/ctx", "x", "a/b/c"):
        _event_file(tmp_path / directory)
    _event_file(tmp_path / "a" / "b", "events.out.tfevents.2.h")
    result = classify(tmp_path, layout="aim")
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
def test_a_context_keeps_every_character_of_its_name(tmp_path: Path) -> None:
    # Only the "/" after the run's path is taken off (characters such as X stay).
    logdir = tmp_path / "logs"
    for context in ("XXtrain", "X"):
        _event_file(logdir / "run" / context)
    result = classify(logdir, layout="aim")
    assert [(f.run_path, f.context) for f in result.files] == [("run", "X"), ("run", "XXtrain")]


def test_symlinked_run_directory_is_followed(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    real = write_event_file(logdir / "run_real")
    outside = write_event_file(tmp_path / "elsewhere" / "run_x")
    (logdir / "run_linked").symlink_to(tmp_path / "elsewhere" / "run_x", target_is_directory=True)
    file_link = logdir / "run_files" / "events.out.tfevents.linked"
    file_link.parent.mkdir()
    file_link.symlink_to(real)
    result = classify(logdir)
    assert placement(result) == {
        rel(real, logdir): ("run_real", ""),
        f"run_linked/{outside.name}": ("run_linked", ""),
        "run_files/events.out.tfevents.linked": ("run_files", ""),
    }
    linked = next(f for f in result.files if f.run_path == "run_linked")
    assert linked.path == str(logdir / "run_linked" / outside.name)
    assert result.warnings == ()


def test_symlink_loops_are_reported_and_terminate(tmp_path: Path) -> None:
    event = write_event_file(tmp_path / "run_1")
    (tmp_path / "run_1" / "back_to_root").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "run_1" / "back_to_self").symlink_to(tmp_path / "run_1", target_is_directory=True)
    (tmp_path / "self_loop").symlink_to(tmp_path / "self_loop")
    result = classify(tmp_path)
    assert placement(result) == {rel(event, tmp_path): ("run_1", "")}
    assert len(result.warnings) == 3
    assert any("run_1/back_to_root" in w and "loop" in w for w in result.warnings)
    assert any("run_1/back_to_self" in w and "loop" in w for w in result.warnings)
    assert any("self_loop" in w and "loop" in w for w in result.warnings)


def test_alias_of_a_real_run_is_walked_once_under_its_real_name(tmp_path: Path) -> None:
    event = write_event_file(tmp_path / "run_5")
    # "latest" sorts before "run_5"; the real directory must still win.
    (tmp_path / "latest").symlink_to(tmp_path / "run_5", target_is_directory=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    result = classify(tmp_path)
    assert placement(result) == {rel(event, tmp_path): ("run_5", "")}
    assert any("latest" in w and "run_5" in w for w in result.warnings)
    assert any("dangling" in w and "broken" in w for w in result.warnings)


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
    result = classify(logdir, layout="aim")
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


def test_unreadable_directory_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = write_event_file(tmp_path / "run_ok")
    write_event_file(tmp_path / "run_locked")
    locked = str(tmp_path / "run_locked")
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        # Root can read anything, so simulate EACCES instead of relying on chmod.
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = classify(tmp_path)
    assert placement(result) == {rel(good, tmp_path): ("run_ok", "")}
    assert len(result.warnings) == 1
    assert "run_locked" in result.warnings[0] and "cannot read" in result.warnings[0]


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
    scan = Walker.scan

    def scan_with_a_bad_entry(walker: Any, rel: str, path: str) -> list[Any]:
        entries = scan(walker, rel, path)
        return [*entries, _FailingEntry(Path(path) / "zz_bad")] if rel == "" else entries

    monkeypatch.setattr(Walker, "scan", scan_with_a_bad_entry)
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


def test_missing_logdir_raises(tmp_path: Path) -> None:
    with pytest.raises(LogdirError) as caught:
        classify(tmp_path / "nope")
    assert caught.value.path == str(tmp_path / "nope")
    assert caught.value.hint


def test_logdir_that_is_a_file_raises(tmp_path: Path) -> None:
    event = write_event_file(tmp_path)
    with pytest.raises(LogdirError, match="not a directory"):
        classify(event)


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


def test_event_file_names(tmp_path: Path) -> None:
    assert is_event_file("events.out.tfevents.1718000000.host.123.0")
    assert is_event_file("events.out.tfevents")
    assert is_event_file("run/plugins/profile/events.out.tfevents.1.profile-empty")
    assert is_event_file("/abs/path/events.out.tfevents.1.v2")
    assert not is_event_file("checkpoint")
    assert not is_event_file("tfevents_dir/model.ckpt")
    assert not is_event_file("events.out.json")


def test_non_event_files_ignored_and_special_names_counted(tmp_path: Path) -> None:
    catboost = tmp_path / "catboost" / "events.out.tfevents"
    write_event_file(catboost.parent).rename(catboost)
    profile = tmp_path / "keras" / "train" / "events.out.tfevents.1700000000.host.profile-empty"
    write_event_file(profile.parent).rename(profile)
    for junk in ("catboost/learn_error.tsv", "keras/train/checkpoint", "README.md"):
        (tmp_path / junk).write_text("x")
    (tmp_path / "keras" / "events.out.tfevents.dir").mkdir()  # a directory is never a file
    result = classify(tmp_path)
    assert placement(result) == {
        "catboost/events.out.tfevents": ("catboost", ""),
        rel(profile, tmp_path): ("keras", "train"),
    }
    assert result.orphans == ()


def test_filter_runs(aim_tree: tuple[Path, dict[int, str]]) -> None:
    logdir, _ = aim_tree
    result = classify(logdir)
    assert filter_runs(result, []) == result
    only_group = filter_runs(result, ["group_1/*"])
    assert [r.run_path for r in only_group.runs] == ["group_1/run_2", "group_1/run_3"]
    assert only_group.orphans == result.orphans
    assert only_group.groups == result.groups
    several = filter_runs(result, ["run_1", "*run_3"])
    assert [r.run_path for r in several.runs] == ["group_1/run_3", "run_1"]
    assert filter_runs(result, ["RUN_1"]).runs == ()  # case-sensitive
    matched = filter_runs(result, ["run_?"]).files
    assert matched and {f.run_path for f in matched} == {"run_1"}


def test_classification_is_deterministic_and_sorted(tmp_path: Path) -> None:
    written = []
    for name in ("zeta", "alpha", "Mid", "b-2", "b/2", "b_1"):
        written += [write_event_file(tmp_path / name), write_event_file(tmp_path / name / "ctx")]
    written.append(write_event_file(tmp_path))
    first, second = classify(tmp_path), classify(tmp_path)
    assert first == second
    run_paths = [r.run_path for r in first.runs]
    assert run_paths == sorted(run_paths)
    for run in first.runs:
        keys = [(f.context, Path(f.rel_path).name) for f in run.files]
        assert keys == sorted(keys)
    assert list(first.orphans) == sorted(first.orphans)
    assert_each_file_once(first, written, tmp_path)
    assert all(isinstance(f, EventFileSource) for f in first.files)
