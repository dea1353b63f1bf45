"""The ``auto`` layout (design §3): one run per training run, as its writer meant it.

TensorBoard's own meaning is the base: a directory that holds event files is a run.  On top
of it, the sub-directories that writers create *for* a run fold into that run as contexts:

- ``add_scalars`` sub-writers, recognised by the tag of their first values, which is the main
  tag: tensorboardX writes ``<run>/<main_tag>/<key>/``, PyTorch ``<run>/<main_tag>_<key>/``
  (slashes of the main tag made ``_``); the context is the key.
- ``add_hparams`` sessions (``<run>/<time.time()>/`` or a name given), recognised by their
  first values: an hparams experiment, then a session start (the TF2 hparams API writes only
  the session start in its trial directories, which are runs).  A session named by its time
  is context ``hparams`` (``hparams.2``, ``hparams.3``... for a run's later ones, in the order
  of their times), so that every run of a sweep has the same context; a given name is kept.
- CatBoost's ``learn``, ``test``, ``test1``... in its ``train_dir`` (default
  ``catboost_info``), recognised by the bare ``events.out.tfevents`` CatBoost names its files
  with, in a directory that holds CatBoost's own files (``catboost_training.json``,
  ``learn_error.tsv``...) or a ``learn`` directory of CatBoost's.
- Guild AI's ``<run>/.guild/``, where Guild writes the scalars it reads from a run's output:
  context ``guild`` (the dot would need escaping in MLflow keys), apart from whatever the
  run's script logged itself.
- Known context names (Keras' ``train`` and ``validation``, ``eval``, ``test``...), when every
  sibling directory with event files folds too (``runs/detect/train`` beside ``train2`` is a
  run, as Ultralytics means it).

A directory holding a run's own sidecar (Lightning's ``hparams.yaml``, Ray Tune's
``params.json``, Ultralytics' ``args.yaml``, CatBoost's files) is a run whatever its name.
Every rule looks at a directory, its parent, its siblings and their files' names and first
records only, so converting a run's directory or any of its ancestors gives the same runs.
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import re
from collections.abc import Callable, Collection, Mapping

__all__ = [
    "HPARAMS_CONTEXT",
    "KNOWN_CONTEXTS",
    "LAYOUTS",
    "PARAMS_SIDECARS",
    "RUN_SIDECARS",
    "auto_owners",
    "session_contexts",
]

# ``auto``: runs as their writers meant them; ``aim``: Aim's documented rules (depth decides).
LAYOUTS = ("auto", "aim")
KNOWN_CONTEXTS = frozenset(
    {
        "train",
        "training",
        "val",
        "valid",
        "validate",
        "validation",
        "eval",
        "evaluation",
        "test",
        "testing",
        "dev",
    }
)
# Sidecars of params a writer puts beside a run's event files (``reading.sidecars``), and
# what wrote them.
PARAMS_SIDECARS = {"hparams.yaml": "Lightning", "params.json": "Ray Tune"}
# What CatBoost writes in its ``train_dir`` beside the directories of its event files.
CATBOOST_FILES = frozenset(
    {"catboost_training.json", "learn_error.tsv", "test_error.tsv", "time_left.tsv"}
)
# CatBoost's one event file name (TensorBoard's writers all add a time and a host).
_CATBOOST_EVENTS = "events.out.tfevents"
# Files a writer puts in the directory of each run it makes.
RUN_SIDECARS = frozenset({*PARAMS_SIDECARS, "args.yaml", *CATBOOST_FILES})
# Where Guild AI writes the scalars it reads from a run's output (``<run>/.guild/``).
_GUILD = ".guild"
_GUILD_CONTEXT = "guild"
# The context of a run's add_hparams sessions named by their time (``<run>/<time.time()>/``).
HPARAMS_CONTEXT = "hparams"
_TIME_NAME = re.compile(r"\d+(\.\d+)?")
_EXPERIMENT = "_hparams_/experiment"
_SESSION_START = "_hparams_/session_start_info"


def auto_owners(
    found: Mapping[str, Collection[str]],
    sidecars: Mapping[str, Collection[str]],
    tags_of: Callable[[str], tuple[str, ...]],
) -> dict[str, tuple[str, str]]:
    """The run and context of every directory that holds event files.

    Args:
        found: Directories (relative paths, ``""`` for the logdir) that hold event files,
            with the names of those files.
        sidecars: The sidecar names (``RUN_SIDECARS``) each directory holds.
        tags_of: The tags of the first values of a directory's first event file.

    Returns:
        Directory -> (its run's directory, its context in that run).
    """
    layout = _AutoLayout(found, sidecars, tags_of)
    return {directory: layout.owner(directory) for directory in layout.held}


def session_contexts(names: Collection[str]) -> dict[str, str]:
    """The contexts of one run's add_hparams session directories, by directory name.

    A name that is a time (``str(time.time())``, the writers' default) becomes ``hparams``,
    the later ones ``hparams.2``, ``hparams.3``... in the order of their times, so the runs of
    a sweep share their context; a name the user gave is kept, and skipped by the numbering
    (a session named ``hparams`` beside a timed one: ``hparams`` and ``hparams.2``).
    """
    timed = sorted((name for name in names if _TIME_NAME.fullmatch(name)), key=_time_order)
    contexts = {name: name for name in names}
    labels = (f"{HPARAMS_CONTEXT}.{n}" if n > 1 else HPARAMS_CONTEXT for n in itertools.count(1))
    free = (label for label in labels if label not in contexts)
    for name, label in zip(timed, free, strict=False):
        contexts[name] = label
    return contexts


def _time_order(name: str) -> tuple[float, str]:
    return float(name), name


class _AutoLayout:
    """The ``auto`` rules over one logdir's directories (each answer computed once)."""

    def __init__(
        self,
        found: Mapping[str, Collection[str]],
        sidecars: Mapping[str, Collection[str]],
        tags_of: Callable[[str], tuple[str, ...]],
    ) -> None:
        self.found, self.sidecars = found, sidecars
        # Several rules ask about one directory: its file is read once.
        self.tags_of = functools.cache(tags_of)
        self.held = frozenset(found)
        # Directory -> its sub-directories with event files at any depth.
        self.children: dict[str, list[str]] = {}
        seen: set[str] = set()
        for directory in self.held:
            while directory and directory not in seen:
                seen.add(directory)
                parent = posixpath.dirname(directory)
                self.children.setdefault(parent, []).append(directory)
                directory = parent
        self.below_files = functools.cache(self._below_files)
        self.is_session = functools.cache(self._is_session)
        self.writer_fold = functools.cache(self._writer_fold)
        self.catboost_dir = functools.cache(self._catboost_dir)
        self.fold = functools.cache(self._fold)
        self.owner = functools.cache(self._owner)

    def _below_files(self, directory: str) -> bool:
        """Whether a directory above ``directory`` (the logdir included) holds event files."""
        parent = posixpath.dirname(directory)
        return parent in self.held or (parent != "" and self.below_files(parent))

    def _is_session(self, directory: str) -> bool:
        """An add_hparams session: its first values an experiment, then a session start."""
        # The writer's own directory holds its file from the start: a session with no
        # writer directory above it (a TF2 hparams trial) is a run of its own.
        return (
            directory in self.held
            and posixpath.dirname(directory) in self.held
            and self.tags_of(directory)[:2] == (_EXPERIMENT, _SESSION_START)
        )

    def _writer_fold(self, directory: str) -> tuple[str, str] | None:
        """The run a writer made ``directory`` for, by its files' first values."""
        if directory not in self.held or not self.below_files(directory):
            return None  # no writer's own directory above it: nothing to fold into
        parent, name = posixpath.split(directory)
        if self.is_session(directory):
            siblings = self.children.get(parent, ())
            sessions = [posixpath.basename(other) for other in siblings if self.is_session(other)]
            return parent, session_contexts(sessions)[name]
        tags = self.tags_of(directory)
        if not tags or any(tag != tags[0] for tag in tags):
            return None
        main = tags[0]
        prefix = main.replace("/", "_") + "_"
        if name.startswith(prefix) and len(name) > len(prefix) and parent in self.held:
            return parent, name[len(prefix) :]  # PyTorch
        tail = f"{main}/{name}"
        if directory == tail or directory.endswith("/" + tail):
            owner = directory[: len(directory) - len(tail)].rstrip("/")
            if owner in self.held:
                return owner, name  # tensorboardX
        return None

    def _catboost_dir(self, directory: str) -> bool:
        """A CatBoost ``train_dir``: CatBoost's own files, or its ``learn`` directory."""
        if not CATBOOST_FILES.isdisjoint(self.sidecars.get(directory, ())):
            return True
        learn = f"{directory}/learn" if directory else "learn"
        return _CATBOOST_EVENTS in self.found.get(learn, ())

    def tool_fold(self, directory: str) -> tuple[str, str] | None:
        """The run a writer or a tool made ``directory`` for, whatever its siblings."""
        by_writer = self.writer_fold(directory)
        if by_writer is not None:
            return by_writer
        parent, name = posixpath.split(directory)
        if name == _GUILD and directory in self.held:
            return parent, _GUILD_CONTEXT
        if _CATBOOST_EVENTS in self.found.get(directory, ()) and self.catboost_dir(parent):
            return parent, name
        return None

    def _fold(self, directory: str) -> tuple[str, str] | None:
        if not directory or not RUN_SIDECARS.isdisjoint(self.sidecars.get(directory, ())):
            return None
        by_tool = self.tool_fold(directory)
        if by_tool is not None or not _named_context(directory):
            return by_tool
        parent, name = posixpath.split(directory)
        siblings = self.children.get(parent, ())
        if all(
            sibling == directory
            or self.tool_fold(sibling) is not None
            or (sibling in self.held and _named_context(sibling))
            for sibling in siblings
        ):
            return parent, name
        return None

    def _owner(self, directory: str) -> tuple[str, str]:
        folded = self.fold(directory)
        if folded is None:
            return directory, ""
        run, context = self.owner(folded[0])
        return run, f"{context}/{folded[1]}" if context else folded[1]


def _named_context(directory: str) -> bool:
    return posixpath.basename(directory).lower() in KNOWN_CONTEXTS
