"""Schema ownership: Alembic creates and checks the store; foreign and newer stores are refused."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from tbconvert.errors import StoreError, StoreVersionError
from tbconvert.rows import FileRows
from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tests.support.snapshots import StoreFactory

SPEC_VIEW_COLUMNS = {
    "v_runs": [
        "run_id",
        "logdir",
        "run_path",
        "group_path",
        "name",
        "first_wall_time",
        "last_wall_time",
    ],
    "v_scalars": ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"],
    "v_last_scalars": ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"],
    "v_scalars_current": ["run_id", "run_path", "context", "tag", "step", "wall_time", "value"],
    "v_images": [
        "run_id",
        "run_path",
        "context",
        "tag",
        "step",
        "wall_time",
        "idx",
        "format",
        "width",
        "height",
        "data",
    ],
    "v_histograms": [
        "run_id",
        "run_path",
        "context",
        "tag",
        "step",
        "wall_time",
        "count",
        "min",
        "max",
        "buckets",
    ],
    "v_texts": ["run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "value"],
    "v_params": ["run_id", "run_path", "context", "key", "value", "value_num", "value_type"],
    "v_audio": [
        "run_id",
        "run_path",
        "context",
        "tag",
        "step",
        "wall_time",
        "idx",
        "sample_rate",
        "data",
    ],
    "v_tensors": [
        "run_id",
        "run_path",
        "context",
        "tag",
        "plugin",
        "step",
        "wall_time",
        "dtype",
        "shape",
        "data",
    ],
}


# Columns beyond design §6, documented in docs/schema.md: a view may grow at its end only.
EXTRA_VIEW_COLUMNS = {"v_runs": ["source", "host"]}


@pytest.fixture
def empty_store(make_store: StoreFactory, tmp_path: Path) -> str:
    """An empty database of each backend (no schema yet)."""
    return make_store(tmp_path, schema=False)


@pytest.fixture
def engine(empty_store: str):
    """An engine on ``empty_store``."""
    engine = create_store_engine(store_url(empty_store))
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path):
    engine = create_store_engine(store_url(tmp_path / "store.db"))
    yield engine
    engine.dispose()


def _relations(conn) -> list[str]:
    found = inspect(conn)
    return sorted(
        name
        for name in found.get_table_names() + found.get_view_names()
        if name != migrate.VERSION_TABLE
    )


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
    # ensure_schema trusts this constant to skip Alembic for a current store.
    assert heads[0] == migrate.HEAD_REVISION


def test_current_store_starts_without_alembic(tmp_path: Path) -> None:
    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    engine.dispose()
    probe = (
        "import sys\n"
        "from tbconvert.store.engine import create_store_engine\n"
        "from tbconvert.store.migrate import ensure_schema\n"
        f"assert ensure_schema(create_store_engine({store_url(tmp_path / 's.db')!r})) is None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'"
        " or m == 'tbconvert.store.models'))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "[]"


def test_views_have_exactly_the_spec_columns(engine) -> None:
    migrate.ensure_schema(engine)
    with engine.connect() as conn:
        for view, columns in SPEC_VIEW_COLUMNS.items():
            found = list(conn.exec_driver_sql(f"SELECT * FROM {view} LIMIT 0").keys())
            assert found == columns + EXTRA_VIEW_COLUMNS.get(view, []), view


def test_sqlite_pragmas_and_physical_layout(sqlite_engine, tmp_path: Path) -> None:
    engine = sqlite_engine
    migrate.ensure_schema(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0
    # Drift checks cannot see WITHOUT ROWID; check the DDL itself.  Narrow point rows are
    # clustered by their key; wide ones (histograms, texts) keep a rowid (migration 0007).
    raw = sqlite3.connect(tmp_path / "store.db")
    ddl = dict(raw.execute("SELECT name, upper(sql) FROM sqlite_master WHERE type = 'table'"))
    raw.close()
    without_rowid = {name for name, sql in ddl.items() if "WITHOUT ROWID" in sql}
    assert without_rowid == {"scalars", "images", "audio", "params", "tensors"}


def test_upgrade_downgrade_roundtrip(engine) -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "head")
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "base")
    with engine.connect() as conn:
        assert _relations(conn) == []
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


def test_failed_migration_leaves_nothing_behind(engine, monkeypatch) -> None:
    """DDL is transactional: a migration that fails midway leaves an empty store."""
    from alembic import op

    real_execute = op.execute

    def failing_execute(sql, *args, **kwargs):
        if "v_last_scalars" in str(sql):
            raise RuntimeError("boom")
        return real_execute(sql, *args, **kwargs)

    monkeypatch.setattr(op, "execute", failing_execute)
    # The migrations themselves, not a fresh SQLite store's snapshot of them.
    monkeypatch.setattr(migrate, "snapshot_statements", lambda _revision: None)
    with pytest.raises(RuntimeError, match="boom"):
        migrate.ensure_schema(engine)
    with engine.connect() as conn:
        assert _relations(conn) == []
        assert migrate.current_revision(conn) is None


def test_store_from_revision_0001_upgrades_with_data_kept(tmp_path: Path) -> None:
    """A store made by the foundation (0001) gains the plugin tables with its points intact."""
    from alembic import command

    path = tmp_path / "old.db"
    engine = create_store_engine(store_url(path))
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO runs (id, logdir, run_path, group_path, name) "
            "VALUES (1, '/logs', 'run_a', '', 'run_a')"
        )
        conn.exec_driver_sql("INSERT INTO contexts (id, name) VALUES (1, '')")
        conn.exec_driver_sql(
            "INSERT INTO series (id, run_id, context_id, name, plugin) "
            "VALUES (1, 1, 1, 'loss', 'scalars')"
        )
        conn.exec_driver_sql(
            "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
            "offset_consumed, records, damaged_records, status, first_wall_time, "
            "last_wall_time) VALUES (1, 1, 1, 'run_a/events', 100, 1, 100, 3, 0, 'ok', "
            "1000.0, 1002.0)"
        )
        for step in range(3):
            conn.exec_driver_sql(
                "INSERT INTO scalars VALUES (1, ?, 1, ?, 0, ?, ?)",
                (step, 10 * step, 1000.0 + step, 0.5 * step),
            )
    change = migrate.ensure_schema(engine)
    assert change is not None and change.from_revision == "0001"
    assert change.backup is not None and Path(change.backup).exists()
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT run_path, tag, step, value FROM v_scalars ORDER BY step"
        ).all()
        assert [tuple(row) for row in rows] == [
            ("run_a", "loss", 0, 0.0),
            ("run_a", "loss", 1, 0.5),
            ("run_a", "loss", 2, 1.0),
        ]
        assert conn.exec_driver_sql("SELECT count(*) FROM v_images").scalar() == 0
    engine.dispose()
    backup = sqlite3.connect(change.backup)
    assert backup.execute(f"SELECT version_num FROM {migrate.VERSION_TABLE}").fetchone() == (
        "0001",
    )
    backup.close()


def test_store_from_revision_0002_gains_sources_and_server_upgrades_only_when_asked(
    engine, empty_store: str
) -> None:
    """0003 names each run's source after its logdir; a shared server is upgraded only by an
    explicit request (other converters may run the older code), a SQLite file at once."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0002")
        conn.execute(
            text(
                "INSERT INTO runs (id, logdir, run_path, group_path, name) "
                "VALUES (1, '/logs', 'a', '', 'a'), (2, '/other', 'a', '', 'a')"
            )
        )
        conn.execute(text("INSERT INTO contexts (id, name) VALUES (1, '')"))
        conn.execute(
            text(
                "INSERT INTO series (id, run_id, context_id, name, plugin) "
                "VALUES (1, 1, 1, 'loss', 'scalars')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
                "offset_consumed, records, damaged_records, status) "
                "VALUES (1, 1, 1, 'a/events', 100, 1, 100, 2, 0, 'ok')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO scalars VALUES (1, 5, 1, 0, 0, 1000.0, 0.5), "
                "(1, 5, 1, 40, 0, 1001.0, 0.25)"
            )
        )
    if "://" in empty_store:
        with pytest.raises(StoreError, match="tbconvert db upgrade"):
            migrate.ensure_schema(engine)
        change = migrate.upgrade(engine)
    else:
        change = migrate.ensure_schema(engine)
        assert change is not None and change.backup is not None
    assert change is not None and (change.from_revision, change.to_revision) == (
        "0002",
        migrate.HEAD_REVISION,
    )
    with engine.connect() as conn:
        runs = conn.execute(
            text("SELECT run_id, logdir, source, host FROM v_runs ORDER BY run_id")
        ).all()
        assert [tuple(row) for row in runs] == [
            (1, "/logs", "/logs", None),
            (2, "/other", "/other", None),
        ]
        last = conn.execute(
            text("SELECT run_path, tag, step, wall_time, value FROM v_last_scalars")
        ).all()
        assert [tuple(row) for row in last] == [("a", "loss", 5, 1001.0, 0.25)]
    migrate.check(engine)


# Histogram rows as 0003 stored them (every proto bucket, the first from ``min``), and what
# 0004 must make of them: TensorBoard's buckets (empty end buckets dropped, min and max as the
# outer edges, worked out by hand) and the proto's (limit, count) pairs.
_OLD_HISTOGRAMS = [
    # torch / Keras: the first limit lies below min, empty buckets at both ends
    (
        0,
        -0.5,
        2.0,
        1.5,
        4.25,
        "[[-0.5,-0.6,0.0],[-0.6,0.0,3.0],[0.0,1.0,0.0],"
        "[1.0,2.5,2.0],[2.5,1.7976931348623157e+308,0.0]]",
        "[[-0.5,0.0,3.0],[0.0,1.0,0.0],[1.0,2.0,2.0]]",
        "[[-0.6,0.0],[0.0,3.0],[1.0,0.0],[2.5,2.0],[1.7976931348623157e+308,0.0]]",
    ),
    # an empty TF1 histogram
    (
        1,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        0.0,
        0.0,
        "[[1.7976931348623157e+308,1.7976931348623157e+308,0.0]]",
        "[]",
        "[[1.7976931348623157e+308,0.0]]",
    ),
    # a TF2 tensor (no sum, no sum of squares): left as it is
    (
        2,
        -1.0,
        1.0,
        None,
        None,
        "[[-1.0,0.0,0.0],[0.0,1.0,2.0]]",
        "[[-1.0,0.0,0.0],[0.0,1.0,2.0]]",
        None,
    ),
]


def test_store_from_revision_0003_rewrites_histograms_and_keeps_them_raw(engine) -> None:
    """0004 gives HistogramProto rows TensorBoard's buckets and keeps the proto's in
    ``raw_buckets``; TF2 tensor rows are left alone; downgrading restores 0003's rows."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0003")
        conn.execute(
            text(
                "INSERT INTO runs (id, source, logdir, run_path, group_path, name) "
                "VALUES (1, '/logs', '/logs', 'a', '', 'a')"
            )
        )
        conn.execute(text("INSERT INTO contexts (id, name) VALUES (1, '')"))
        conn.execute(
            text(
                "INSERT INTO series (id, run_id, context_id, name, plugin) "
                "VALUES (1, 1, 1, 'w', 'histograms')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
                "offset_consumed, records, damaged_records, status) "
                "VALUES (1, 1, 1, 'a/events', 100, 1, 100, 3, 0, 'ok')"
            )
        )
        for step, low, high, total, squares, old, _, _ in _OLD_HISTOGRAMS:
            conn.execute(
                text(
                    "INSERT INTO histograms (series_id, step, file_id, record_offset, value_index, "
                    "wall_time, count, min, max, sum, sum_squares, buckets) "
                    "VALUES (1, :step, 1, :step, 0, 1000.0, 5.0, :low, :high, :total, :squares, "
                    ":old)"
                ),
                dict(step=step, low=low, high=high, total=total, squares=squares, old=old),
            )
        command.upgrade(migrate.alembic_config(conn), "head")
    with engine.connect() as conn:
        got = conn.execute(
            text(
                "SELECT p.buckets, p.raw_buckets, v.buckets FROM histograms p "
                "JOIN v_histograms v ON v.step = p.step ORDER BY p.step"
            )
        ).all()
    assert [tuple(row) for row in got] == [(new, raw, new) for *_, new, raw in _OLD_HISTOGRAMS]
    migrate.check(engine)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0003")
        got = conn.execute(text("SELECT buckets FROM histograms ORDER BY step")).all()
    assert [row[0] for row in got] == [old for _, _, _, _, _, old, _, _ in _OLD_HISTOGRAMS]


def test_store_from_revision_0004_is_repaired_by_0005(engine) -> None:
    """0005: a ``partial`` file may have been stopped between chunks, so it is read on
    (``reading``); a file stored twice by a ``--flat`` switch loses its ``gone`` copy, its
    points and the run left empty; files get a selection (NULL: everything)."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0004")
        for statement in (
            "INSERT INTO runs (id, source, logdir, run_path, group_path, name) VALUES "
            "(1, '/logs', '/logs', 'exp', '', 'exp'), "
            "(2, '/logs', '/logs', 'exp/train', 'exp', 'train')",
            "INSERT INTO contexts (id, name) VALUES (1, ''), (2, 'train')",
            "INSERT INTO series (id, run_id, context_id, name, plugin) VALUES "
            "(1, 1, 2, 'x', 'scalars'), (2, 2, 1, 'x', 'scalars')",
            "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
            "offset_consumed, records, damaged_records, status) VALUES "
            "(1, 1, 2, 'exp/train/events', 100, 1, 100, 3, 0, 'gone'), "
            "(2, 2, 1, 'exp/train/events', 100, 1, 60, 2, 0, 'partial')",
            "INSERT INTO scalars (series_id, step, file_id, record_offset, value_index, "
            "wall_time, value) VALUES (1, 0, 1, 0, 0, 1.0, 1.0), (2, 0, 2, 0, 0, 1.0, 1.0)",
        ):
            conn.execute(text(statement))
        command.upgrade(migrate.alembic_config(conn), "head")
    with engine.connect() as conn:
        files = conn.execute(text("SELECT id, status, selection FROM event_files")).all()
        runs = conn.execute(text("SELECT run_path FROM runs")).all()
        points = conn.execute(text("SELECT run_path, context FROM v_scalars")).all()
    assert [tuple(row) for row in files] == [(2, "reading", None)]
    assert [tuple(row) for row in runs] == [("exp/train",)]
    assert [tuple(row) for row in points] == [("exp/train", "")]
    migrate.check(engine)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0004")
        status = conn.execute(text("SELECT status FROM event_files")).scalar_one()
    assert status == "partial"


def test_foreign_server_database_is_refused_and_untouched(pg_server) -> None:
    url = pg_server.new_database("foreign")
    database = url.rsplit("/", 1)[1]
    pg_server.execute("CREATE TABLE notes (body TEXT)", database)
    engine = create_store_engine(url)
    try:
        with pytest.raises(StoreError, match="not a tbconvert store"):
            migrate.ensure_schema(engine)
    finally:
        engine.dispose()
    tables = pg_server.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'", database
    )
    assert tables == [("notes",)]


@pytest.mark.dangling_rows
def test_only_the_writer_skips_foreign_key_checks(
    tmp_path: Path, dangling_foreign_keys: list[tuple[str, tuple[object, ...]]]
) -> None:
    from tbconvert.writing.writer import StoreWriter

    engine = create_store_engine(store_url(tmp_path / "s.db"))
    migrate.ensure_schema(engine)
    writer = StoreWriter(engine)
    with writer.transaction():
        writer.insert_points("scalars", FileRows.of([(999, 0, 999, 0, 0, 1.0, 2.0)], 999))
    writer.close()
    # The suite's check at writer close saw the dangling row (and is reset for this test).
    dangling, dangling_foreign_keys[:] = list(dangling_foreign_keys), []
    # The point's keys, and those of the summary of its series.
    assert sorted(row[1][2] for row in dangling) == ["event_files"] * 2 + ["series"] * 2
    # The writer's connection was not pooled: every other connection enforces the keys.
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO scalars VALUES (998, 0, 998, 0, 0, 1.0, 2.0)")
    engine.dispose()


def _wide_rows(conn) -> dict[str, list[tuple[object, ...]]]:
    queries = {
        "histograms": "SELECT * FROM histograms ORDER BY step",
        "texts": "SELECT * FROM texts ORDER BY step, idx",
        "v_histograms": "SELECT * FROM v_histograms ORDER BY step",
        "v_texts": "SELECT * FROM v_texts ORDER BY step",
    }
    return {name: [tuple(row) for row in conn.execute(text(sql))] for name, sql in queries.items()}


def _without_rowid(conn) -> set[str]:
    if conn.dialect.name != "sqlite":
        return set()
    tables = conn.exec_driver_sql("SELECT name, upper(sql) FROM sqlite_master WHERE type = 'table'")
    return {name for name, sql in tables if "WITHOUT ROWID" in sql}


def test_store_from_revision_0006_keeps_its_wide_rows_in_rowid_tables(engine) -> None:
    """0007 rebuilds histograms and texts as rowid tables on SQLite (a WITHOUT ROWID table
    moves all of a row beyond ~1 KB to overflow pages); every row and view stays as it was,
    and a downgrade clusters them by their key again.  PostgreSQL has nothing to change."""
    from alembic import command

    buckets = "[" + ",".join(f"[{i}.5,{i + 1}.5,{i}.0]" for i in range(200)) + "]"
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0006")
        for statement in (
            "INSERT INTO runs (id, source, logdir, run_path, group_path, name) "
            "VALUES (1, '/logs', '/logs', 'a', '', 'a')",
            "INSERT INTO contexts (id, name) VALUES (1, '')",
            "INSERT INTO series (id, run_id, context_id, name, plugin) VALUES "
            "(1, 1, 1, 'w', 'histograms'), (2, 1, 1, 'notes', 'text')",
            "INSERT INTO event_files (id, run_id, context_id, path, size, mtime_ns, "
            "offset_consumed, records, damaged_records, status) "
            "VALUES (1, 1, 1, 'a/events', 100, 1, 100, 3, 0, 'ok')",
        ):
            conn.execute(text(statement))
        for step in range(3):
            conn.execute(
                text(
                    "INSERT INTO histograms (series_id, step, file_id, record_offset, "
                    "value_index, wall_time, count, min, max, buckets, raw_buckets) VALUES "
                    "(1, :step, 1, :step, 0, 1000.0, 20100.0, 0.5, 200.5, :buckets, NULL)"
                ),
                {"step": step, "buckets": buckets},
            )
            conn.execute(
                text(
                    "INSERT INTO texts (series_id, step, file_id, record_offset, value_index, "
                    "wall_time, idx, value) VALUES (2, :step, 1, :offset, 0, 1000.0, 0, :value)"
                ),
                {"step": step, "offset": 100 + step, "value": f"step {step} " + "x" * 5000},
            )
        before = _wide_rows(conn)
        narrow = _without_rowid(conn)
        command.upgrade(migrate.alembic_config(conn), "head")
        assert _wide_rows(conn) == before
        assert _without_rowid(conn) == narrow - {"histograms", "texts"}
        with pytest.raises(IntegrityError), conn.begin_nested():  # the key is still the key
            conn.execute(
                text(
                    "INSERT INTO texts (series_id, step, file_id, record_offset, value_index, "
                    "wall_time, idx, value) VALUES (2, 0, 1, 100, 0, 1.0, 0, 'again')"
                )
            )
    assert len(before["histograms"]) == len(before["v_texts"]) == 3
    migrate.check(engine)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0006")
        assert _wide_rows(conn) == before
        assert _without_rowid(conn) == narrow
