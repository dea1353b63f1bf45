"""Alembic environment for the tbconvert run store.

The converter runs migrations in-process on its own connection (``config.attributes
["connection"]``); developers can also run ``alembic`` from the repository root, which builds
an engine from ``sqlalchemy.url`` (default ``./tbconvert.db``).  No ``fileConfig``: migrations
must not rewire the CLI's logging.
"""

from __future__ import annotations

from alembic import context

from tbconvert.store.engine import DEFAULT_STORE, create_store_engine, store_url
from tbconvert.store.migrate import VERSION_TABLE, include_name

config = context.config


def _configure(connection: object, target_metadata: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,
        compare_type=True,
        include_name=include_name,
        transactional_ddl=True,
    )


def run_migrations_online() -> None:
    """Run on the caller's connection, or on a fresh engine for command-line use."""
    connection = config.attributes.get("connection")
    if connection is not None:
        # In-process: the models (only compared against by check) are passed when needed;
        # importing the ORM for every upgrade would slow every new store's start-up.
        _configure(connection, config.attributes.get("target_metadata"))
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url") or store_url(DEFAULT_STORE)
    from tbconvert.store.models import Base

    engine = create_store_engine(url)
    with engine.begin() as connection:
        _configure(connection, Base.metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: run them on a store")
run_migrations_online()
