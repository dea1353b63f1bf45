"""The Aim side of a push: the repo, a run found again by its hash, its params, its index.

A pushed run's hash is derived from the store and the run (:func:`run_hash`), and the run is
created under that hash, so a push killed between creating a run and recording its hash in
the store finds the same run again (never by its name): a kill leaves no stray run.  In a
remote repo (``aim://HOST:PORT``) Aim's server chooses nothing either, but a run can only be
created under a new hash there, so a remote run is found again by its ``tbconvert`` param.

Aim's readers (its SDK's ``Repo``, ``aim up``) read runs through the repo's index, which its
UI keeps up to date while it runs; a push indexes each run it wrote, so that they see it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tbconvert.errors import PushError, import_extra
from tbconvert.push.source import RunRow

IDENTITY_PARAM = "tbconvert"
HASH_LENGTH = 24  # the length of the hashes Aim makes itself
REMOTE_SCHEME = "aim://"


def load_aim() -> Any:
    """The ``aim`` package.

    Raises:
        MissingDependency: aim is not installed.
    """
    aim = import_extra("aim", "aim", "pushing to Aim")
    # Aim logs each run it opens at INFO through the root logger; the summary says enough.
    logging.getLogger("aim").setLevel(logging.WARNING)
    return aim


def is_remote(location: str) -> bool:
    """Whether ``location`` names an Aim server rather than a repo directory."""
    return location.startswith(REMOTE_SCHEME)


def repo_location(location: str) -> str:
    """``--repo`` as Aim takes it: a directory with ``~`` and variables expanded, made
    absolute, or an ``aim://HOST:PORT`` address as given."""
    if is_remote(location):
        return location
    return os.path.abspath(os.path.expandvars(os.path.expanduser(location)))


def open_repo(location: str) -> Any:
    """The Aim repo at ``location`` (:func:`repo_location`), initialised when missing.

    Raises:
        MissingDependency: aim is not installed.
        PushError: the repo cannot be opened or the server does not answer.
    """
    aim = load_aim()
    where = repo_location(location)
    with aim_errors(f"open the Aim repo {where}"):
        if is_remote(where):
            return aim.Repo.from_path(where)
        os.makedirs(where, exist_ok=True)
        return aim.Repo.from_path(where, init=not os.path.isdir(os.path.join(where, ".aim")))


@contextmanager
def aim_errors(what: str) -> Iterator[None]:
    """Aim's exceptions while doing ``what`` as one-line PushErrors."""
    try:
        yield
    except (OSError, RuntimeError, ValueError, KeyError, AssertionError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise PushError(f"Aim failed to {what}: {message}") from error


def run_hash(store: str, run: RunRow) -> str:
    """The Aim hash of ``run`` pushed from ``store``: the same on every push, different for
    every run, source and store."""
    key = "\0".join(("tbconvert", store, str(run.run_id), run.source, run.run_path))
    return hashlib.sha256(key.encode()).hexdigest()[:HASH_LENGTH]


def identity(run: RunRow, store: str) -> dict[str, Any]:
    """The ``tbconvert`` param of a pushed run: where it came from, its group and source."""
    return {
        "run_id": run.run_id,
        "run_path": run.run_path,
        "group": run.group_path,
        "source": run.source,
        "logdir": run.logdir,
        "store": store,
    }


def open_run(repo: Any, hash_: str | None, run: RunRow, store: str) -> tuple[Any, bool]:
    """The Aim run of ``run`` opened for writing, and whether it was created now.

    ``hash_`` is the hash the store recorded (None: never recorded).
    """
    aim = load_aim()
    if repo.is_remote_repo:
        hash_ = hash_ or _find_remote(repo, run, store)
        created = hash_ is None
    else:
        hash_ = hash_ or run_hash(store, run)
        created = not repo.run_exists(hash_)
    with aim_errors(f"open the Aim run of {run.run_path!r}"):
        if created and hash_ is not None:
            # Aim opens a run whose directory exists: made first, the run gets this hash.
            os.makedirs(os.path.join(repo.path, "meta", "chunks", hash_), exist_ok=True)
            type(repo)._all_run_hashes.cache_clear()  # Aim caches the listing for 0.5 s
        opened = aim.Run(
            hash_,
            repo=repo,
            system_tracking_interval=None,
            capture_terminal_logs=False,
        )
        if created or opened.get(IDENTITY_PARAM) is None:
            opened[IDENTITY_PARAM] = identity(run, store)
            opened.name = run.run_path
    return opened, created


def _find_remote(repo: Any, run: RunRow, store: str) -> str | None:
    """The hash of the run of an Aim server whose ``tbconvert`` param is ``run``'s.  Each run's
    own meta is read, not the server's index, which a run a push left is not yet in."""
    wanted = identity(run, store)
    with aim_errors("search the Aim server's runs"):
        for candidate in repo.list_all_runs():
            meta = repo.request_tree("meta", candidate, read_only=True).subtree("meta")
            found = meta.subtree(("chunks", candidate, "attrs")).get(IDENTITY_PARAM)
            if isinstance(found, dict) and all(
                found.get(key) == wanted[key] for key in ("run_id", "run_path", "source", "store")
            ):
                return str(candidate)
    return None


def set_params(opened: Any, params: dict[str, dict[str, Any]]) -> int:
    """A run's params (``{context: {key: value}}``, typed) as ``run["hparams"]``: those of its
    one context that holds params (the run directory's when several do), and, when several
    do, every context's under ``run["hparams_contexts"]``.  Returns how many were
    set (none when Aim holds them already)."""
    held = {context: values for context, values in params.items() if values}
    if not held:
        return 0
    main = held.get("", next(iter(held.values())))
    changed = 0
    if opened.get("hparams") != main:
        opened["hparams"] = main
        changed = len(main)
    if len(held) > 1 and opened.get("hparams_contexts") != held:
        opened["hparams_contexts"] = held
        changed = sum(len(values) for values in held.values())
    return changed


def index_run(repo: Any, hash_: str) -> None:
    """Bring the repo's index up to date with the run ``hash_``, which its readers read."""
    if repo.is_remote_repo:
        return  # the server indexes what it writes
    from aim.sdk.index_manager import RepoIndexManager

    with aim_errors(f"index the Aim run {hash_}"):
        RepoIndexManager.get_index_manager(repo).index(hash_)
