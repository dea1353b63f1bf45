"""Schema ownership: Alembic creates and checks the store; foreign and newer stores are refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from converter.errors import StoreError, StoreVersionError
from converter.store import migrate
from converter.store.engine import create_store_engine, store_url

SPEC_VIEW_COLUMNS = {
    "v_runs": ["run_id", "logdir", "run_path", "group_path", "name", "first_wall_time",
               "last_wall_time"],
    "v_scalars": ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"],
    "v_last_scalars": ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"],
}


@pytest.fixture
def engine(tmp_path: Path):
    engine = create_store_engine(store_url(tmp_path / "store.db"))
    yield engine
    engine.dispose()


def test_empty_store_gets_every_migration_and_no_drift(engine) -> None:
    change = migrate.ensure_schema(engine)
    assert change is not None and change.from_revision is None
    assert change.to_revision == migrate.head_revision()
    assert migrate.ensure_schema(engine) is None
    migrate.check(engine)


def test_single_head() -> None:
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert len(heads) == 1


def test_views_have_exactly_the_spec_columns(engine) -> None:
    migrate.ensure_schema(engine)
    with engine.connect() as conn:
        for view, columns in SPEC_VIEW_COLUMNS.items():
            found = [row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({view})")]
            assert found == columns, view


def test_sqlite_pragmas_and_physical_layout(engine, tmp_path: Path) -> None:
    migrate.ensure_schema(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    # Drift checks cannot see WITHOUT ROWID; check the DDL itself.
    raw = sqlite3.connect(tmp_path / "store.db")
    ddl = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'scalars'").fetchone()[0]
    raw.close()
    assert "WITHOUT ROWID" in ddl.upper()


def test_upgrade_downgrade_roundtrip(engine) -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "head")
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "base")
    with engine.connect() as conn:
        left = conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            f"AND name NOT LIKE 'sqlite_%' AND name <> '{migrate.VERSION_TABLE}'"
        )
        assert [row[0] for row in left] == []
    assert migrate.ensure_schema(engine) is not None
    migrate.check(engine)


def test_store_written_by_newer_version_is_refused(engine) -> None:
    migrate.ensure_schema(engine)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(StoreVersionError, match="newer tbconvert"):
        migrate.ensure_schema(engine)


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE notes (body TEXT)")
    raw.execute("INSERT INTO notes VALUES ('mine')")
    raw.commit()
    raw.close()
    engine = create_store_engine(store_url(path))
    with pytest.raises(StoreError, match="not a tbconvert store"):
        migrate.ensure_schema(engine)
    engine.dispose()
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
    raw.close()


def test_failed_migration_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    """DDL is transactional: a migration that fails midway leaves an empty store."""
    from alembic import op

    engine = create_store_engine(store_url(tmp_path / "store.db"))
    real_execute = op.execute

    def failing_execute(sql, *args, **kwargs):
        if "v_last_scalars" in str(sql):
            raise RuntimeError("boom")
        return real_execute(sql, *args, **kwargs)

    monkeypatch.setattr(op, "execute", failing_execute)
    with pytest.raises(RuntimeError, match="boom"):
        migrate.ensure_schema(engine)
    with engine.connect() as conn:
        names = [row[0] for row in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")]
    engine.dispose()
    assert names == []
