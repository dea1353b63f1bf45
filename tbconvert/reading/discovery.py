"""Walk a logdir and classify its directories into runs, contexts, groups and orphans (design §3).

The rules are Aim's ``aim convert tf`` rules, made total: a logdir that is itself the only
directory with event files is one run ``"."``, every event file belongs to exactly one
(run, context), contexts keep their full relative path, symlinks are followed with loops
reported, and everything comes out sorted.  Orphans (event files directly in the logdir or in
a group) are kept as a run of their own directory (``"."`` for the logdir), so nothing
TensorBoard shows is dropped by classification; ``skip_orphans`` leaves them out, as Aim does.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from tbconvert.filters import Shard
from tbconvert.reading.first_record import first_tags, first_tags_in
from tbconvert.reading.layouts import LAYOUTS, PARAMS_SIDECARS, auto_owners
from tbconvert.reading.remote import fetch_heads
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.reading.walk import Walker, find_files, is_event_file

# A file's size, time and first tags, as the layout read them (``store.file_heads`` keeps
# them between passes).
Head = tuple[int, int, tuple[str, ...]]

__all__ = [
    "LAYOUTS",
    "Classification",
    "EventFileSource",
    "RunSource",
    "classify",
    "filter_runs",
    "is_event_file",
    "select_shard",
]


@dataclass(frozen=True)
class EventFileSource:
    """One event file and the (run, context) it belongs to."""

    path: str
    rel_path: str
    run_path: str
    context: str
    sidecar: bool = False  # params beside the event files (``reading.sidecars``)
    # (size, mtime_ns) as a remote logdir's listing gave them; None: stat the local file.
    listed: tuple[int, int] | None = None


@dataclass(frozen=True)
class RunSource:
    """One run: its path relative to the logdir, its group and its event files.

    ``orphans`` is True for a run made of orphan files (its directory is the logdir or a
    group); such a run may also hold a run's own files when the directory is both.
    """

    run_path: str
    group_path: str
    files: tuple[EventFileSource, ...]
    orphans: bool = False


@dataclass(frozen=True)
class Classification:
    """The result of classifying a logdir: runs, groups, orphan files and walk warnings.

    ``orphans`` lists the orphan files whether they are kept (in runs of their directories)
    or skipped (``skip_orphans``).
    """

    logdir: str
    flat: bool
    runs: tuple[RunSource, ...]
    groups: tuple[str, ...]
    orphans: tuple[str, ...]
    warnings: tuple[str, ...]
    skip_orphans: bool = False
    # Remote logdirs: the first tags the layout read, by file (``known_heads`` of a next pass).
    heads: Mapping[str, Head] = field(default_factory=dict, compare=False)
    # Remote logdirs: how this pass reads them (storage options, the heads read once), for
    # the planner and the readers.
    remote: RemoteReads = field(default_factory=RemoteReads, compare=False, repr=False)
    # ``--shard``: the share of the logdir's runs kept (:func:`select_shard`), and the event
    # files of the runs other shards own, which are there though not converted here.
    shard: Shard | None = None
    elsewhere: frozenset[str] = field(default_factory=frozenset, compare=False, repr=False)
    runs_in_logdir: int | None = None

    def owns(self, run_path: str) -> bool:
        """True when the run ``run_path`` is this conversion's to change (its shard's)."""
        return self.shard is None or self.shard.owns(run_path)

    @property
    def files(self) -> tuple[EventFileSource, ...]:
        """All event files of all runs, in run order (orphans included unless skipped)."""
        return tuple(source for run in self.runs for source in run.files)


def _depth(rel: str) -> int:
    return rel.count("/") + 1 if rel else 0


def _assign_roles(candidates: list[str], flat: bool) -> tuple[set[str], set[str]]:
    """Apply design §3 to the directories that directly hold event files.

    Returns:
        The sets of run and group directories (relative paths, "" for the logdir).
    """
    runs: set[str] = set()
    groups: set[str] = set()
    # Deepest first as in Aim; ties in path order so the outcome never depends on the walk.
    ordered = sorted(candidates, key=lambda rel: (-_depth(rel), rel))
    for candidate in ordered:
        if candidate in runs or candidate in groups:
            continue  # a run's own files stay in it; a group's own files become orphans
        depth = _depth(candidate)
        parent = posixpath.dirname(candidate)
        if depth == 0:
            # Aim converts nothing for a logdir that is a single run; we make it run ".".
            if len(ordered) == 1:
                runs.add(candidate)
        elif depth == 1:
            runs.add(candidate)
        elif flat or parent in groups:
            runs.add(candidate)
            groups.add(parent)
        else:
            runs.add(parent)
            grandparent = posixpath.dirname(parent)
            if grandparent:
                groups.add(grandparent)
    return runs, groups


def _owning_run(directory: str, runs: set[str]) -> str | None:
    """Return the nearest run at or above ``directory`` (so nested runs never share files)."""
    current = directory
    while current not in runs:
        if not current:
            return None
        current = posixpath.dirname(current)
    return current


def _file_order(entry: tuple[str, str, EventFileSource]) -> tuple[str, str, str]:
    # Context, then name; two sub-writers of one key may hold files of the same name.
    return entry[0], entry[1], entry[2].rel_path


def _display(rel: str) -> str:
    return rel or "."


def _remote_heads(
    walker: Walker, known: Mapping[str, Head], remote: RemoteReads
) -> dict[str, Head]:
    """The first tags of each remote directory's first event file that the layout may ask
    about (directories below one holding files), by path relative to the logdir: from
    ``known`` when the file is listed with the size and time it had then, else from its
    first bytes, fetched together (one round of concurrent requests)."""
    if not walker.listed:
        return {}
    held = walker.found.keys()
    heads: dict[str, Head] = {}
    wanted: list[tuple[str, str, int, int]] = []  # (relative path, URL, size, mtime)
    for directory in held:
        parent = directory
        while parent:
            parent = posixpath.dirname(parent)
            if parent in held:
                name, url = min(walker.found[directory])
                rel = f"{directory}/{name}"
                size, mtime_ns = walker.listed[url]
                cached = known.get(rel)
                if cached is not None and cached[:2] == (size, mtime_ns):
                    heads[rel] = cached
                else:
                    wanted.append((rel, url, size, mtime_ns))
                break
    found = fetch_heads([(url, size) for _rel, url, size, _mtime in wanted], remote)
    for (rel, _url, size, mtime_ns), data in zip(wanted, found, strict=True):
        if isinstance(data, bytes):
            heads[rel] = (size, mtime_ns, first_tags_in(data))
    return heads


def _owners(
    walker: Walker,
    layout: str,
    flat: bool,
    known_heads: Mapping[str, Head],
    remote: RemoteReads,
) -> tuple[dict[str, tuple[str | None, str]], set[str], dict[str, Head]]:
    """Each directory's run (None: its files are orphans) and context, the groups, and the
    first tags the layout read of remote files (their heads kept in ``remote``)."""
    found = list(walker.found)
    if layout == "aim" or flat:
        runs, groups = _assign_roles(found, flat)
        owners: dict[str, tuple[str | None, str]] = {}
        for directory in found:
            owner = None if directory in groups else _owning_run(directory, runs)
            context = directory[len(owner) :].lstrip("/") if owner else directory
            owners[directory] = (owner, context if owner is not None else "")
        return owners, groups, {}

    heads = _remote_heads(walker, known_heads, remote)

    def tags_of(directory: str) -> tuple[str, ...]:
        name, path = min(walker.found[directory])
        head = heads.get(f"{directory}/{name}")
        return first_tags(path) if head is None else head[2]

    names = {
        directory: [name for name, _path in files] for directory, files in walker.found.items()
    }
    folded = auto_owners(names, walker.sidecars, tags_of)
    runs = {run for run, _context in folded.values()}
    # A run directory that holds other runs is a group: its own files are orphans.
    above = {posixpath.dirname(run) for run in runs if run}
    for directory in list(above):
        while directory:
            directory = posixpath.dirname(directory)
            above.add(directory)
    owners = {
        directory: (None, "") if run in above else (run, context)
        for directory, (run, context) in folded.items()
    }
    return owners, {directory for directory in above if directory}, heads


def classify(
    logdir: str | os.PathLike[str],
    *,
    layout: str = "auto",
    flat: bool = False,
    skip_orphans: bool = False,
    known_heads: Mapping[str, Head] | None = None,
    remote: RemoteReads | None = None,
) -> Classification:
    """Walk a logdir and classify its event files into runs, contexts, groups and orphans.

    Args:
        logdir: The directory to walk, resolved first (a symlinked logdir is its target, so
            it names the same runs); symlinked directories below it are followed.  A URL
            (``s3://bucket/prefix``, any fsspec protocol) is listed instead (``remote``).
        layout: ``auto`` (one run per training run, for every common writer: ``layouts``)
            or ``aim`` (Aim's documented rules).
        flat: Aim's ``--flat``: every directory holding event files is a run and its
            parent a group, instead of deeper directories being contexts (either layout).
        skip_orphans: Leave orphan files out, as Aim does, instead of keeping the orphans
            of each directory as a run at that directory's path.
        known_heads: For a remote logdir, the first tags the layout read of files on an
            earlier pass (``Classification.heads``, kept in the store): a file listed with
            the same size and time is not fetched again.
        remote: How this pass reads a URL logdir (its storage options; a new one, with no
            options, by default); the classification carries it on, with the heads read.

    Returns:
        The classification, with runs, files, groups, orphans and warnings all sorted.

    Raises:
        LogdirError: The logdir is missing, is not a directory or cannot be read.
    """
    remote = remote if remote is not None else RemoteReads()
    root, walker = find_files(os.fspath(logdir), remote)
    if not walker.found:
        # design §9: an empty logdir is not an error (a job may not have logged yet), but say so.
        walker.warnings.append(f"no event files under {root}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    owners, groups, heads = _owners(walker, layout, flat, known_heads or {}, remote)
    # Run -> its files as (context, name, file): sorted by the first two, which are unique.
    files_by_run: dict[str, list[tuple[str, str, EventFileSource]]] = {}
    orphans: list[str] = []
    orphan_runs: set[str] = set()
    for directory, entries in walker.found.items():
        owner, context = owners[directory]
        for name, path in entries:
            rel_path = f"{directory}/{name}" if directory else name
            if owner is None:
                orphans.append(rel_path)
                if skip_orphans:
                    continue
                # Kept: the orphans of a directory are a run of their own at its path.
                orphan_runs.add(directory)
                source = EventFileSource(
                    path, rel_path, _display(directory), "", listed=walker.listed.get(path)
                )
                files_by_run.setdefault(directory, []).append(("", name, source))
                continue
            source = EventFileSource(
                path, rel_path, _display(owner), context, listed=walker.listed.get(path)
            )
            files_by_run.setdefault(owner, []).append((context, name, source))
        if owner is None:
            continue
        # Params beside the run's event files are part of it, where its files are.
        for name, path in sorted(walker.sidecars.get(directory, {}).items()):
            if name in PARAMS_SIDECARS:
                rel_path = f"{directory}/{name}" if directory else name
                source = EventFileSource(
                    path,
                    rel_path,
                    _display(owner),
                    context,
                    sidecar=True,
                    listed=walker.listed.get(path),
                )
                files_by_run[owner].append((context, name, source))

    run_sources = [
        RunSource(
            run_path=_display(run),
            group_path=posixpath.dirname(run),
            files=tuple(entry[2] for entry in sorted(files, key=_file_order)),
            orphans=run in orphan_runs,
        )
        for run, files in files_by_run.items()
    ]
    return Classification(
        logdir=root,
        flat=flat,
        runs=tuple(sorted(run_sources, key=lambda run: run.run_path)),
        groups=tuple(sorted(groups)),
        orphans=tuple(sorted(orphans)),
        warnings=tuple(sorted(walker.warnings)),
        skip_orphans=skip_orphans,
        heads=heads,
        remote=remote,
    )


def filter_runs(classification: Classification, run_globs: Sequence[str]) -> Classification:
    """Keep only the runs whose path matches one of the globs.

    Matching is ``fnmatch.fnmatchcase`` on ``run_path`` (``*`` also crosses ``/``). Groups,
    orphans and warnings describe the whole logdir and are kept unchanged.

    Args:
        classification: The result of :func:`classify`.
        run_globs: Shell-style patterns; an empty sequence keeps every run.

    Returns:
        A classification with the non-matching runs removed.
    """
    if not run_globs:
        return classification
    kept = tuple(
        run
        for run in classification.runs
        if any(fnmatch.fnmatchcase(run.run_path, pattern) for pattern in run_globs)
    )
    return replace(classification, runs=kept)


def select_shard(classification: Classification, shard: Shard | None) -> Classification:
    """Keep only the runs of ``shard`` (all of them for None).

    Orphans go with the run of their directory (``.`` for the logdir's root), kept or
    skipped; the files of the other shards' runs are listed in ``elsewhere``, so that this
    shard neither takes them for gone nor takes them over.
    """
    if shard is None:
        return classification
    runs: list[RunSource] = []
    others: list[RunSource] = []
    for run in classification.runs:
        (runs if shard.owns(run.run_path) else others).append(run)
    orphans = [path for path in classification.orphans if shard.owns(orphan_run_path(path))]
    elsewhere = {source.rel_path for run in others for source in run.files}
    elsewhere.update(set(classification.orphans) - set(orphans))
    return replace(
        classification,
        runs=tuple(runs),
        orphans=tuple(orphans),
        shard=shard,
        elsewhere=frozenset(elsewhere),
        runs_in_logdir=len(classification.runs),
    )


def orphan_run_path(path: str) -> str:
    """The run an orphan event file is kept as: its directory (``.`` for the logdir)."""
    return posixpath.dirname(path) or "."
