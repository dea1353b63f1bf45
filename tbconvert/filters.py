"""What a user selects: plugins and tag globs for conversion, one glob vocabulary, and the
share of a logdir's runs one of several converters takes (``--shard K/N``).

Globs are shell patterns matched with ``fnmatch.fnmatchcase`` (``*`` also crosses ``/``), for
``--run``, ``--tag``, ``--exclude-tag`` and ``--context`` alike, when converting and reading.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tbconvert.errors import UsageError
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


class ChosenRun(str):
    """One run chosen by id among ``--run`` globs, as a selection by expression passes the
    runs it chose to a command: it matches that run alone (:func:`run_matches`), where a run
    of another logdir may have the same path.  Its text is the path escaped as a glob, what
    it matches where only the text travels."""

    run_id: int
    run_path: str

    def __new__(cls, run_path: str, run_id: int) -> ChosenRun:
        made = super().__new__(cls, "".join(f"[{c}]" if c in "*?[" else c for c in run_path))
        made.run_id, made.run_path = run_id, run_path
        return made

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]
        return (self.run_path, self.run_id)


def run_matches(run_id: int, run_path: str, patterns: tuple[str, ...]) -> bool:
    """True when there are no patterns, or one is this run chosen by id, or a glob its path
    matches."""
    return not patterns or any(
        pattern.run_id == run_id
        if isinstance(pattern, ChosenRun)
        else fnmatchcase(run_path, pattern)
        for pattern in patterns
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


_SHARD_TEXT = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the runs whose path hashes to ``index`` (``--shard K/N``).

    The hash is the first 8 bytes of the SHA-256 of the run path (``.`` for the logdir's
    root), big-endian, modulo ``count``: the same on every machine and Python, whatever order
    the runs are listed in, and a run keeps its shard when others appear.  The range is
    checked where the options are built (``ConvertOptions``).
    """

    index: int
    count: int

    def owns(self, run_path: str) -> bool:
        """True when the run ``run_path`` falls to this shard."""
        return shard_of(run_path, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"`` as a shard (not yet range-checked).

        Raises:
            UsageError: the text is not two whole numbers around a slash.
        """
        found = _SHARD_TEXT.fullmatch(text)
        if found is None:
            raise UsageError(
                f"--shard is {text!r}",
                hint="give K/N, this converter's share K (0 to N-1) of N, e.g. --shard 0/4",
            )
        return cls(int(found.group(1)), int(found.group(2)))


def shard_of(run_path: str, count: int) -> int:
    """The shard (0 to ``count`` - 1) the run ``run_path`` falls to (see :class:`Shard`)."""
    digest = hashlib.sha256(run_path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count
