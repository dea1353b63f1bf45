"""A fresh SQLite store replays the migrations' snapshot (``migrate.snapshot_statements``):
it must be the migrations' head, and give exactly the schema Alembic gives."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError

from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tools import schema_snapshot as snapshot


def _schema(path: Path) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, ...]]]:
    raw = sqlite3.connect(path)
    try:
        objects = raw.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        version = raw.execute(f"SELECT * FROM {migrate.VERSION_TABLE}").fetchall()
    finally:
        raw.close()
    return objects, version


def test_snapshot_is_of_the_migrations_head() -> None:
    # After a new migration: python tools/schema_snapshot.py
    assert snapshot.dump(migrate.head_revision()) == migrate.SNAPSHOT.read_text(encoding="utf-8")
    assert migrate.snapshot_statements(migrate.HEAD_REVISION)


def test_fresh_store_from_snapshot_equals_alembic(tmp_path: Path) -> None:
    from alembic import command

    engine = create_store_engine(store_url(tmp_path / "snapshot.db"))
    change = migrate.ensure_schema(engine)
    engine.dispose()
    assert change is not None and change.from_revision is None
    plain = create_engine(f"sqlite:///{tmp_path / 'alembic.db'}")
    with plain.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "head")
    plain.dispose()
    assert _schema(tmp_path / "snapshot.db") == _schema(tmp_path / "alembic.db")


def test_fresh_store_starts_without_alembic(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from tbconvert.store.engine import create_store_engine\n"
        "from tbconvert.store.migrate import ensure_schema\n"
        f"assert ensure_schema(create_store_engine({store_url(tmp_path / 's.db')!r}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "[]"


def test_failed_snapshot_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    script = migrate.snapshot_statements(migrate.HEAD_REVISION)
    assert script is not None
    broken = (*script[:-1], "CREATE VIEW v_broken AS SELECT * FRM nothing", script[-1])
    monkeypatch.setattr(migrate, "snapshot_statements", lambda _revision: broken)
    path = tmp_path / "s.db"
    engine = create_store_engine(store_url(path))
    with pytest.raises(OperationalError):
        migrate.ensure_schema(engine)
    engine.dispose()
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("SELECT name FROM sqlite_master").fetchall() == []
    finally:
        raw.close()


def test_snapshot_of_another_revision_is_not_used() -> None:
    assert migrate.snapshot_statements("0000") is None
