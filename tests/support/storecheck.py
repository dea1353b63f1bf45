"""After a test: no store it made holds a row whose reference points nowhere.

The converter's SQLite connection does not enforce foreign keys (for speed), and conversions
run in-process, in ``--jobs`` workers, and in subprocesses (the CLI, kill -9 tests) alike.  So
the stores themselves are checked once the test is over, whoever wrote them: every SQLite
file under the directories the test made, and every server database it created, get
``PRAGMA foreign_key_check`` (SQLite) and the queries of
:func:`tests.support.snapshots.dangling_rows`
(both backends).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

from tests.support.snapshots import POINT_TABLES, connect, dangling_rows, rows

SQLITE_MAGIC = b"SQLite format 3\x00"
# The tables dangling_rows() reads; a store at an old revision (migration tests) or a
# database that is not a store gets the foreign-key check only.
_STORE_TABLES = {
    "runs",
    "contexts",
    "series",
    "event_files",
    "blobs",
    "series_summaries",
    *POINT_TABLES,
}
# Files that are never databases (and logdirs can hold many of them).
_NOT_DATABASES = ("-wal", "-shm", "-journal")


def sqlite_files(directories: Iterable[Path]) -> list[Path]:
    """The SQLite databases (found by their header) under ``directories``."""
    found = []
    for directory in directories:
        for path in sorted(directory.rglob("*")):
            if (
                "tfevents" in path.name
                or path.name.endswith(_NOT_DATABASES)
                or path.is_symlink()
                or not path.is_file()
            ):
                continue
            try:
                with path.open("rb") as handle:
                    header = handle.read(len(SQLITE_MAGIC))
            except OSError:
                continue
            if header == SQLITE_MAGIC:
                found.append(path)
    return found


def sqlite_problems(path: Path) -> list[str]:
    """What points nowhere in one SQLite file (a plain connection: a store left by a killed
    converter has its WAL replayed first, as the next converter would)."""
    try:
        connection = sqlite3.connect(path, timeout=20)
    except sqlite3.DatabaseError:
        return []
    with closing(connection):
        try:
            keys = [tuple(row) for row in connection.execute("PRAGMA foreign_key_check")]
        except sqlite3.DatabaseError as error:
            if "not a database" in str(error) or "malformed" in str(error):
                return []  # a test's deliberately damaged file: nothing to check in it
            raise
        problems = [f"{path}: foreign key of {row[0]} rowid {row[1]} -> {row[2]}" for row in keys]
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if tables >= _STORE_TABLES:
            problems += [f"{path}: {count} {what}" for what, count in dangling_rows(connection)]
        return problems


def server_problems(url: str) -> list[str]:
    """What points nowhere in one server database (the converter checks its points' keys
    per chunk, ``writing.pg_foreign_keys``, and the (run, context) of a point's file and
    series are not keys)."""
    import psycopg

    try:
        connection = connect(url)
    except psycopg.OperationalError as error:
        if "does not exist" in str(error):
            return []  # dropped by the test itself
        raise
    with closing(connection):
        tables = {
            row[0]
            for row in rows(
                connection,
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
            )
        }
        if not tables >= _STORE_TABLES:
            return []
        return [f"{url}: {count} {what}" for what, count in dangling_rows(connection)]


def dangling_in(directories: Iterable[Path], databases: Iterable[str] = ()) -> list[str]:
    """Every dangling row in the SQLite stores under ``directories`` and in ``databases``."""
    problems = []
    for path in sqlite_files(directories):
        problems += sqlite_problems(path)
    for url in databases:
        problems += server_problems(url)
    return problems
