"""The ``auto`` layout (design §3): one run per training run, as its writer meant it.

TensorBoard's own meaning is the base: a directory that holds event files is a run.  On top
of it, the sub-directories that writers create *for* a run fold into that run as contexts:

- ``add_scalars`` sub-writers, recognised by the tag of their first values, which is the main
  tag: tensorboardX writes ``<run>/<main_tag>/<key>/``, PyTorch ``<run>/<main_tag>_<key>/``
  (slashes of the main tag made ``_``); the context is the key.
- ``add_hparams`` sessions (``<run>/<time.time()>/`` or a name given), recognised by their
  first values: an hparams experiment, then a session start (the TF2 hparams API writes only
  the session start in its trial directories, which are runs).
- Known context names (Keras' ``train`` and ``validation``, ``eval``, ``test``...), when every
  sibling directory with event files folds too (``runs/detect/train`` beside ``train2`` is a
  run, as Ultralytics means it).

A directory holding a run's own sidecar (Lightning's ``hparams.yaml``, Ray Tune's
``params.json``, Ultralytics' ``args.yaml``) is a run whatever its name.  Every rule looks at
a directory, its parent and its own files' first records only, so converting a run's
directory or any of its ancestors gives the same runs.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Collection, Mapping

__all__ = ["KNOWN_CONTEXTS", "LAYOUTS", "PARAMS_SIDECARS", "RUN_SIDECARS", "auto_owners"]

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
# Files a writer puts in the directory of each run it makes.
RUN_SIDECARS = frozenset({*PARAMS_SIDECARS, "args.yaml"})
_EXPERIMENT = "_hparams_/experiment"
_SESSION_START = "_hparams_/session_start_info"


def auto_owners(
    found: Collection[str],
    sidecars: Mapping[str, Collection[str]],
    tags_of: Callable[[str], tuple[str, ...]],
) -> dict[str, tuple[str, str]]:
    """The run and context of every directory that holds event files.

    Args:
        found: Directories (relative paths, ``""`` for the logdir) that hold event files.
        sidecars: The sidecar names (``RUN_SIDECARS``) each directory holds.
        tags_of: The tags of the first values of a directory's first event file.

    Returns:
        Directory -> (its run's directory, its context in that run).
    """
    held = frozenset(found)
    # Directory -> its sub-directories with event files at any depth.
    children: dict[str, list[str]] = {}
    seen: set[str] = set()
    for directory in held:
        while directory and directory not in seen:
            seen.add(directory)
            parent = posixpath.dirname(directory)
            children.setdefault(parent, []).append(directory)
            directory = parent

    @functools.cache
    def below_files(directory: str) -> bool:
        """Whether a directory above ``directory`` (the logdir included) holds event files."""
        parent = posixpath.dirname(directory)
        return parent in held or (parent != "" and below_files(parent))

    @functools.cache
    def writer_fold(directory: str) -> tuple[str, str] | None:
        """The run a writer made ``directory`` for, by its files' first values."""
        if directory not in held or not below_files(directory):
            return None  # no writer's own directory above it: nothing to fold into
        parent, name = posixpath.split(directory)
        tags = tags_of(directory)
        if tags[:2] == (_EXPERIMENT, _SESSION_START):
            # The writer's own directory holds its file from the start: a session with no
            # writer directory above it is a run of its own.
            return (parent, name) if parent in held else None
        if not tags or any(tag != tags[0] for tag in tags):
            return None
        main = tags[0]
        prefix = main.replace("/", "_") + "_"
        if name.startswith(prefix) and len(name) > len(prefix) and parent in held:
            return parent, name[len(prefix) :]  # PyTorch
        tail = f"{main}/{name}"
        if directory == tail or directory.endswith("/" + tail):
            owner = directory[: len(directory) - len(tail)].rstrip("/")
            if owner in held:
                return owner, name  # tensorboardX
        return None

    def named_context(directory: str) -> bool:
        return posixpath.basename(directory).lower() in KNOWN_CONTEXTS

    def folds_anyway(directory: str) -> bool:
        return writer_fold(directory) is not None or (
            directory in held and named_context(directory)
        )

    @functools.cache
    def fold(directory: str) -> tuple[str, str] | None:
        if not directory or not RUN_SIDECARS.isdisjoint(sidecars.get(directory, ())):
            return None
        by_writer = writer_fold(directory)
        if by_writer is not None:
            return by_writer
        if not named_context(directory):
            return None
        parent, name = posixpath.split(directory)
        siblings = children.get(parent, ())
        if all(sibling == directory or folds_anyway(sibling) for sibling in siblings):
            return parent, name
        return None

    @functools.cache
    def owner(directory: str) -> tuple[str, str]:
        folded = fold(directory)
        if folded is None:
            return directory, ""
        run, context = owner(folded[0])
        return run, f"{context}/{folded[1]}" if context else folded[1]

    return {directory: owner(directory) for directory in held}
