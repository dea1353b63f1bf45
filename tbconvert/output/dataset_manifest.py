"""The manifest of a Parquet dataset (``export dataset``) and the file moves that commit it.

The manifest, ``_tbconvert_manifest.json`` at the dataset's root, says what each data file
holds: per table and partition, its files; per event file of the store, what of it the point
tables hold (its ``event_files`` id, run, context, first-record digest, selection and the byte
offset exported to).  It is written whole to a temporary name and renamed, and last: it is
the commit point of a run.  New data files are written under ``_tbconvert_tmp/`` (outside
every table's directory, so no engine sees them); the manifest that names them carries a
``pending`` list of the moves into place and the deletions of the files they replace, done
after it is written and redone by the next run should this one be killed.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

MANIFEST = "_tbconvert_manifest.json"
TEMPORARY = "_tbconvert_tmp"
FORMAT = 1


@dataclass(frozen=True)
class FileMark:
    """What the dataset holds of one event file: the points it had up to ``offset``, read
    under ``selection``, filed under (``run_id``, ``context_id``) of the run ``run_path`` of
    ``source``, first record ``head``."""

    run_id: int
    context_id: int
    source: str
    run_path: str
    head: str | None
    offset: int
    selection: str | None

    def grown_from(self, now: FileMark) -> bool:
        """``now`` holds this file's points and more after them (it grew), or the same."""
        return (
            (self.run_id, self.context_id, self.source, self.run_path, self.head, self.selection)
            == (now.run_id, now.context_id, now.source, now.run_path, now.head, now.selection)
        ) and now.offset >= self.offset


@dataclass
class Manifest:
    """The dataset's state: buckets, files per table and partition, marks per event file,
    digests of the whole-table files, the export's generation, and the pending steps."""

    buckets: int
    generation: int = 0
    tables: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    marks: dict[int, FileMark] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    pending: dict[str, list[Any]] = field(default_factory=dict)

    def to_json(self) -> str:
        """The manifest's text."""
        document = {
            "format": FORMAT,
            "buckets": self.buckets,
            "generation": self.generation,
            "tables": self.tables,
            "event_files": {
                str(file_id): mark.__dict__ for file_id, mark in sorted(self.marks.items())
            },
            "digests": self.digests,
            "pending": self.pending,
        }
        return json.dumps(document, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse a manifest's text."""
        document = json.loads(text)
        if document.get("format") != FORMAT:
            raise ValueError(f"unknown manifest format {document.get('format')!r}")
        return cls(
            buckets=int(document["buckets"]),
            generation=int(document["generation"]),
            tables={t: dict(parts) for t, parts in document["tables"].items()},
            marks={int(k): FileMark(**v) for k, v in document["event_files"].items()},
            digests=dict(document["digests"]),
            pending=dict(document["pending"]),
        )


class DatasetFiles:
    """The dataset's directory through an fsspec file system: the manifest, data files,
    temporary files, and the pending moves and deletions."""

    def __init__(self, fs: Any, root: str) -> None:
        """Wrap ``root`` on ``fs`` (an fsspec file system)."""
        self.fs = fs
        self.root = root.rstrip("/")

    def path(self, *parts: str) -> str:
        """A path below the root."""
        return posixpath.join(self.root, *parts)

    def read_manifest(self) -> Manifest | None:
        """The manifest, or None where there is none yet."""
        where = self.path(MANIFEST)
        if not self.fs.exists(where):
            return None
        with self.fs.open(where, "rb") as handle:
            return Manifest.from_json(handle.read().decode("utf-8"))

    def write_manifest(self, manifest: Manifest) -> None:
        """Replace the manifest whole: a temporary name, then a rename."""
        temporary = self.path(MANIFEST + ".tmp")
        with self.fs.open(temporary, "wb") as handle:
            handle.write(manifest.to_json().encode("utf-8"))
        self.fs.mv(temporary, self.path(MANIFEST))

    def finish_pending(self, manifest: Manifest, step: Any = None) -> None:
        """Do what a committed manifest left to do (moves into place, then deletions),
        whether this run wrote it or a killed one did, then clear its ``pending``."""
        if not manifest.pending:
            return
        for source, target in manifest.pending.get("moves", []):
            if self.fs.exists(self.path(source)):
                self.fs.makedirs(posixpath.dirname(self.path(target)), exist_ok=True)
                self.fs.mv(self.path(source), self.path(target))
            if step is not None:
                step("moved")
        for name in manifest.pending.get("deletions", []):
            if self.fs.exists(self.path(name)):
                self.fs.rm(self.path(name))
            if step is not None:
                step("deleted")
        manifest.pending = {}
        self.write_manifest(manifest)

    def clear_temporary(self) -> None:
        """Remove what a run killed before its commit wrote (no manifest names it)."""
        where = self.path(TEMPORARY)
        if self.fs.exists(where):
            self.fs.rm(where, recursive=True)
