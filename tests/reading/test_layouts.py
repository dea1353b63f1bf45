"""The ``auto`` layout (design §3): one run per training run, for every common writer, from
the run's own directory and from any directory above it."""

from __future__ import annotations

import os
import posixpath
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tbconvert.reading.discovery import Classification, classify
from tests.reading.test_remote import memory_copy
from tests.support.eventfiles import event_file_name, summary_event, tf2_scalar, write_events
from tests.support.layouts import WALL, WRITERS, Expected, catboost_fit, guild

Assignment = dict[str, tuple[str, str, bool]]  # file -> (run path, context, orphan run)


def runs_of(classification: Classification) -> dict[str, set[str]]:
    return {run.run_path: {f.context for f in run.files} for run in classification.runs}


def assignment(classification: Classification, prefix: str = "") -> Assignment:
    """Each file (its path relative to the directory ``prefix`` names, below the logdir) ->
    its run, context and whether the run is made of orphans."""
    found = {}
    for run in classification.runs:
        for file in run.files:
            run_path = prefix if run.run_path == "." else posixpath.join(prefix, run.run_path)
            found[posixpath.join(prefix, file.rel_path)] = (
                run_path or ".",
                file.context,
                run.orphans,
            )
    return found


def one_scalar(directory: Path, tag: str, wall: float = WALL) -> None:
    write_events(directory / event_file_name(wall), [summary_event(0, wall, [tf2_scalar(tag, 1)])])


def prefixed(expected: Expected, prefix: str) -> Expected:
    return {posixpath.join(prefix, run) if prefix else run: ctx for run, ctx in expected.items()}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_each_writer_s_layout_is_one_run_per_training_run(tmp_path: Path, writer: str) -> None:
    """From the directory the writer was given and from two levels above it, the runs and
    contexts are the ones the writer meant; no file is an orphan but the TF2 experiment's."""
    root = tmp_path / "projects" / "mnist"
    expected = WRITERS[writer](root)
    for logdir, prefix in ((root, ""), (tmp_path, "projects/mnist")):
        classification = classify(logdir)
        assert runs_of(classification) == prefixed(expected, prefix)
        orphans = {posixpath.dirname(path) for path in classification.orphans}
        assert orphans == (
            {prefixed({"logs/hparam_tuning": set()}, prefix).popitem()[0]}
            if writer == "tf2_hparams"
            else set()
        )


def test_a_tensorboardx_sweep_folds_add_scalars_and_add_hparams_into_each_run(
    tmp_path: Path,
) -> None:
    """The issue's sweep: N runs, contexts named by the add_scalars keys, the add_hparams
    session a context of its run, and the tag of an add_scalars file its main tag."""
    expected = WRITERS["tensorboardx"](tmp_path, runs=4)
    classification = classify(tmp_path)
    assert len(classification.runs) == 4
    assert not classification.orphans and not classification.groups
    for run in classification.runs:
        by_context = {f.context: f.rel_path for f in run.files}
        assert by_context["train"] == f"{run.run_path}/acc/train/" + Path(by_context["train"]).name
        assert set(by_context) == expected[run.run_path]


def test_aim_s_documented_tree_classifies_as_documented_under_both_layouts(
    tmp_path: Path,
) -> None:
    """Aim's own example (reference tree of its docs): runs run_1, group_1/run_2 (contexts
    train, validate and the run's own files), group_1/run_3; the files in group_1 and in the
    logdir belong to no run and are kept as runs of their directories."""
    files = {
        "run_1": 2,
        "group_1": 1,
        "group_1/run_2/train": 2,
        "group_1/run_2/validate": 2,
        "group_1/run_2": 2,
        "group_1/run_3": 2,
        "": 2,
    }
    for directory, count in files.items():
        for n in range(count):
            wall = WALL + n
            write_events(
                tmp_path / directory / event_file_name(wall),
                [summary_event(0, wall, [tf2_scalar("loss", 1.0)])],
            )
    for layout in ("auto", "aim"):
        classification = classify(tmp_path, layout=layout)
        runs = {run.run_path: run for run in classification.runs}
        assert {path for path, run in runs.items() if not run.orphans} == {
            "run_1",
            "group_1/run_2",
            "group_1/run_3",
        }, layout
        assert {path for path, run in runs.items() if run.orphans} == {".", "group_1"}, layout
        assert {f.context for f in runs["group_1/run_2"].files} == {"", "train", "validate"}
        assert len(classification.orphans) == 3
        assert "group_1" in classification.groups


def test_lightning_versions_stay_runs_whichever_directory_is_converted(tmp_path: Path) -> None:
    """Aim's depth rule made ``lightning_logs`` one run with contexts ``version_N`` when its
    parent was converted; each version is a run from any directory."""
    WRITERS["lightning"](tmp_path / "project")
    for logdir, prefix in (
        (tmp_path / "project" / "lightning_logs", ""),
        (tmp_path / "project", "lightning_logs/"),
        (tmp_path, "project/lightning_logs/"),
    ):
        assert set(runs_of(classify(logdir))) == {f"{prefix}version_{n}" for n in range(3)}
    assert set(runs_of(classify(tmp_path / "project", layout="aim"))) == {"lightning_logs"}


def test_a_known_context_name_beside_runs_is_a_run(tmp_path: Path) -> None:
    """``train`` folds into its parent only when its siblings fold too: beside ``train2``
    (Ultralytics names its runs so, even without their args.yaml) it is a run."""
    for name in ("train", "train2"):
        write_events(
            tmp_path / "detect" / name / event_file_name(WALL),
            [summary_event(0, WALL, [tf2_scalar("x", 1.0)])],
        )
    assert set(runs_of(classify(tmp_path))) == {"detect/train", "detect/train2"}


def test_a_sub_writer_whose_tag_is_not_its_directory_s_is_a_run(tmp_path: Path) -> None:
    """A directory under a run is folded by what its first values say, not by its name: a
    run nested in another run's directory keeps its own name."""
    write_events(
        tmp_path / "parent" / event_file_name(WALL),
        [summary_event(0, WALL, [tf2_scalar("loss", 1.0)])],
    )
    write_events(
        tmp_path / "parent" / "loss_child" / event_file_name(WALL),
        [summary_event(0, WALL, [tf2_scalar("accuracy", 1.0)])],
    )
    classification = classify(tmp_path)
    assert set(runs_of(classification)) == {"parent", "parent/loss_child"}
    # The parent holds a run: its own file belongs to no run (kept, named).
    assert classification.orphans == (f"parent/{event_file_name(WALL)}",)


def test_catboost_s_train_dir_is_one_run_from_itself_and_from_above(tmp_path: Path) -> None:
    """``learn`` and ``test`` (``test1`` for a second eval set) are contexts of the
    ``train_dir``, whatever its name, from the ``train_dir`` itself and from its parents."""
    for train_dir, tests in (("catboost_info", 1), ("sweep/depth_6", 2)):
        catboost_fit(tmp_path / train_dir, tests=tests)
        contexts = {"learn", "test", "test1"} if tests == 2 else {"learn", "test"}
        assert runs_of(classify(tmp_path / train_dir)) == {".": contexts}
        parent = posixpath.dirname(train_dir)
        if parent:
            assert runs_of(classify(tmp_path / parent)) == {"depth_6": contexts}
    assert runs_of(classify(tmp_path)) == {
        "catboost_info": {"learn", "test"},
        "sweep/depth_6": {"learn", "test", "test1"},
    }


def test_catboost_s_event_directories_fold_without_its_other_files(tmp_path: Path) -> None:
    """Only the event files kept (the tables and json left behind): CatBoost's bare file
    name in ``learn/`` still marks the ``train_dir``."""
    catboost_fit(tmp_path / "catboost_info")
    for path in (tmp_path / "catboost_info").iterdir():
        if path.is_file():
            path.unlink()
    assert runs_of(classify(tmp_path)) == {"catboost_info": {"learn", "test"}}


def test_a_learn_directory_that_catboost_did_not_write_is_a_run(tmp_path: Path) -> None:
    """``learn`` is no known context name: without CatBoost's file name or files beside it,
    it and its sibling are runs, as TensorBoard shows them."""
    one_scalar(tmp_path / "exp" / "learn", "loss")
    one_scalar(tmp_path / "exp" / "test", "loss")
    assert set(runs_of(classify(tmp_path))) == {"exp/learn", "exp/test"}


def test_guild_s_own_directory_folds_into_its_run(tmp_path: Path) -> None:
    """``<run>/.guild/`` is context ``guild`` of ``<run>``, beside the script's own files or
    alone, from the run's directory and from Guild's ``runs`` directory."""
    expected = guild(tmp_path)
    first = sorted(expected)[0]
    assert runs_of(classify(tmp_path / first)) == {".": {"", "guild"}}
    for path in (tmp_path / first).iterdir():
        if path.is_file():
            path.unlink()  # a script that logged nothing itself
    assert runs_of(classify(tmp_path / "runs")) == {
        posixpath.basename(run): {"guild"} if run == first else {"", "guild"} for run in expected
    }


def _add_hparams(run: Path, name: str | None = None, metric: float = 0.5) -> None:
    """``SummaryWriter.add_hparams`` for real (its session directory named ``name``, else by
    tensorboardX's ``str(time.time())``), with the run's own file beside it."""
    from tensorboardX import SummaryWriter

    # tensorboardX names a file by its second: a suffix keeps one run's writers apart.
    suffix = f".{name or 'main'}"
    with SummaryWriter(logdir=str(run), flush_secs=3600, filename_suffix=suffix) as writer:
        writer.add_scalar("loss", metric, 0)
        writer.add_hparams({"lr": metric}, {"hparam/acc": metric}, name=name)


def test_every_run_of_a_sweep_has_its_add_hparams_session_in_context_hparams(
    tmp_path: Path,
) -> None:
    """The session directories are named by the time of each add_hparams call, which differs
    from run to run; their context does not."""
    for n in range(3):
        _add_hparams(tmp_path / f"run{n}", metric=n / 10)
    sessions = {p.parent.name: p.name for p in tmp_path.glob("run*/*") if p.is_dir()}
    assert len(set(sessions.values())) == 3  # three different times on disk
    placed = assignment(classify(tmp_path))
    for run, session in sessions.items():
        (in_session,) = [f for f in placed if f.startswith(f"{run}/{session}/")]
        assert placed[in_session] == (run, "hparams", False)


def test_a_run_s_later_add_hparams_sessions_are_numbered_in_the_order_of_their_times(
    tmp_path: Path,
) -> None:
    """Names are times, ordered as numbers (``999.5`` before ``1000.25``, though it sorts
    after as text); a session the user named keeps its name, which the numbering skips."""
    run = tmp_path / "run"
    for name in ("1000.25", "999.5", "1000.3", "final", "hparams.2"):
        _add_hparams(run, name=name)
    contexts = {
        posixpath.dirname(path): context
        for path, (_run, context, _orphan) in assignment(classify(tmp_path)).items()
    }
    assert {directory: contexts[directory] for directory in contexts if directory != "run"} == {
        "run/999.5": "hparams",
        "run/1000.25": "hparams.3",
        "run/1000.3": "hparams.4",
        "run/final": "final",
        "run/hparams.2": "hparams.2",
    }


@pytest.mark.parametrize("writer", ["catboost", "guild", "tensorboardx"])
def test_a_remote_logdir_is_classified_by_the_same_rules(tmp_path: Path, writer: str) -> None:
    """The listing (with CatBoost's files in it) and the first bytes of the session files
    give the runs and contexts the local walk gives."""
    expected = WRITERS[writer](tmp_path / "logs")
    assert runs_of(classify(memory_copy(tmp_path / "logs"))) == expected


def test_the_layout_reads_each_directory_s_first_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several rules ask about a session and its siblings; the file is read once for all,
    and only below a directory that holds the writer's own file."""
    from tbconvert.reading import discovery

    for writer in ("pytorch", "tensorboardx", "catboost", "guild"):
        WRITERS[writer](tmp_path / writer)
    read: list[str] = []
    first_tags = discovery.first_tags
    monkeypatch.setattr(
        discovery, "first_tags", lambda path, *args: (read.append(path), first_tags(path))[1]
    )
    classify(tmp_path)
    below_runs = [path for path in read if "/catboost/" not in path]
    assert len(read) == len(set(read)) and below_runs == read
    # The sub-writers and sessions of 3 + 3 runs, and Guild's 2 ``.guild``.
    assert len(read) == 3 * 3 + 3 * 3 + 2


_PLACEABLE = [
    "tensorboardx",
    "pytorch",
    "lightning",
    "keras",
    "hf_trainer",
    "ultralytics",
    "catboost",
    "guild",
]


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str | None]]:
    """Placements: (directory, writer) pairs; a None writer is a stray event file."""
    count = draw(st.integers(1, 3))
    placements = []
    for n in range(count):
        depth = draw(st.integers(0, 2))
        parts = [draw(st.sampled_from(["exp", "logs", "team"])) for _ in range(depth)]
        placements.append(("/".join([*parts, f"p{n}"]), draw(st.sampled_from(_PLACEABLE))))
    for _ in range(draw(st.integers(0, 2))):
        placements.append((draw(st.sampled_from(["", "exp", "logs/team", "p0"])), None))
    return placements


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placements=trees())
def test_converting_a_run_or_any_directory_above_it_assigns_the_same_runs(
    placements: list[tuple[str, str | None]],
) -> None:
    """Pointing-invariance: for every run directory and every directory above it, the files
    below it get the runs and contexts that converting the whole tree gives them (paths
    differ only by the prefix), orphans included."""
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        for n, (directory, writer) in enumerate(placements):
            if writer is None:
                wall = WALL + 100 + n
                write_events(
                    root / directory / event_file_name(wall),
                    [summary_event(0, wall, [tf2_scalar("stray", 1.0)])],
                )
            else:
                WRITERS[writer](root / directory)
        whole = assignment(classify(root))
        runs = {run for run, _context, orphan in whole.values() if not orphan}
        points = {""}
        for run in runs:
            while run not in points:
                points.add(run)
                run = posixpath.dirname(run) if run != "." else ""
        for point in sorted(points - {"."}):
            below = {f: a for f, a in whole.items() if point == "" or f.startswith(point + "/")}
            got = assignment(classify(root / point), point)
            assert got == below, point
        assert os.path.isdir(root)
