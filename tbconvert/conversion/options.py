"""The options of one conversion pass, as one value passed down the conversion."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tbconvert.filters import Selection
from tbconvert.reading.large_records import MAX_RECORD_SIZE

if TYPE_CHECKING:
    from tbconvert.reading.chunks import ReadSettings

CHUNK_POINTS = 50_000


@dataclass(frozen=True)
class ConvertOptions:
    """How :func:`tbconvert.convert` runs; each field is the keyword of the same name there
    (``plugins``, ``tags`` and ``exclude_tags`` together make ``selection``)."""

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
    notify: Callable[[str], Any] = field(default=lambda _line: None, compare=False)

    def read_settings(self) -> ReadSettings:
        """What every file of the conversion is read with."""
        from tbconvert.reading.chunks import ReadSettings

        return ReadSettings(self.selection, self.chunk_points, self.full, self.max_record_size)

    def logged(self, source: str, flat: bool) -> dict[str, Any]:
        """What the store's conversions log keeps of the options."""
        plugins = self.selection.plugins
        return {
            "source": source,
            "layout": self.layout,
            "flat": flat,
            "full": self.full,
            "plugins": sorted(plugins) if plugins else None,
            "tags": list(self.selection.tags),
            "exclude_tags": list(self.selection.exclude_tags),
        }

    @classmethod
    def of(
        cls,
        *,
        plugins: Iterable[str] | None = None,
        tags: Sequence[str] = (),
        exclude_tags: Sequence[str] = (),
        runs: Sequence[str] = (),
        notify: Callable[[str], Any] | None = None,
        **rest: Any,
    ) -> ConvertOptions:
        """The options from :func:`tbconvert.convert`'s keywords."""
        selection = Selection(
            plugins=frozenset(plugins) if plugins is not None else None,
            tags=tuple(tags),
            exclude_tags=tuple(exclude_tags),
        )
        if notify is not None:
            rest["notify"] = notify
        return cls(selection=selection, runs=tuple(runs), **rest)
