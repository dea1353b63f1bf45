"""The point tables' foreign keys on a server (``writing.pg_foreign_keys``, issue #14).

A role that may set ``session_replication_role`` has the converter check each chunk's keys
in one statement, which also locks the parents as the server's triggers would; any other
role has the server check each row and is told how to grant it.  Either way the store is the
same, the keys stay declared and enforced for every other client, and the triggers are off
for the converter's point inserts alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tbconvert
from tbconvert.rows import POINT_COLUMNS, FileRows, SeriesDefinition
from tbconvert.store import models
from tbconvert.store.engine import create_store_engine
from tbconvert.writing import pg_foreign_keys
from tbconvert.writing.writer import StoreWriter
from tests.safety.test_oracle import write_hand_built, write_tensorboardx
from tests.support.snapshots import connect, rows, view_rows, without_run_ids

_ROLES = itertools.count(1)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every plugin, every encoding (the oracle test's logs): scalars of the block path,
    images, audio and tensors with blobs, histograms, texts, hparams."""
    root = tmp_path_factory.mktemp("keys") / "logdir"
    write_hand_built(root)
    write_tensorboardx(root)
    return root


def member_store(server: Any, *, granted: bool) -> tuple[str, str]:
    """An empty database owned by a new role that is not a superuser; (URL, role)."""
    role = f"member_{next(_ROLES)}"
    database = f"keys_{role}"
    server.execute(f"CREATE ROLE {role} LOGIN")
    if granted:
        server.execute(f"GRANT SET ON PARAMETER session_replication_role TO {role}")
    server.execute(f'CREATE DATABASE "{database}" OWNER {role}')
    server.databases.append(server.url(database))  # checked for dangling rows at the end
    return server.url(database).replace(f"//{server.user}@", f"//{role}@"), role


@pytest.fixture(scope="module")
def reference(logdir: Path, pg_server: Any) -> dict[str, list[tuple[object, ...]]]:
    """The views of the logdir converted by the server's superuser."""
    store = pg_server.new_database("keys_reference")
    summary = tbconvert.convert(logdir, store, progress=False)
    assert summary.exit_code == 0 and summary.warnings == []
    return without_run_ids(view_rows(store))


def test_a_role_without_the_grant_is_checked_per_row_and_told_how_to_grant(
    logdir: Path, pg_server: Any, reference: dict[str, list[tuple[object, ...]]]
) -> None:
    store, role = member_store(pg_server, granted=False)
    summary = tbconvert.convert(logdir, store, progress=False)
    assert summary.exit_code == 0
    points = sum(summary.points.values())
    assert points > 0
    (notice,) = summary.warnings
    assert f"foreign keys of {points} points row by row" in notice
    assert f"GRANT SET ON PARAMETER session_replication_role TO {role}" in notice
    assert without_run_ids(view_rows(store)) == reference


def test_a_granted_role_checks_per_chunk_and_gets_the_same_store(
    logdir: Path, pg_server: Any, reference: dict[str, list[tuple[object, ...]]]
) -> None:
    store, _ = member_store(pg_server, granted=True)
    # Scalars first: the second conversion reads every file again from its start under a
    # wider selection, through the staging table that skips the stored scalars.
    first = tbconvert.convert(logdir, store, progress=False, plugins=["scalars"])
    second = tbconvert.convert(logdir, store, progress=False)
    for summary in (first, second):
        assert summary.exit_code == 0 and summary.warnings == []
    assert without_run_ids(view_rows(store)) == reference


@pytest.fixture
def converted(logdir: Path, pg_server: Any) -> str:
    store = pg_server.new_database("keys")
    tbconvert.convert(logdir, store, progress=False)
    return store


def test_the_keys_stay_declared_and_enforced_for_other_clients(converted: str) -> None:
    with closing(connect(converted, read_only=False)) as conn:
        declared = rows(
            conn,
            "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint "
            "WHERE contype = 'f' AND conrelid::regclass::text IN "
            "('scalars', 'images', 'audio', 'histograms', 'texts', 'params', 'tensors')",
        )
        assert {("scalars", "series"), ("scalars", "event_files")} <= set(declared)
        assert {("images", "blobs"), ("audio", "blobs"), ("tensors", "blobs")} <= set(declared)
        ((series_id, file_id),) = rows(conn, "SELECT series_id, file_id FROM scalars LIMIT 1")
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        _execute(
            converted,
            "INSERT INTO scalars VALUES (%s, 1, %s, 1, 0, 1.0, 1.0)",
            (series_id + 10**6, file_id),
        )
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        _execute(converted, "DELETE FROM series WHERE id = %s", (series_id,))


@pytest.fixture
def writer(converted: str) -> Iterator[StoreWriter]:
    engine = create_store_engine(converted)
    store_writer = StoreWriter(engine)
    try:
        yield store_writer
    finally:
        store_writer.close()
        engine.dispose()


def _empty_series(writer: StoreWriter) -> tuple[int, int]:
    """A committed series without points, and a file of its (run, context): (series, file)."""
    ((file_id, run_id, context_id),) = writer.conn.exec_driver_sql(
        "SELECT id, run_id, context_id FROM event_files ORDER BY id LIMIT 1"
    ).all()
    writer.conn.rollback()
    with writer.transaction():
        (series_id,) = writer.identities.series_ids(
            run_id, context_id, [SeriesDefinition(0, "empty", "scalars", None, None, None, None)]
        )
    return series_id, file_id


def _role(writer: StoreWriter) -> str:
    return str(writer.conn.exec_driver_sql("SHOW session_replication_role").scalar_one())


def _insert(writer: StoreWriter, series_id: int, file_id: int) -> int:
    """One fresh scalar straight through the bulk writer (no summaries, whose own keys would
    take locks of their own)."""
    row = (series_id, 1, file_id, 10**9, 0, 1.0, 2.0)
    return writer.bulk.insert_points(
        writer.conn.connection.dbapi_connection, "scalars", FileRows.of([row], file_id), True
    )


def test_the_triggers_are_off_for_the_points_alone(writer: StoreWriter) -> None:
    series_id, file_id = _empty_series(writer)
    with writer.transaction():
        assert _insert(writer, series_id, file_id) == 1
        assert _role(writer) == "origin"
        # The rest of the transaction is checked by the server again.
        with pytest.raises(Exception, match="foreign key"):
            writer.conn.exec_driver_sql(f"UPDATE series SET run_id = -1 WHERE id = {series_id}")
    assert writer.notices() == []


def test_the_parents_locked_are_the_models_foreign_keys() -> None:
    for table in POINT_COLUMNS:
        declared = {
            (key.parent.name, key.column.table.name)
            for key in models.Base.metadata.tables[table].foreign_keys
        }
        assert set(pg_foreign_keys._parents(table)) == declared
        assert all(column in POINT_COLUMNS[table] for column, _parent in declared)


def test_a_missing_parent_is_refused_by_the_server(writer: StoreWriter) -> None:
    series_id, file_id = _empty_series(writer)
    for series, file in [(series_id + 10**6, file_id), (series_id, file_id + 10**6)]:
        with pytest.raises(Exception, match="foreign key"), writer.transaction():
            _insert(writer, series, file)


def test_the_parents_are_locked_until_the_points_commit(
    writer: StoreWriter, converted: str
) -> None:
    """As the triggers would: another transaction cannot delete a series whose first points
    are being written, nor change the id of the points' file."""
    series_id, file_id = _empty_series(writer)
    with writer.transaction():
        _insert(writer, series_id, file_id)
        for sql, key in [
            ("DELETE FROM series WHERE id = %s", series_id),
            ("UPDATE event_files SET id = -id WHERE id = %s", file_id),
        ]:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                _execute(converted, sql, (key,), lock_timeout_ms=200)


def _execute(store: str, sql: str, parameters: tuple[Any, ...], lock_timeout_ms: int = 0) -> None:
    conninfo = store.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as conn:
        if lock_timeout_ms:
            conn.execute(f"SET lock_timeout = {lock_timeout_ms}")
        conn.execute(sql, parameters)  # type: ignore[arg-type]
