"""The options of one conversion, built once at the edge and checked there.

The command line builds a :class:`ConvertOptions` from its flags; :func:`tbconvert.convert`
builds one from its keywords (:meth:`ConvertOptions.with_keywords`).  Either way the value is
checked as it is made (``__post_init__``), before any work, and passed down whole: the job
takes it, and the reading side gets what it needs as :class:`ReadSettings`.

Speed thresholds that never change a row travel beside the options as :class:`ConvertTuning`
(the conversion's) and :class:`~tbconvert.reading.tuning.ReadTuning` (the readers').
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tbconvert.errors import UsageError
from tbconvert.filters import Selection, Shard
from tbconvert.reading.chunks import CHUNK_BYTES, ReadSettings
from tbconvert.reading.large_records import MAX_RECORD_SIZE, MIN_MAX_RECORD_SIZE
from tbconvert.reading.remote_reads import RemoteReads
from tbconvert.reading.tuning import ReadTuning

__all__ = [
    "BY_RECORD_BYTES_VARIABLE",
    "CHUNK_POINTS",
    "ConvertOptions",
    "ConvertTuning",
    "no_notice",
]

CHUNK_POINTS = 50_000

# A diagnostic and test knob, not an option: files under this many bytes to read are decoded
# record by record and read in batches (``ReadTuning.by_record_bytes``); 0 sends every file
# down the block path.  The test suite sets it to 0 so that its small fixture files keep
# covering the block path (tests/conftest.py).
BY_RECORD_BYTES_VARIABLE = "TBCONVERT_BY_RECORD_BYTES"


def no_notice(_line: str) -> None:
    """The ``notify`` of a conversion that shows the user nothing."""


def read_tuning_from_environment() -> ReadTuning:
    """The readers' default tuning, with :data:`BY_RECORD_BYTES_VARIABLE` when it is set."""
    value = os.environ.get(BY_RECORD_BYTES_VARIABLE, "").strip()
    if not value:
        return ReadTuning()
    if not value.isdigit():
        raise UsageError(
            f"{BY_RECORD_BYTES_VARIABLE} is {value!r}",
            hint="give a number of bytes (0: every file takes the block path), or unset it",
        )
    return ReadTuning(by_record_bytes=int(value))


@dataclass(frozen=True)
class ConvertTuning:
    """The conversion's speed thresholds (none changes what is stored); why each default is
    what it is: docs/performance.md#conversion-tuning.

    Attributes:
        read: The readers' thresholds (by default with ``TBCONVERT_BY_RECORD_BYTES`` applied).
        parcel_chunks: A ``--jobs`` worker sends its chunks in parcels: one ends at this many
            chunks, at a chunk's worth of points, at ``parcel_bytes`` of blobs (images,
            audio), or once it took ``parcel_seconds`` to decode.
        group_blob_bytes: A commit group (many small files in one transaction) closes at a
            chunk's worth of points, at this many blob bytes, at ``group_read_bytes`` of
            files read, or at ``group_files`` files.
    """

    read: ReadTuning = field(default_factory=read_tuning_from_environment)
    parcel_chunks: int = 256
    parcel_bytes: int = CHUNK_BYTES
    parcel_seconds: float = 0.005
    group_blob_bytes: int = 8 << 20
    group_read_bytes: int = 2 << 20
    group_files: int = 1000


@dataclass(frozen=True)
class ConvertOptions:
    """How :func:`tbconvert.convert` runs; each field is the keyword of the same name there
    (``plugins``, ``tags`` and ``exclude_tags`` together make ``selection``).

    Raises:
        UsageError: on construction, for a value no conversion can take (an empty
            ``source``, a ``max_record_size`` under 1 MiB, a ``shard`` K/N without
            0 <= K < N).
    """

    layout: str = "auto"
    flat: bool = False
    skip_orphans: bool = False
    dry_run: bool = False
    full: bool = False
    selection: Selection = field(default_factory=Selection)
    runs: tuple[str, ...] = ()
    jobs: int = 1
    source: str | None = None
    upgrade_store: bool = False
    progress: bool | None = None
    chunk_points: int = CHUNK_POINTS
    # fsspec's options for a URL logdir (credentials, endpoint): never logged or shown.
    storage_options: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    max_record_size: int = MAX_RECORD_SIZE
    notify: Callable[[str], Any] = field(default=no_notice, compare=False)
    tuning: ConvertTuning = field(default_factory=ConvertTuning)
    # ``--shard K/N``: only the runs whose path hashes to K of N (None: every run).
    shard: Shard | None = None

    def __post_init__(self) -> None:
        if self.shard is not None and not 0 <= self.shard.index < self.shard.count:
            raise UsageError(
                f"--shard is {self.shard}",
                hint="give K/N with N at least 1 and K from 0 to N-1, e.g. --shard 0/4",
            )
        if self.source is not None and not self.source.strip():
            raise UsageError(
                "the source name is empty", hint="give --source a name, or leave it out"
            )
        if self.max_record_size < MIN_MAX_RECORD_SIZE:
            raise UsageError(
                f"--max-record-size is {self.max_record_size} bytes",
                hint=f"give at least {MIN_MAX_RECORD_SIZE >> 20}M: smaller records are no risk",
            )

    def read_settings(self, remote: RemoteReads | None = None) -> ReadSettings:
        """What every file of the conversion is read with (``remote``: how its pass reads a
        URL logdir)."""
        return ReadSettings(
            self.selection,
            self.chunk_points,
            self.full,
            self.max_record_size,
            self.tuning.read,
            remote,
        )

    def logged(self, source: str, flat: bool) -> dict[str, Any]:
        """What the store's conversions log keeps of the options."""
        plugins = self.selection.plugins
        logged: dict[str, Any] = {
            "source": source,
            "layout": self.layout,
            "flat": flat,
            "full": self.full,
            "plugins": sorted(plugins) if plugins else None,
            "tags": list(self.selection.tags),
            "exclude_tags": list(self.selection.exclude_tags),
        }
        if self.shard is not None:
            logged["shard"] = str(self.shard)
        return logged

    def with_keywords(self, **keywords: Any) -> ConvertOptions:
        """These options with :func:`tbconvert.convert`'s keywords applied (checked again).

        The keywords are the fields, except that ``plugins`` (names, or None for all),
        ``tags`` and ``exclude_tags`` replace the parts of ``selection``; ``runs`` takes any
        sequence, ``storage_options`` any mapping (or None), ``notify`` None for silence, and
        ``shard`` a :class:`~tbconvert.filters.Shard`, a pair ``(K, N)`` or the text ``"K/N"``.

        Raises:
            TypeError: a keyword :func:`tbconvert.convert` does not take.
            UsageError: a value no conversion can take.
        """
        unknown = sorted(keywords.keys() - _KEYWORDS)
        if unknown:
            raise TypeError(f"convert() got an unexpected keyword argument {unknown[0]!r}")
        selection = self.selection
        if "plugins" in keywords:
            plugins: Iterable[str] | None = keywords.pop("plugins")
            selection = replace(
                selection, plugins=frozenset(plugins) if plugins is not None else None
            )
        if "tags" in keywords:
            selection = replace(selection, tags=tuple(keywords.pop("tags")))
        if "exclude_tags" in keywords:
            selection = replace(selection, exclude_tags=tuple(keywords.pop("exclude_tags")))
        if "runs" in keywords:
            keywords["runs"] = tuple(keywords["runs"])
        if "storage_options" in keywords:
            keywords["storage_options"] = dict(keywords["storage_options"] or {})
        if keywords.get("notify", ...) is None:
            keywords["notify"] = no_notice
        if "shard" in keywords:
            keywords["shard"] = as_shard(keywords["shard"])
        return replace(self, selection=selection, **keywords)


def as_shard(value: Shard | tuple[int, int] | str | None) -> Shard | None:
    """A ``shard`` keyword as a :class:`~tbconvert.filters.Shard` (range checked by the
    options).

    Raises:
        UsageError: a value that is no shard.
    """
    if value is None or isinstance(value, Shard):
        return value
    if isinstance(value, str):
        return Shard.parse(value)
    try:
        index, count = value
    except (TypeError, ValueError):
        raise UsageError(
            f"shard is {value!r}", hint="give (K, N) or 'K/N': the share K (0 to N-1) of N"
        ) from None
    if not isinstance(index, int) or not isinstance(count, int):
        raise UsageError(f"shard is {value!r}", hint="K and N are whole numbers")
    return Shard(index, count)


# The keywords of :func:`tbconvert.convert` beside ``options``.
_KEYWORDS = ({field.name for field in fields(ConvertOptions)} - {"selection"}) | {
    "plugins",
    "tags",
    "exclude_tags",
}
