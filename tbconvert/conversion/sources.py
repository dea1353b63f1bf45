"""Which logdir a conversion writes as (its source), and the checks that keep sources apart.

A run is (source, run path); the source is the logdir's resolved path unless named with
``--source``.  On a shared server two machines' logdirs of one path must be named apart; a
logdir the store holds under another name is pointed out with the ``--source`` to use.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from tbconvert.conversion.plan import first_record_digest
from tbconvert.errors import StoreError
from tbconvert.reading.discovery import Classification
from tbconvert.writing.writer import StoreWriter

# Files whose first records tell whether a logdir is in the store under another source.
_SAMPLES = 3


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
        return writer.run_id(
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
    others = writer.sources_holding(origin.source, samples)
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
    others = sorted(writer.hosts_of_source(origin.source) - {origin.host})
    if others:
        raise StoreError(
            f"the store already has runs of {origin.source} written from "
            f"{', '.join(others)}, and this is {origin.host}",
            path=store,
            hint=f"name this logdir: --source {origin.host}:{origin.source} if it is "
            f"another one, or --source {origin.source} if it is the same (shared) "
            "directory",
        )
