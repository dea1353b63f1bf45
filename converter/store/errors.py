"""Database errors to one-line store errors that say what happened and what to do."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

from converter.errors import StoreError

# Substrings of driver messages -> (what happened, the fix).
_KNOWN = (
    ("file is not a database", "this file is not a SQLite database",
     "choose a new --store path; tbconvert never overwrites other files"),
    ("readonly database", "the store is read-only",
     "make the file and its directory writable, or choose another --store"),
    ("unable to open database file", "the store cannot be opened",
     "check that the directory exists and is writable"),
    ("database or disk is full", "the disk is full",
     "free some space and run again: the store is consistent and the next run resumes"),
    ("database is locked", "another process holds the store's write lock for too long",
     "wait for the other converter to finish, or stop it"),
    ("disk I/O error", "the disk failed while writing the store",
     "check the disk; the next run resumes from the last commit"),
)


def describe(error: Exception) -> tuple[str, str | None]:
    """The one-line reason and fix for a database error (wrapped by SQLAlchemy or raw)."""
    original = getattr(error, "orig", None)
    text = str(original) if original is not None else str(error)
    for needle, message, hint in _KNOWN:
        if needle in text:
            return message, hint
    return f"database error: {text.splitlines()[0] if text else type(error).__name__}", None


@contextmanager
def translate_errors(store: str) -> Iterator[None]:
    """Re-raise driver errors as :class:`StoreError` naming the store."""
    try:
        yield
    except (DBAPIError, sqlite3.Error) as error:
        # Bulk inserts go through the driver's cursor, so raw driver errors arrive here too.
        message, hint = describe(error)
        raise StoreError(message, path=store, hint=hint) from error
