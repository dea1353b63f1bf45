"""Names in W&B: one rule from a store's (context, tag) to a W&B key, ``CONTEXT/TAG``.

W&B takes any text as a key but reads a ``.`` in one as a step into a nested value (a
``define_metric`` name with a ``.`` is split there), and groups a run's charts by a key's
first ``/``.  So the key of a series is its context, ``/`` and its tag, the context in the
first segment alone (docs/cli.md, "Pushing to W&B"):

- ``%``, ``@`` and ``.`` become ``%25``, ``%40`` and ``%2E`` in both names; in the context,
  ``/`` becomes ``%2F`` too, and a leading ``_`` (W&B's own keys start with one) ``%5F``.
- The run directory's own context (``''``) is written ``run``; a context named ``run`` is
  ``%72un``.  So ``("", "loss")`` is ``run/loss`` and ``("train", "Loss/x")`` is
  ``train/Loss/x``.
- The step of a series (:func:`step_key`) is its key and ``@step``: no series key holds an
  ``@``, so no step key is a series key.

Every key holds a ``/``; the first one ends the context, and ``%`` escapes invert, so the
rule is injective (``decode_key`` inverts it; tests check both).  A run's params go into its
config under their own names, each the value every hparams session (context) of the run
agrees on, or else a dict of the sessions' values by context, written as in a key
(:func:`config_keys`).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

STEP_SUFFIX = "@step"
_ROOT = "run"


def _escape(name: str, *, context: bool) -> str:
    out = name.replace("%", "%25").replace("@", "%40").replace(".", "%2E")
    if context:
        out = out.replace("/", "%2F")
        if out.startswith("_"):
            out = "%5F" + out[1:]
        if out == _ROOT:
            out = "%72" + out[1:]
    return out


def wandb_key(context: str, tag: str) -> str:
    """The W&B key of a series: see the module's rule."""
    return f"{context_name(context)}/{_escape(tag, context=False)}"


def step_key(key: str) -> str:
    """The key of the step of the series ``key``, its own x axis in W&B."""
    return key + STEP_SUFFIX


def decode_key(key: str) -> tuple[str, str] | None:
    """The (context, tag) whose key is ``key``; None for text the rule never makes."""
    head, slash, tail = key.partition("/")
    if not slash:
        return None
    context = "" if head == _ROOT else urllib.parse.unquote(head)
    found = (context, urllib.parse.unquote(tail))
    return found if wandb_key(*found) == key else None


def context_name(context: str) -> str:
    """A context as the first segment of a key: ``run`` for the run directory's own."""
    return _ROOT if context == "" else _escape(context, context=True)


def config_keys(sessions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A run's params as its W&B config: each name's value where the run's sessions
    (contexts) agree on it, else a dict of their values by :func:`context_name`."""
    by_name: dict[str, dict[str, Any]] = {}
    for context, session in sorted(sessions.items()):
        for name, value in session.items():
            by_name.setdefault(name, {})[context_name(context)] = value
    found: dict[str, Any] = {}
    for name, values in by_name.items():
        distinct = {repr(value) for value in values.values()}
        found[name] = next(iter(values.values())) if len(distinct) == 1 else values
    return found
