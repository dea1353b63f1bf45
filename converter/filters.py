"""What a user selects: plugins and tag globs for conversion, and one glob vocabulary.

Globs are shell patterns matched with ``fnmatch.fnmatchcase`` (``*`` also crosses ``/``), for
``--run``, ``--tag``, ``--exclude-tag`` and ``--context`` alike, when converting and reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from converter.plugins.names import DECODED_PLUGINS

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
