"""What a user selects: plugins and tag globs for conversion, and one glob vocabulary.

Globs are shell patterns matched with ``fnmatch.fnmatchcase`` (``*`` also crosses ``/``), for
``--run``, ``--tag``, ``--exclude-tag`` and ``--context`` alike, when converting and reading.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tbconvert.plugins.names import DECODED_PLUGINS

Globs = str | Sequence[str] | None


def globs(patterns: Globs) -> tuple[str, ...]:
    """Normalise a glob argument: None, one pattern, or several."""
    if patterns is None:
        return ()
    return (patterns,) if isinstance(patterns, str) else tuple(patterns)


def matches(name: str, patterns: tuple[str, ...], *aliases: str) -> bool:
    """True when there are no patterns or ``name`` (or an alias) matches one of them."""
    return not patterns or any(
        fnmatchcase(candidate, pattern) for pattern in patterns for candidate in (name, *aliases)
    )


@dataclass(frozen=True)
class Selection:
    """What to convert: plugin names (None = all) and tag globs to include and exclude."""

    plugins: frozenset[str] | None = None
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()

    def accepts_tag(self, tag: str) -> bool:
        """True when the tag passes the --tag and --exclude-tag globs."""
        if self.tags and not any(fnmatchcase(tag, glob) for glob in self.tags):
            return False
        return not any(fnmatchcase(tag, glob) for glob in self.exclude_tags)

    def accepts_plugin(self, plugin: str) -> bool:
        """True when the plugin is selected by --plugins ("tensors" selects the raw ones)."""
        if self.plugins is None or plugin in self.plugins:
            return True
        return plugin not in DECODED_PLUGINS and "tensors" in self.plugins

    @property
    def everything(self) -> bool:
        """True when nothing is left out (no --plugins, --tag or --exclude-tag)."""
        return self.plugins is None and not self.tags and not self.exclude_tags

    def canonical(self) -> str | None:
        """The selection as one canonical JSON text (sorted, no spaces); None for everything.

        Stored per event file (design §7): which values of it the store holds.
        """
        if self.everything:
            return None
        return json.dumps(
            {
                "exclude_tags": sorted(set(self.exclude_tags)),
                "plugins": None if self.plugins is None else sorted(self.plugins),
                "tags": sorted(set(self.tags)),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_canonical(cls, text: str | None) -> Selection:
        """The selection a :meth:`canonical` text stands for."""
        if text is None:
            return cls()
        data = json.loads(text)
        plugins = data.get("plugins")
        return cls(
            plugins=None if plugins is None else frozenset(plugins),
            tags=tuple(data.get("tags", ())),
            exclude_tags=tuple(data.get("exclude_tags", ())),
        )

    def covers(self, other: Selection) -> bool:
        """True when every value ``other`` keeps, this one keeps too.

        Conservative: globs are compared as text (``loss*`` is not known to cover ``loss``),
        so a False answer may only cost a read that was not needed, never a value.
        """
        if self.everything:
            return True
        if self.plugins is not None and (
            other.plugins is None or not other.plugins <= self.plugins
        ):
            return False
        if self.tags and (not other.tags or not set(other.tags) <= set(self.tags)):
            return False
        return set(self.exclude_tags) <= set(other.exclude_tags)
