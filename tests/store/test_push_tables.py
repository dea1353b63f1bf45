"""Revisions 0010 (#39) and 0015 (#48): the push state tables come and go with their
migrations, and a store from before keeps everything it held."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url
from tests.support.snapshots import StoreFactory


@pytest.fixture
def engine(make_store: StoreFactory, tmp_path: Path) -> Iterator[Engine]:
    """An engine on an empty database of each backend (no schema yet)."""
    engine = create_store_engine(store_url(make_store(tmp_path, schema=False)))
    yield engine
    engine.dispose()


def test_revision_0010_adds_the_push_tables_and_its_downgrade_drops_them(engine: Engine) -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0009")
        conn.execute(
            text(
                "INSERT INTO runs (id, source, logdir, run_path, group_path, name) "
                "VALUES (1, '/logs', '/logs', 'a', '', 'a')"
            )
        )
        command.upgrade(migrate.alembic_config(conn), "head")
        tables = set(inspect(conn).get_table_names())
        assert {"push_runs", "push_marks"} <= tables
        conn.execute(
            text(
                "INSERT INTO push_runs (destination, run_id, remote_id, pending) "
                "VALUES ('mlflow uri 1', 1, 'abc', true)"
            )
        )
        assert conn.execute(text("SELECT run_path FROM v_runs")).scalar_one() == "a"
    migrate.check(engine)
    with engine.begin() as conn:
        command.downgrade(migrate.alembic_config(conn), "0009")
        tables = set(inspect(conn).get_table_names())
        assert not {"push_runs", "push_marks"} & tables
        assert conn.execute(text("SELECT run_path FROM v_runs")).scalar_one() == "a"


def test_revision_0015_adds_push_destinations_and_keeps_the_push_state(engine: Engine) -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), "0014")
        conn.execute(
            text(
                "INSERT INTO push_runs (destination, run_id, remote_id, pending) "
                "VALUES ('mlflow uri experiment 1', 1, 'abc', false)"
            )
        )
        command.upgrade(migrate.alembic_config(conn), "0015")
        assert "push_destinations" in inspect(conn).get_table_names()
        conn.execute(
            text(
                "INSERT INTO push_destinations (tracker, location, name, destination) "
                "VALUES ('mlflow', 'uri', 'tbconvert', 'mlflow uri experiment 1')"
            )
        )
        found = "SELECT p.remote_id FROM push_runs AS p JOIN push_destinations USING (destination)"
        assert conn.execute(text(found)).scalar_one() == "abc"
        command.downgrade(migrate.alembic_config(conn), "0014")
        assert "push_destinations" not in inspect(conn).get_table_names()
        assert conn.execute(text("SELECT remote_id FROM push_runs")).scalar_one() == "abc"
