"""What a conversion did (the summary, also as one JSON object) and its progress bar.

The text form is rendered by ``tbconvert.cli.render``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from tbconvert.reading.records import Damage

EXIT_OK = 0
EXIT_DAMAGED = 3
# Figures of the logdir itself, not of what a pass did: a later pass's replace an earlier's.
_LATEST = frozenset({"runs", "runs_in_logdir", "contexts", "logdir", "store", "dry_run"})


def _flatten(counts: dict[str, dict[str, int]]) -> dict[tuple[str, str], int]:
    return {(plugin, tag): value for plugin, tags in counts.items() for tag, value in tags.items()}


@dataclass(frozen=True)
class FileProblem:
    """A damaged, unreadable or invalid event file, with where and what."""

    path: str
    message: str
    offset: int | None = None

    def __str__(self) -> str:
        where = self.path if self.offset is None else f"{self.path}: at byte {self.offset}"
        return f"{where}: {self.message}"


@dataclass
class Summary:
    """Everything one conversion did; ``exit_code`` follows the CLI's contract."""

    logdir: str
    store: str
    dry_run: bool = False
    runs: int = 0
    # ``--shard K/N``: which shard ran (``runs`` are its runs), of how many runs in the logdir.
    shard: str | None = None
    runs_in_logdir: int = 0
    runs_created: int = 0
    runs_extended: int = 0
    contexts: int = 0
    series_created: int = 0
    series_extended: int = 0
    points: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)  # plugin -> tag -> values
    undecodable: dict[str, dict[str, int]] = field(default_factory=dict)
    filtered_values: int = 0
    files_total: int = 0
    files_read: int = 0
    files_unchanged: int = 0
    files_replaced: int = 0
    files_moved: int = 0
    # Files another source stored from a logdir inside or around this one, now this one's.
    files_taken_over: int = 0
    files_gone: int = 0
    files_partial: int = 0
    bytes_read: int = 0
    records_read: int = 0
    damaged_records: int = 0
    lossy_records: int = 0
    problems: list[FileProblem] = field(default_factory=list)
    # Files whose stored state says they hold damaged records or none valid, which this pass
    # did not report: the exit code stays 3 while they are there.
    still_damaged: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    # Orphans the store did not hold before this pass: named in warnings once, then counted.
    orphans_new: list[str] = field(default_factory=list)
    orphans_skipped: bool = False  # --skip-orphans (else they are kept as runs)
    # Runs of earlier passes whose files now belong to other runs (re-classified).
    runs_merged: int = 0
    taken_over: list[str] = field(default_factory=list)  # one line per source taken from
    warnings: list[str] = field(default_factory=list)
    schema_change: str | None = None
    elapsed: float = 0.0
    plan: list[dict[str, Any]] = field(default_factory=list)
    passes: int = 1
    stopped: str | None = None  # why and where a --watch stopped, as one sentence

    def absorb(self, later: Summary) -> None:
        """Add a later pass's counts to this one (``--watch``), every field by its kind, so
        no count can be forgotten: numbers add up (files looked at, read and unchanged over
        all passes, so they add up too), except the logdir's own figures (:data:`_LATEST`)
        and flags, which are the later pass's; counters and per-plugin counts merge;
        problems accumulate; other lists and texts are the later pass's (or the first one
        given)."""
        for item in fields(self):
            name = item.name
            mine, theirs = getattr(self, name), getattr(later, name)
            if name in _LATEST or isinstance(mine, bool):
                setattr(self, name, theirs)
            elif isinstance(mine, (int, float)):
                setattr(self, name, mine + theirs)
            elif isinstance(mine, Counter):
                mine.update(theirs)
            elif isinstance(mine, dict):
                self.add_counts(mine, Counter(_flatten(theirs)))
            elif name in ("problems", "taken_over"):
                mine.extend(theirs)
            elif isinstance(mine, list) or mine is None:
                setattr(self, name, theirs)

    @property
    def exit_code(self) -> int:
        """3 while the logdir holds damaged records or unreadable files (read in this pass
        or earlier ones), else 0."""
        damaged = self.damaged_records or self.problems or self.still_damaged
        return EXIT_DAMAGED if damaged else EXIT_OK

    @property
    def total_points(self) -> int:
        """Points written, all plugins together."""
        return sum(self.points.values())

    def add_damage(self, path: str, damage: list[Damage]) -> None:
        """Count damaged regions of a file (each costs at least one record)."""
        for region in damage:
            self.damaged_records += 1
            self.problems.append(
                FileProblem(path, f"{region.reason}, skipped {region.length} bytes", region.offset)
            )

    def add_counts(
        self, target: dict[str, dict[str, int]], counts: Counter[tuple[str, str]]
    ) -> None:
        """Merge (plugin, tag) -> values counts into ``skipped`` or ``undecodable``."""
        for (plugin, tag), values in counts.items():
            per_tag = target.setdefault(plugin, {})
            per_tag[tag] = per_tag.get(tag, 0) + values

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``--json`` output)."""
        return {
            "logdir": self.logdir,
            "store": self.store,
            "dry_run": self.dry_run,
            "runs": {
                "total": self.runs,
                "created": self.runs_created,
                "extended": self.runs_extended,
            },
            "shard": self._shard_dict(),
            "contexts": self.contexts,
            "series": {"created": self.series_created, "extended": self.series_extended},
            "points": dict(sorted(self.points.items())),
            "skipped": self.skipped,
            "undecodable": self.undecodable,
            "filtered_values": self.filtered_values,
            "files": {
                "total": self.files_total,
                "read": self.files_read,
                "unchanged": self.files_unchanged,
                "replaced": self.files_replaced,
                "moved": self.files_moved,
                "taken_over": self.files_taken_over,
                "gone": self.files_gone,
                "partial": self.files_partial,
            },
            "bytes_read": self.bytes_read,
            "records_read": self.records_read,
            "damaged_records": self.damaged_records,
            "lossy_records": self.lossy_records,
            "problems": [str(problem) for problem in self.problems],
            "still_damaged": self.still_damaged,
            "orphans": self.orphans,
            "orphans_new": self.orphans_new,
            "orphans_skipped": self.orphans_skipped,
            "runs_merged": self.runs_merged,
            "taken_over": self.taken_over,
            "warnings": self.warnings,
            "schema_change": self.schema_change,
            "elapsed_seconds": round(self.elapsed, 3),
            "points_per_second": round(self.rate()),
            "plan": self.plan,
            "passes": self.passes,
            "stopped": self.stopped,
            "exit_code": self.exit_code,
        }

    def _shard_dict(self) -> dict[str, Any] | None:
        """``--shard``: which one, and how many of the logdir's runs it took (``runs``)."""
        if self.shard is None:
            return None
        index, count = self.shard.split("/")
        return {
            "index": int(index),
            "count": int(count),
            "runs": self.runs,
            "runs_in_logdir": self.runs_in_logdir,
        }

    def to_json(self) -> str:
        """One JSON object, one line."""
        return json.dumps(self.to_dict(), sort_keys=False)

    def rate(self) -> float:
        """Points written per second of wall time."""
        return self.total_points / self.elapsed if self.elapsed > 0 else 0.0


def progress_bar(total: int, *, enabled: bool | None) -> Any:
    """A tqdm bar in bytes on stderr; ``enabled=None`` hides it when stderr is no terminal."""
    if enabled is False or (enabled is None and not _is_terminal(sys.stderr)):
        # tqdm (and the multiprocessing it brings) would be imported for nothing.
        return _NoBar()
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=None if enabled is None else not enabled,
        dynamic_ncols=True,
        leave=False,
        desc="converting",
    )


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


class _NoBar:
    """What a hidden progress bar does: nothing."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def update(self, _n: int) -> None:
        return None
