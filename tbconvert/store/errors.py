"""Database errors to one-line store errors that say what happened and what to do."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

from tbconvert.errors import StoreError

# Patterns (regular expressions) in driver messages -> (what happened, the fix).
_KNOWN = (
    (
        "file is not a database",
        "this file is not a SQLite database",
        "choose a new --store path; tbconvert never overwrites other files",
    ),
    (
        "readonly database",
        "the store is read-only",
        "make the file and its directory writable, or choose another --store",
    ),
    (
        "unable to open database file",
        "the store cannot be opened",
        "check that the directory exists and is writable",
    ),
    (
        "database or disk is full",
        "the disk is full",
        "free some space and run again: the store is consistent and the next run resumes",
    ),
    (
        "database is locked",
        "another process holds the store's write lock for too long",
        "wait for the other converter to finish, or stop it",
    ),
    (
        "disk I/O error",
        "the disk failed while writing the store",
        "check the disk; the next run resumes from the last commit",
    ),
    # PostgreSQL (psycopg)
    (
        "Connection refused",
        "cannot connect to the PostgreSQL server",
        "check the host and port in --store, and that the server is running",
    ),
    (
        "could not translate host name",
        "the PostgreSQL server's host name is unknown",
        "check the host in --store",
    ),
    (
        "password authentication failed",
        "the PostgreSQL server refused the user or password",
        "check the user and password in --store (or ~/.pgpass)",
    ),
    (
        "no password supplied",
        "the PostgreSQL server wants a password",
        "put it in ~/.pgpass or PGPASSWORD rather than in the URL",
    ),
    (
        "permission denied",
        "the PostgreSQL user lacks a privilege on the store",
        "ask the database owner to grant it CREATE and write access",
    ),
    (
        "No space left on device",
        "the server's disk is full",
        "free some space and run again: the store is consistent and the next run resumes",
    ),
    (
        "the connection is lost|terminating connection|server closed the connection"
        "|consuming input failed|connection is closed",
        "the connection to the PostgreSQL server was lost (it restarted, or ended the session)",
        "run the same command again once the server is up: every chunk committed before is "
        "kept, and the next run goes on from there",
    ),
    (
        'database ".*" does not exist',
        "the PostgreSQL database does not exist",
        "create it first: createdb NAME (tbconvert creates the tables)",
    ),
)


def describe(error: Exception) -> tuple[str, str | None]:
    """The one-line reason and fix for a database error (wrapped by SQLAlchemy or raw)."""
    original = getattr(error, "orig", None)
    text = str(original) if original is not None else str(error)
    for pattern, message, hint in _KNOWN:
        if re.search(pattern, text):
            return message, hint
    return f"database error: {text.splitlines()[0] if text else type(error).__name__}", None


@contextmanager
def translate_errors(store: str) -> Iterator[None]:
    """Re-raise driver errors as :class:`StoreError` naming the store."""
    try:
        yield
    except Exception as error:
        # Bulk inserts go through the driver's cursor, so raw driver errors arrive here too.
        if not _is_database_error(error):
            raise
        message, hint = describe(error)
        if message == "the disk is full" and "://" not in store:
            message = f"no space left on {_mount_of(store)}"
        kept = getattr(error, "points_kept", None)  # set by a conversion under way
        if kept is not None:
            message += f": {kept:,} points of this run kept"
        raise StoreError(message, path=store, hint=hint) from error


def _mount_of(path: str) -> str:
    """The mount point the file system of ``path`` is mounted on (the device a user frees)."""
    current = os.path.dirname(os.path.abspath(path))
    while not os.path.ismount(current):
        current = os.path.dirname(current)
    return current


def _is_database_error(error: Exception) -> bool:
    if isinstance(error, (DBAPIError, sqlite3.Error)):
        return True
    # psycopg is an optional extra: recognise its errors without importing it.
    return any(
        cls.__module__.startswith("psycopg") and cls.__name__ == "Error"
        for cls in type(error).__mro__
    )
