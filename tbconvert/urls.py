"""URLs as they are shown and stored: never with the credentials a user may have put in them."""

from __future__ import annotations

__all__ = ["redacted"]


def redacted(url: str) -> str:
    """The URL without a ``user:password@`` part (``s3://key:secret@bucket/logs`` ->
    ``s3://bucket/logs``); anything without ``://`` is returned as it is."""
    protocol, sep, rest = url.partition("://")
    if not sep:
        return url
    host, slash, tail = rest.partition("/")
    return f"{protocol}{sep}{host.rpartition('@')[2]}{slash}{tail}"
