"""A revision that adds a table, taken down and up again on a converted store."""

from __future__ import annotations

from sqlalchemy import inspect, text

from tbconvert.store import migrate
from tbconvert.store.engine import create_store_engine, store_url


def down_and_up(store: str, before: str, table: str) -> int:
    """Downgrade ``store`` to revision ``before`` (which must drop ``table``), upgrade it to
    the head again (which fills it) and check the schema; returns the rows then in
    ``table``."""
    from alembic import command

    engine = create_store_engine(store_url(store))
    try:
        with engine.begin() as conn:
            command.downgrade(migrate.alembic_config(conn), before)
            assert table not in inspect(conn).get_table_names()
        with engine.begin() as conn:
            command.upgrade(migrate.alembic_config(conn), "head")
            filled = int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
        migrate.check(engine)
    finally:
        engine.dispose()
    return filled
