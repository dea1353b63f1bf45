"""Engine creation: store path or URL to a SQLAlchemy engine with the right connection set-up."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from tbconvert.errors import StoreError, install_hint

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# The store a command or API call uses when given none: ``$TBCONVERT_STORE``, else this file.
DEFAULT_STORE = "tbconvert.db"
STORE_ENV = "TBCONVERT_STORE"
# Alembic's version table under our name: what makes a database a tbconvert store.
VERSION_TABLE = "tbconvert_alembic_version"
BUSY_TIMEOUT_MS = 60_000
# SQLite's page cache per connection (its default is 2 MiB): a conversion inserts into the
# point tables' B-trees all over, and a cache that holds their hot pages takes 10-25% off the
# sweep and 1M-event benchmarks (docs/performance.md#the-passes-of-14).  Filled only as pages
# are read.
PAGE_CACHE_KIB = 32 << 10


def expand_path(path: str | os.PathLike[str]) -> str:
    """A path as a shell would give it: ``~`` and ``$VARIABLES`` expanded (design §2)."""
    return os.path.expanduser(os.path.expandvars(os.fspath(path)))


def default_store() -> str:
    """The store to use when none is given: ``$TBCONVERT_STORE``, else ``./tbconvert.db``."""
    return os.environ.get(STORE_ENV, DEFAULT_STORE)


def store_url(store: str | os.PathLike[str]) -> str:
    """Turn a ``--store`` value into a SQLAlchemy URL (a value with ``://`` already is one).

    ``~`` and ``$VARIABLES`` are expanded in paths and URLs alike (``sqlite:///~/runs.db``).
    """
    text = os.path.expandvars(os.fspath(store))
    if "://" in text:
        scheme, rest = text.split("://", 1)
        # Plain postgresql:// would pick psycopg2, which tbconvert does not install.
        if scheme in ("postgres", "postgresql"):
            return f"postgresql+psycopg://{rest}"
        if scheme.startswith("sqlite") and rest.startswith("/~"):
            return f"{scheme}:///{os.path.expanduser(rest[1:])}"
        return text
    return "sqlite:///" + os.path.abspath(os.path.expanduser(text))


def sqlite_path(url: str) -> str | None:
    """The database file of a SQLite URL, or None for other backends and in-memory stores."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("://", 1)[1]
    path = path[1:] if path.startswith("/") else path
    path = path.split("?", 1)[0]
    # sqlite:///file:/abs/path?mode=ro&uri=true names the same file through SQLite's URIs.
    path = path[len("file:") :] if path.startswith("file:") else path
    if path in ("", ":memory:"):
        return None
    return path


def store_display(url: str) -> str:
    """How to name a store in messages: its file, or its URL without the password."""
    from sqlalchemy.engine import make_url

    return sqlite_path(url) or make_url(url).render_as_string(hide_password=True)


def require_existing(url: str) -> None:
    """Refuse a SQLite store file that does not exist (reading never creates one).

    Raises:
        StoreError: no file at the URL's path.
    """
    path = sqlite_path(url)
    if path is not None and not os.path.exists(path):
        raise StoreError(
            "no store here",
            path=path,
            hint="convert a logdir first: tbconvert tf --logdir DIR --store PATH",
        )


def check_store_location(url: str) -> None:
    """Fail early, with the fix, when a SQLite store cannot be created where asked."""
    path = sqlite_path(url)
    if path is None:
        return
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise StoreError(
            "the store's directory does not exist",
            path=path,
            hint=f"create it first (mkdir -p {directory}) or choose another --store",
        )
    if os.path.exists(path) and os.path.isdir(path):
        raise StoreError("the store path is a directory", path=path, hint="give a file name")


def advisory_key(*parts: str) -> int:
    """A signed 64-bit PostgreSQL advisory lock key naming ``parts`` (stable across hosts)."""
    digest = hashlib.blake2b("\0".join(("tbconvert", *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def create_store_engine(url: str) -> Engine:
    """Create an engine; SQLite gets WAL, synchronous=NORMAL, foreign keys, a busy timeout.

    On SQLite the driver's own transaction handling is switched off and SQLAlchemy emits
    ``BEGIN`` itself, so DDL in migrations is transactional (pysqlite otherwise commits
    before DDL and a failed migration leaves half its changes behind).  A connection with the
    execution option ``sqlite_begin="IMMEDIATE"`` takes the write lock when it begins, so two
    writers queue on the busy timeout instead of failing to upgrade a read lock.
    """
    # SQLAlchemy is imported here, not at the top: the CLI reads this module's names at
    # start-up, before any command needs a database.
    from sqlalchemy import create_engine, event

    if not url.startswith("sqlite"):
        return _server_engine(url)
    url = _read_only_if_unwritable(url)
    engine = create_engine(
        url,
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )
    event.listen(engine, "connect", set_up_sqlite_connection)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _read_only_if_unwritable(url: str) -> str:
    """A store SQLite cannot write (read-only media, a read-only file or directory) is opened
    read-only, so that reading it never tries to write.  Writing through it fails with
    SQLite's "readonly database", named.

    A WAL store read-only still needs its ``-shm`` file, which a read-only directory cannot
    get: with no ``-wal`` file either, no connection has the store open (the last one to close
    removes both), and a writer would have to create them in that directory, so the file is
    read as ``immutable`` (SQLite then takes no locks and needs no ``-shm``).  With a ``-wal``
    there, it may hold commits the file lacks: read-only, which reads them when ``-shm`` is
    there too.  Not ``immutable`` whenever the directory is writable: another process may
    be writing the store while it is read (SPEC §9: a store on read-only media can be read).
    """
    path = sqlite_path(url)
    if path is None or not os.path.exists(path) or "immutable=" in url:
        return url
    if "mode=" in url and "mode=ro" not in url:
        return url
    directory_writable = os.access(os.path.dirname(path) or ".", os.W_OK)
    if "mode=ro" not in url and directory_writable and os.access(path, os.W_OK):
        return url
    if not directory_writable and not os.path.exists(path + "-wal"):
        return f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true"
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def _server_engine(url: str) -> Engine:
    from sqlalchemy import create_engine

    if not url.startswith("postgresql"):
        # SQLAlchemy would open MySQL and others (given their driver), but the bulk writers,
        # migrations and views exist for SQLite and PostgreSQL only.
        backend = url.split(":", 1)[0].split("+")[0]
        raise StoreError(
            f"tbconvert stores runs in SQLite or PostgreSQL, not {backend}",
            path=store_display(url),
            hint="give a file path, sqlite:///PATH or postgresql://user@host/db as --store",
        )
    try:
        # The application name shows in pg_stat_activity: an admin can tell converters apart.
        return create_engine(
            url, pool_pre_ping=True, connect_args={"application_name": "tbconvert"}
        )
    except ModuleNotFoundError as error:
        # The postgres extra brings psycopg 3; a URL may name another driver (psycopg2).
        hint = install_hint("postgres")
        if error.name != "psycopg":
            hint = "tbconvert uses psycopg 3: write the URL as postgresql://user@host/db"
        raise StoreError(
            f"the PostgreSQL driver is not installed ({error.name})",
            path=store_display(url),
            hint=hint,
        ) from None


def set_up_sqlite_connection(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    """What every SQLite connection of an engine runs first (SQLAlchemy's ``connect`` event):
    driver transactions off, the busy timeout, foreign keys, WAL, the page cache."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        # WAL is a property of the file: switch only a store of ours, or an empty file about
        # to become one.  A database that is not ours is refused unchanged (design §9).
        if _is_ours_or_empty(cursor):
            # A read-only store cannot switch journal mode; reading it still works.
            with contextlib.suppress(sqlite3.OperationalError):
                cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    finally:
        cursor.close()


def _is_ours_or_empty(cursor: sqlite3.Cursor) -> bool:
    try:
        names = {row[0] for row in cursor.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError:
        return False  # not a database at all: left for the caller to report
    return not names or VERSION_TABLE in names


def _on_sqlite_begin(connection: Connection) -> None:
    mode = connection.get_execution_options().get("sqlite_begin", "")
    connection.exec_driver_sql(f"BEGIN {mode}".strip())
