"""``tbconvert db``: the store's schema (Alembic migrations shipped with tbconvert)."""

from __future__ import annotations

import click

from tbconvert.cli.app import CONTEXT_SETTINGS, cli, run_library, store_option


@cli.group(context_settings=CONTEXT_SETTINGS)
def db() -> None:
    """Manage the store's schema (Alembic migrations shipped with tbconvert).

    \b
    Example:
      tbconvert db current --store logs.db
      tbconvert db upgrade --store postgresql+psycopg://me@server/tb
    """


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def upgrade(store: str) -> None:
    """Create the store, or upgrade it to this version's schema.

    \b
    Example:
      tbconvert db upgrade --store logs.db
    """
    from tbconvert.store import admin

    click.echo(run_library(0, lambda: admin.upgrade_store(store)))


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def current(store: str) -> None:
    """Print the store's schema revision and this version's.

    \b
    Example:
      tbconvert db current --store logs.db
    """
    from tbconvert.store import admin

    click.echo(run_library(0, lambda: admin.describe_store(store)))


@db.command(context_settings=CONTEXT_SETTINGS)
@store_option
def check(store: str) -> None:
    """Fail when the models and the migrations disagree (schema drift).

    \b
    Example:
      tbconvert db check --store /tmp/check.db
    """
    from tbconvert.store import admin

    click.echo(run_library(0, lambda: admin.check_store(store)))
