"""Programmatic Alembic: bring a store to the code's schema, or refuse with the reason.

Policy (design §6): an empty store gets every migration; a store behind
the code is upgraded (SQLite: after an online backup next to the file; a shared server only
when the caller allows it); a store ahead of the code, or a database that is not a tbconvert
store, is refused.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing, suppress
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from tbconvert.errors import StoreError, StoreVersionError
from tbconvert.store.engine import (
    VERSION_TABLE,
    advisory_key,
    create_store_engine,
    sqlite_path,
    store_display,
)

if TYPE_CHECKING:
    from alembic.config import Config

# The newest migration's revision: a store already there is used without importing Alembic
# (a fifth of a converter's start-up).  A test checks it against the scripts.
HEAD_REVISION = "0018"
# What the migrations leave in an empty SQLite database, written by tools/schema_snapshot.py.
SNAPSHOT = Path(__file__).with_name("sqlite_schema.sql")
SNAPSHOT_REVISION_LINE = "-- revision "
# Objects the migrations manage with raw SQL, which autogenerate must not try to drop.
_UNMANAGED_PREFIXES = ("v_", "sqlite_")


def include_name(name: str | None, type_: str, _parent_names: Any) -> bool:
    """Alembic filter: leave views and SQLite internals out of drift comparison."""
    return not (type_ == "table" and name is not None and name.startswith(_UNMANAGED_PREFIXES))


def migrations_dir() -> str:
    """The migration scripts: inside the installed wheel, or the source checkout's folder."""
    packaged = resources.files("tbconvert") / "_migrations"
    if packaged.is_dir():
        return str(packaged)
    return str(Path(__file__).resolve().parents[2] / "migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic Config built in code (no ini file), optionally bound to a connection."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", migrations_dir())
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The single head of the migration scripts."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise StoreError(f"migration scripts have {len(heads)} heads", hint="a packaging bug")
    return heads[0]


def current_revision(connection: Connection) -> str | None:
    """The store's revision, or None for a store without our version table."""
    if not connection.dialect.has_table(connection, VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
    if len(rows) > 1:
        raise StoreError(
            f"the store has {len(rows)} schema revisions at once",
            hint="restore its backup or convert into a new --store",
        )
    return rows[0][0] if rows else None


@dataclass(frozen=True)
class SchemaChange:
    """What :func:`ensure_schema` did: from which revision to which, and the backup made."""

    from_revision: str | None
    to_revision: str
    backup: str | None = None


def ensure_schema(engine: Engine, *, allow_upgrade: bool | None = None) -> SchemaChange | None:
    """Create or upgrade the store's schema; return what changed (None when current).

    ``allow_upgrade`` None upgrades a SQLite file (after a backup) but not a shared server,
    where other converters may be running older code against it.

    Raises:
        StoreVersionError: the store was written by a newer converter.
        StoreError: the database is not a tbconvert store, or needs an upgrade not allowed.
    """
    head = HEAD_REVISION
    with engine.connect() as probe:
        if current_revision(probe) == head:
            return None
    sqlite_file = sqlite_path(str(engine.url))
    if allow_upgrade is None:
        allow_upgrade = sqlite_file is not None
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn:
        _foreign_keys(conn, on=False)
        try:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    # Converters starting together on a server take turns here.
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": advisory_key("schema")}
                    )
                # Re-read under the write lock: another converter may have just migrated.
                current = current_revision(conn)
                if current == head:
                    return None
                refuse_foreign(conn, current, head)
                backup = None
                if current is not None:
                    if not allow_upgrade:
                        raise StoreError(
                            f"the store is at schema revision {current}, this converter needs "
                            f"{head}",
                            path=_display(engine),
                            hint="upgrade it explicitly once, when no older converter is "
                            "writing: tbconvert db upgrade --store URL (or tf "
                            "--upgrade-store)",
                        )
                    if sqlite_file is not None:
                        backup = _backup_sqlite(sqlite_file, current)
                migrate_schema(conn, current, head)
                _check_foreign_keys(conn)
        finally:
            _foreign_keys(conn, on=True)
    return SchemaChange(current, head, backup)


def migrate_schema(conn: Connection, current: str | None, head: str) -> None:
    """Bring ``conn``'s database from ``current`` to ``head``: an empty SQLite database by
    replaying the migrations' own result (no Alembic import), else by Alembic
    (a database left with an empty version table by a downgrade too)."""
    empty = current is None and not conn.dialect.has_table(conn, VERSION_TABLE)
    script = snapshot_statements(head) if empty and conn.dialect.name == "sqlite" else None
    if script is not None:
        for statement in script:
            conn.exec_driver_sql(statement)
        return
    from alembic import command

    command.upgrade(alembic_config(conn), "head")


def snapshot_statements(revision: str) -> tuple[str, ...] | None:
    """The statements of the schema snapshot when it is of ``revision``, else None.

    Importing Alembic and running every migration costs a fresh store about 0.3 CPU-s, a
    third of a converter's start-up, paid again by every sweep or job converting into a new
    file; replaying the migrations' own result costs milliseconds.  The snapshot
    is only ever made by running the migrations (``python tools/schema_snapshot.py``
    after adding one; a test fails until then), and one of another revision is not used.
    """
    found, script = _snapshot()
    return script if found == revision and script else None


@cache
def _snapshot() -> tuple[str | None, tuple[str, ...]]:
    try:
        text = SNAPSHOT.read_text(encoding="utf-8")
    except OSError:
        return None, ()
    revision = None
    found: list[str] = []
    pending = ""
    for line in text.splitlines(keepends=True):
        if not pending and line.startswith(SNAPSHOT_REVISION_LINE):
            revision = line[len(SNAPSHOT_REVISION_LINE) :].strip()
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    return revision, tuple(found)


def check(engine: Engine) -> None:
    """Raise alembic's AutogenerateDiffsDetected when the models and migrations differ."""
    from alembic import command

    from tbconvert.store.models import Base

    with engine.begin() as conn:
        config = alembic_config(conn)
        config.attributes["target_metadata"] = Base.metadata
        command.check(config)


def upgrade(engine: Engine) -> SchemaChange | None:
    """Explicit upgrade (``tbconvert db upgrade``): allowed on every backend."""
    return ensure_schema(engine, allow_upgrade=True)


def refuse_foreign(conn: Connection, current: str | None, head: str = HEAD_REVISION) -> None:
    """Raise unless the database is a tbconvert store of a known revision (``current``) or
    empty: a database that is not ours, or one written by a newer converter, is refused.

    Raises:
        StoreError: the database has tables but no tbconvert version table.
        StoreVersionError: the revision is unknown to this converter.
    """
    if current is None:
        tables = [
            t
            for t in inspect(conn).get_table_names()
            if not t.startswith("sqlite_") and t != VERSION_TABLE
        ]
        if tables:
            raise StoreError(
                f"this database is not a tbconvert store (it has tables but no {VERSION_TABLE})",
                path=_display(conn.engine),
                hint="choose a new --store path",
            )
        return
    from alembic.script import ScriptDirectory

    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current not in known:
        raise StoreVersionError(
            f"the store was written by a newer tbconvert (schema revision {current}, this "
            f"version knows up to {head})",
            path=_display(conn.engine),
            hint="update the tbconvert checkout (git pull) and install it again: pip install .",
        )


def _foreign_keys(conn: Connection, *, on: bool) -> None:
    # Batch rebuilds of parent tables would cascade or fail with enforcement on, and the
    # pragma is ignored inside a transaction: set it on the raw connection, outside one.
    if conn.dialect.name == "sqlite":
        conn.connection.dbapi_connection.execute(  # type: ignore[union-attr]
            f"PRAGMA foreign_keys = {'ON' if on else 'OFF'}"
        )


def _check_foreign_keys(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        return
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise StoreError(f"migration left {len(broken)} rows with broken foreign keys")


def _backup_sqlite(path: str, revision: str) -> str:
    target = f"{path}.bak-{revision}-{time.strftime('%Y%m%d%H%M%S')}"
    source = sqlite3.connect(path)
    try:
        dest = sqlite3.connect(target)
        try:
            source.backup(dest)
        finally:
            dest.close()
    finally:
        source.close()
    return target


def _display(engine: Engine) -> str:
    return store_display(engine.url.render_as_string(hide_password=False))


def create_sqlite_store(path: str) -> None:
    """Create a missing SQLite store with its whole schema, atomically (design §6): built
    under a temporary name beside it and linked into place, so no SQL client ever sees the
    file without its views, and a conversion killed meanwhile leaves no store.  A store that
    appeared meanwhile (another converter's) is kept as it is."""
    _remove_abandoned(path)
    building = f"{path}.creating-{os.getpid()}"
    try:
        engine = create_store_engine(f"sqlite:///{building}")
        try:
            ensure_schema(engine)
        finally:
            engine.dispose()
        # Everything in the main file: the log is left behind with the temporary name.
        with closing(sqlite3.connect(building)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            os.link(building, path)  # never replaces a store that appeared meanwhile
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not os.path.exists(path):
                os.rename(building, path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(FileNotFoundError):
                os.remove(building + suffix)


def _remove_abandoned(path: str) -> None:
    """Remove what creations of this store killed before they finished left behind."""
    directory, name = os.path.split(os.path.abspath(path))
    prefix = f"{name}.creating-"
    for entry in os.listdir(directory):
        pid = entry[len(prefix) :].split("-", 1)[0] if entry.startswith(prefix) else ""
        if pid.isdigit() and not _alive(int(pid)):
            with suppress(OSError):
                os.remove(os.path.join(directory, entry))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True
