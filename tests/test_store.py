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
    "v_images": ["run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "format",
                 "width", "height", "data"],
    "v_histograms": ["run_id", "run_path", "context", "tag", "step", "wall_time", "count", "min",
                     "max", "buckets"],
    "v_texts": ["run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "value"],
    "v_params": ["run_id", "run_path", "context", "key", "value", "value_num", "value_type"],
    "v_audio": ["run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "sample_rate",
                "data"],
    "v_tensors": ["run_id", "run_path", "context", "tag", "plugin", "step", "wall_time", "dtype",
                  "shape", "data"],
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


def test_store_from_revision_0001_upgrades_with_data_kept(tmp_path: Path) -> None:
    """A store made by the foundation (0001) gains the plugin tables with its points intact."""
    from alembic import command

    path = tmp_path / "old.db"
    engine = create_store_engine(store_url(path))
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0001")
        conn.exec_driver_sql("INSERT INTO runs (id, logdir, run_path, group_path, name) "
                             "VALUES (1, '/logs', 'run_a', '', 'run_a')")
        conn.exec_driver_sql("INSERT INTO contexts (id, name) VALUES (1, '')")
        conn.exec_driver_sql("INSERT INTO series (id, run_id, context_id, name, plugin) "
                             "VALUES (1, 1, 1, 'loss', 'scalars')")
        conn.exec_driver_sql(
            "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
            "offset_consumed, records, damaged_records, status, first_wall_time, "
            "last_wall_time) VALUES (1, 1, 1, 'run_a/events', 100, 1, 100, 3, 0, 'ok', "
            "1000.0, 1002.0)")
        for step in range(3):
            conn.exec_driver_sql(
                "INSERT INTO scalars VALUES (1, ?, 1, ?, 0, ?, ?)",
                (step, 10 * step, 1000.0 + step, 0.5 * step))
    change = migrate.ensure_schema(engine)
    assert change is not None and change.from_revision == "0001"
    assert change.backup is not None and Path(change.backup).exists()
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT run_path, tag, step, value FROM v_scalars ORDER BY step").all()
        assert [tuple(row) for row in rows] == [
            ("run_a", "loss", 0, 0.0), ("run_a", "loss", 1, 0.5), ("run_a", "loss", 2, 1.0)]
        assert conn.exec_driver_sql("SELECT count(*) FROM v_images").scalar() == 0
    engine.dispose()
    backup = sqlite3.connect(change.backup)
    assert backup.execute(f"SELECT version_num FROM {migrate.VERSION_TABLE}").fetchone() == (
        "0001",)
    backup.close()
