"""Revision 0012 (#44): a store written before it, with a Lightning version's params from both
its event file and ``hparams.yaml``, is repaired: by the migration alone for what the stored
rows can tell (one row per key, no file time), by the next plain run for the types (the
sidecar read again); then it equals a fresh conversion."""

from __future__ import annotations

import posixpath
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from tbconvert import convert
from tbconvert.reading import sidecars
from tbconvert.reading.chunks import Chunk, FileTask, ReadSettings
from tbconvert.reading.remote import open_binary
from tbconvert.rows import SeriesDefinition
from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tests.support.lightning_params import VERSION, check_version, lightning_version
from tests.support.snapshots import (
    StoreFactory,
    connect,
    rows,
    view_rows,
    without_run_ids,
)


def read_sidecar_as_0011_did(task: FileTask, settings: ReadSettings) -> Chunk:
    """``reading.sidecars.read_sidecar`` of revision 0011's converter (its parsing and
    flattening are unchanged): values through protobuf's ``Struct``, so every number a
    double, and the file's mtime as the rows' wall time."""
    from google.protobuf.struct_pb2 import Struct

    from tbconvert.plugins.hparams import params_rows

    name = posixpath.basename(task.path)
    with open_binary(task.path, task.size) as handle:
        data = handle.read(task.size)
    struct = Struct()
    struct.update(sidecars._flat(sidecars._parsed(name, data)))
    wall_time = task.mtime_ns / 1e9
    found = [(0, 0, 0, 0, i, wall_time, *row) for i, row in enumerate(params_rows(struct.fields))]
    definition = SeriesDefinition(0, name, "hparams", None, None, None, None)
    return sidecars._chunk(task, settings, data, rows=found, definition=definition)


def _alembic(engine: Engine, action: str, revision: str) -> None:
    from alembic import command

    with engine.begin() as conn:
        getattr(command, action)(migrate.alembic_config(conn), revision)


def _query(store: str, sql: str) -> list[tuple[Any, ...]]:
    with closing(connect(store)) as conn:
        return rows(conn, sql)


def test_a_store_from_0011_is_repaired_by_0012_and_the_next_plain_run(
    tmp_path: Path, make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = tmp_path / "logs"
    version = lightning_version(logdir)
    old, fresh = make_store(tmp_path, "old"), make_store(tmp_path, "fresh")
    with monkeypatch.context() as patched:
        patched.setattr(sidecars, "read_sidecar", read_sidecar_as_0011_did)
        convert(logdir, old, progress=False)
    engine = create_store_engine(store_url(old))
    try:
        _alembic(engine, "downgrade", "0011")
        # The store: the sidecar's float copy of a key beside the event file's.
        assert _query(old, "SELECT value FROM v_params WHERE key = 'config/InputCh'") in (
            [("[0]",), ("[0.0]",)],
            [("[0.0]",), ("[0]",)],
        )
        sidecar_times = "SELECT first_wall_time FROM v_series WHERE tag = 'hparams.yaml'"
        assert _query(old, sidecar_times) != [(None,)]

        _alembic(engine, "upgrade", "head")
        migrate.check(engine)
    finally:
        engine.dispose()
    keys = [key for (key,) in _query(old, f"SELECT key FROM v_params WHERE run_path = '{VERSION}'")]
    assert len(keys) == len(set(keys))
    assert _query(old, sidecar_times) == [(None,)]
    timed = (
        "SELECT count(*) FROM params AS p JOIN series AS s ON s.id = p.series_id "
        "WHERE s.name = 'hparams.yaml' AND p.wall_time IS NOT NULL"
    )
    assert _query(old, timed) == [(0,)]

    convert(logdir, old, progress=False)  # reads the sidecar again: its types as written
    check_version(old, version)
    convert(logdir, fresh, progress=False)
    assert without_run_ids(view_rows(old)) == without_run_ids(view_rows(fresh))
