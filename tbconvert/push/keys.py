"""Names in the tracker: one rule from a store's (context, tag) to an MLflow key.

MLflow keys (metrics, params) may hold only ASCII letters, digits and ``_ - . /`` and spaces
(MLflow also takes ``:`` and non-ASCII letters off Windows; the rule keeps to what every
platform takes), at most 250 characters, and must read as a normalised relative path (no
empty, ``.`` or ``..`` segment, no leading or trailing ``/``).  A store's contexts and tags
are any text, so the rule escapes, and it is injective: two different (context, tag) pairs
never get one key (``decode_key`` inverts it; tests check both).

The rule (docs/cli.md, "Pushing to MLflow"):

- A name keeps ``A-Z a-z 0-9 _ - .`` and ``/`` as they are, except a ``/`` at either end or
  next to another ``/``, and a ``.`` that starts the name or follows a ``/``.
- Every other character (spaces included) becomes a space, its Unicode code point in
  lowercase hexadecimal, and a space: ``"lr=0.1"`` is ``"lr 3d 0.1"``.
- An empty name is one space.
- The key of a series in the run directory itself (context ``''``) is its tag's name; in a
  context, the context's name, ``" / "``, and the tag's name: ``"train / loss"``.
- A key that would be over 250 characters is its first 217, a space, and 32 hexadecimal
  digits of the SHA-256 of the pair (only a SHA-256 collision could make two of them equal).

Spaces appear only in escapes, in the separator and for an empty name, which is what keeps
the rule invertible.
"""

from __future__ import annotations

import hashlib
import string

MAX_KEY_LENGTH = 250
SEPARATOR = " / "
_KEPT = frozenset(string.ascii_letters + string.digits + "_-./")
_HEX = frozenset("0123456789abcdef")
_DIGEST_DIGITS = 32


def encode_name(name: str) -> str:
    """One context or tag name in key characters (the module's rule)."""
    if not name:
        return " "
    out: list[str] = []
    last = len(name) - 1
    for index, char in enumerate(name):
        previous = name[index - 1] if index else ""
        if char == "/":
            kept = 0 < index < last and previous != "/" and name[index + 1] != "/"
        elif char == ".":
            kept = index > 0 and previous != "/"
        else:
            kept = char in _KEPT
        out.append(char if kept else f" {ord(char):x} ")
    return "".join(out)


def metric_key(context: str, tag: str) -> str:
    """The MLflow key of a series (or param): see the module's rule."""
    key = encode_name(tag) if context == "" else encode_name(context) + SEPARATOR + encode_name(tag)
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(f"{context}\0{tag}".encode()).hexdigest()[:_DIGEST_DIGITS]
    return f"{key[: MAX_KEY_LENGTH - _DIGEST_DIGITS - 1]} {digest}"


def decode_key(key: str) -> tuple[str, str] | None:
    """The (context, tag) whose key is ``key``; None for a shortened key (one over 250
    characters before) or text the rule never makes."""
    names: list[list[str]] = [[]]
    index = 0
    while index < len(key):
        char = key[index]
        if char != " ":
            names[-1].append(char)
            index += 1
        elif key.startswith(SEPARATOR, index) and len(names) == 1:
            names.append([])
            index += len(SEPARATOR)
        elif index == len(key) - 1:
            index += 1  # an empty name
        else:
            end = key.find(" ", index + 1)
            digits = key[index + 1 : end]
            if end == -1 or not digits or not set(digits) <= _HEX or int(digits, 16) > 0x10FFFF:
                return None
            names[-1].append(chr(int(digits, 16)))
            index = end + 1
    found = ("", "".join(names[0])) if len(names) == 1 else tuple("".join(n) for n in names)
    context, tag = found
    # Whatever the rule would not have written (a name left empty, a character it escapes).
    return (context, tag) if metric_key(context, tag) == key else None


def param_keys(sessions: dict[str, dict[str, str | None]]) -> dict[str, str | None]:
    """A run's params under MLflow keys: a key whose hparams sessions (contexts) all agree
    on its value is the key's name alone (:func:`encode_name`); one they disagree on is one
    param per session, named as a series of that context would be (:func:`metric_key`)."""
    values: dict[str, set[str | None]] = {}
    for session in sessions.values():
        for key, value in session.items():
            values.setdefault(key, set()).add(value)
    found: dict[str, str | None] = {}
    for context, session in sorted(sessions.items()):
        for key, value in session.items():
            if len(values[key]) == 1:
                found[metric_key("", key)] = value
            else:
                found[metric_key(context, key)] = value
    return found
