"""Which logdir a conversion writes as (its source), the checks that keep sources apart, and
what the store remembers of a source's tags.

A run is (source, run path); the source is the logdir's resolved path unless named with
``--source``.  On a shared server two machines' logdirs of one path must be named apart; a
logdir the store holds under another name is pointed out with the ``--source`` to use.  The
queries behind these rules run on the writer's connection, in its open transaction.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from tbconvert.conversion.plan import first_record_digest
from tbconvert.errors import StoreError
from tbconvert.reading.discovery import Classification
from tbconvert.rows import TagMetadata
from tbconvert.writing.writer import StoreWriter

# Files whose first records tell whether a logdir is in the store under another source.
_SAMPLES = 3
# Series plugins that were not taken from a SummaryMetadata, so there is nothing to remember.
_NOT_FROM_METADATA = frozenset(
    {"tensor", "unknown", "graphs", "graph_tagged_run_metadata", "session_log", "log_message"}
)
_KNOWN_METADATA = (
    "SELECT r.run_path, c.name, s.name, s.plugin, s.display_name, s.description, "
    "s.plugin_content FROM series AS s JOIN runs AS r ON r.id = s.run_id "
    "JOIN contexts AS c ON c.id = s.context_id WHERE r.source = :source ORDER BY s.id"
)


@dataclass(frozen=True)
class Origin:
    """Where the logdir comes from: its name in the store, and the machine reading it."""

    source: str
    explicit: bool
    host: str

    def run_id(self, writer: StoreWriter, logdir: str, run_path: str, group_path: str) -> int:
        """Get or make the run ``run_path`` of this source (read from ``logdir``)."""
        # Its display name: its directory's name (the logdir's for the run ".").
        name = posixpath.basename(logdir) if run_path == "." else run_path.rsplit("/", 1)[-1]
        return writer.identities.run_id(
            self.source, run_path, host=self.host, logdir=logdir, group_path=group_path, name=name
        )


def other_source(writer: StoreWriter, origin: Origin, classification: Classification) -> str | None:
    """A notice when this logdir's files are in the store already under another source
    (the logdir moved, or was converted under another --source)."""
    samples = []
    for source in classification.files[:_SAMPLES]:
        try:
            size = None if source.listed is None else source.listed[0]
            digest = first_record_digest(source.path, size, classification.remote)
        except OSError:
            return None  # the file is reported when it is read
        if digest is None:
            return None
        samples.append((source.rel_path, digest))
    if not samples:
        return None
    others = sources_holding(writer, origin.source, samples)
    if not others:
        return None
    return (
        f"the store already holds these files as source {others[0]}; to continue it "
        f"rather than convert them again as {origin.source}, convert with "
        f"--source {others[0]}"
    )


def check_source(writer: StoreWriter, origin: Origin, store: str) -> None:
    """On a shared server, refuse to mix two machines' logdirs that share a path.

    Raises:
        StoreError: the source holds runs written from another host, and was not named.
    """
    if origin.explicit or not writer.shared:
        return
    others = sorted(hosts_of_source(writer, origin.source) - {origin.host})
    if others:
        raise StoreError(
            f"the store already has runs of {origin.source} written from "
            f"{', '.join(others)}, and this is {origin.host}",
            path=store,
            hint=f"name this logdir: --source {origin.host}:{origin.source} if it is "
            f"another one, or --source {origin.source} if it is the same (shared) "
            "directory",
        )


def hosts_of_source(writer: StoreWriter, source: str) -> set[str]:
    """The hosts that wrote the runs of a source so far."""
    rows = writer.statements.all(
        "SELECT DISTINCT host FROM runs WHERE source = :source AND host IS NOT NULL",
        {"source": source},
    )
    return {row[0] for row in rows}


def sources_holding(
    writer: StoreWriter, source: str, files: Sequence[tuple[str, str]]
) -> list[str]:
    """The other sources that hold every one of ``files`` ((path, first-record digest)):
    the same logdir known under another name."""
    paths = {path: digest for path, digest in files}
    marks = ", ".join(f":path{index}" for index in range(len(paths)))
    found = writer.statements.all(
        "SELECT DISTINCT r.source, f.path, f.head_digest FROM event_files AS f "
        f"JOIN runs AS r ON r.id = f.run_id WHERE f.path IN ({marks}) AND r.source <> :source",
        {"source": source, **{f"path{index}": path for index, path in enumerate(paths)}},
    )
    matches: dict[str, int] = {}
    for other, path, digest in found:
        if paths.get(path) == digest:
            matches[other] = matches.get(other, 0) + 1
    return sorted(other for other, count in matches.items() if count == len(paths))


def known_metadata(
    writer: StoreWriter, source: str
) -> dict[tuple[str, str], dict[str, TagMetadata]]:
    """The first metadata of every tag that came from a SummaryMetadata, by tag, for every
    owner (run path, context) of a source: one query, however many runs it has.  A file read
    on from the middle is told these, as TF1 writers send a tag's metadata only once."""
    known: dict[tuple[str, str], dict[str, TagMetadata]] = {}
    rows = writer.statements.all(_KNOWN_METADATA, {"source": source})
    for run_path, context, tag, plugin, display, description, content in rows:
        tags = known.setdefault((run_path, context), {})
        if tag not in tags and plugin not in _NOT_FROM_METADATA:
            tags[tag] = TagMetadata(
                plugin, display, description, bytes(content) if content is not None else None
            )
    return known
