"""Find a logdir's event files and run sidecars: walk a local directory (symlinks followed,
loops reported) or list a remote one (``remote``), into one shape that ``discovery`` classifies."""

from __future__ import annotations

import errno
import os
from operator import attrgetter

from tbconvert.errors import LogdirError
from tbconvert.reading.layouts import RUN_SIDECARS
from tbconvert.reading.remote import is_remote, list_objects, local_path
from tbconvert.reading.remote_reads import RemoteReads

__all__ = ["Walker", "find_files", "is_event_file"]

# TensorBoard itself matches on this substring; it also covers CatBoost's bare
# ``events.out.tfevents`` and the profiler's ``*.profile-empty`` placeholders.
_EVENT_MARKER = "tfevents"
_NAME = attrgetter("name")


def is_event_file(name: str) -> bool:
    """Tell whether a file name denotes a TensorBoard event file.

    Args:
        name: A file name or path; only its basename is looked at.

    Returns:
        True when the basename contains ``tfevents``.
    """
    return _EVENT_MARKER in os.path.basename(name)


class Walker:
    """Collect the event files of a logdir, following symlinks without looping.

    Directories are identified by ``(st_dev, st_ino)``; one seen before is not walked again.
    Symlinked directories are walked only after the whole real tree, one layer of links at a
    time, so that ``latest -> run_5`` yields ``run_5`` (with a warning naming ``latest``)
    rather than the alias, whatever the names sort like.
    """

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        # Directory relative path ("" for the logdir) -> [(basename, path as walked)].
        self.found: dict[str, list[tuple[str, str]]] = {}
        # Directory relative path -> {sidecar name: path} (``layouts.RUN_SIDECARS``).
        self.sidecars: dict[str, dict[str, str]] = {}
        self.warnings: list[str] = []
        self.listed: dict[str, tuple[int, int]] = {}  # path -> (size, mtime_ns): remote only
        self._visited: dict[tuple[int, int], str] = {}

    def walk(self) -> None:
        root = os.stat(self.logdir)
        self._visited[(root.st_dev, root.st_ino)] = ""
        frontier = [("", self.logdir)]
        while frontier:
            links: list[tuple[str, os.DirEntry[str]]] = []
            for rel, path in frontier:
                self._walk_tree(rel, path, links)
            links.sort(key=lambda item: item[0])
            frontier = [(rel, entry.path) for rel, entry in links if self._admit(rel, entry)]

    def _walk_tree(self, rel: str, path: str, links: list[tuple[str, os.DirEntry[str]]]) -> None:
        """Walk the real (non-symlink) directories below ``path``; defer symlinked ones."""
        stack = [(rel, path)]
        while stack:
            rel, path = stack.pop()
            entries = self.scan(rel, path)
            subdirs: list[tuple[str, str]] = []
            prefix = f"{rel}/" if rel else ""
            for entry in entries:
                name = entry.name
                try:
                    if entry.is_dir():
                        child = prefix + name
                        if entry.is_symlink():
                            links.append((child, entry))
                        elif self._admit(child, entry):
                            subdirs.append((child, entry.path))
                    elif is_event_file(name) and entry.is_file():
                        self.found.setdefault(rel, []).append((name, entry.path))
                    elif name in RUN_SIDECARS and entry.is_file():
                        self.sidecars.setdefault(rel, {})[name] = entry.path
                    elif entry.is_symlink() and not os.path.exists(entry.path):
                        self.warnings.append(f"{entry.path}: broken symlink, ignored")
                except OSError as exc:
                    self._warn_error(entry.path, exc)
            # Reversed so that the stack pops siblings in name order.
            stack.extend(reversed(subdirs))

    def scan(self, rel: str, path: str) -> list[os.DirEntry[str]]:
        """The entries of the directory ``path`` (``rel`` in the logdir), by name; one that
        cannot be read is skipped with a warning, unless it is the logdir itself."""
        try:
            with os.scandir(path) as iterator:
                return sorted(iterator, key=_NAME)
        except OSError as exc:
            if not rel:
                raise LogdirError(
                    f"cannot read the logdir ({exc.strerror or exc})",
                    path=self.logdir,
                    hint="check its permissions",
                ) from exc
            self.warnings.append(f"{path}: cannot read directory ({exc.strerror or exc}), skipped")
            return []

    def _admit(self, rel: str, entry: os.DirEntry[str]) -> bool:
        """Record a directory as visited; False (with a warning) if it was reached before."""
        try:
            # One stat per directory, never per file: the identity is what detects loops.
            status = entry.stat()
        except OSError as exc:
            self._warn_error(entry.path, exc)
            return False
        key = (status.st_dev, status.st_ino)
        seen = self._visited.get(key)
        if seen is None:
            self._visited[key] = rel
            return True
        if not seen or rel.startswith(seen + "/"):
            shown = seen or "the logdir"
            self.warnings.append(f"{entry.path}: symlink loop back to {shown}, not followed")
        else:
            self.warnings.append(f"{entry.path}: same directory as {seen}, walked only once")
        return False

    def _warn_error(self, path: str, exc: OSError) -> None:
        if exc.errno == errno.ELOOP:
            self.warnings.append(f"{path}: symlink loop, not followed")
        else:
            self.warnings.append(f"{path}: {exc.strerror or exc}, skipped")


def _list_remote(logdir: str, remote: RemoteReads | None) -> tuple[str, Walker]:
    """What walking a remote logdir finds, from one listing of its objects (an object
    store has no symlinks, and its directories are the prefixes of its objects)."""
    # Only event files and sidecars: an HTTP listing asks each object it keeps for its size.
    root, objects = list_objects(
        logdir, lambda name: is_event_file(name) or name in RUN_SIDECARS, remote
    )
    found = Walker(root)
    for rel, listed in sorted(objects.items()):
        directory, _slash, name = rel.rpartition("/")
        if is_event_file(name):
            found.found.setdefault(directory, []).append((name, listed.url))
        else:
            found.sidecars.setdefault(directory, {})[name] = listed.url
        found.listed[listed.url] = (listed.size, listed.mtime_ns)
    return root, found


def _walk_local(logdir: str) -> tuple[str, Walker]:
    root = os.path.realpath(local_path(logdir))
    if not os.path.exists(root):
        raise LogdirError("logdir does not exist", path=root, hint="check the --logdir path")
    if not os.path.isdir(root):
        raise LogdirError(
            "logdir is not a directory",
            path=root,
            hint="pass the directory that holds the event files, not a file",
        )
    walker = Walker(root)
    try:
        walker.walk()
    except OSError as exc:  # the logdir vanished or became unreadable between checks
        raise LogdirError(f"cannot walk the logdir ({exc.strerror or exc})", path=root) from exc
    return root, walker


def find_files(logdir: str, remote: RemoteReads | None = None) -> tuple[str, Walker]:
    """The logdir as stored (a resolved local path, or a URL, listed as ``remote`` reads)
    and what walking it found."""
    return _list_remote(logdir, remote) if is_remote(logdir) else _walk_local(logdir)
