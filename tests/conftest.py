"""Fixtures shared by the suites: stores on both backends.

``make_store`` is parametrised over SQLite and PostgreSQL: a test that takes it runs once per
backend.  The PostgreSQL server is a throwaway cluster started once per session (see
``tests/pgserver.py``); each store is a fresh database of it.  Without server binaries the
PostgreSQL half is skipped with the reason, unless ``TBCONVERT_REQUIRE_POSTGRES`` is set (CI),
where their absence is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgserver import PostgresServer, find_bindir
from tests.snapshots import StoreFactory

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 for the whole session."""
    if find_bindir() is None:
        message = ("PostgreSQL server binaries not found (install Debian's 'postgresql' "
                   "package, or set PG_BINDIR)")
        if os.environ.get("TBCONVERT_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """Stores of each backend in turn (module scope, so module fixtures can convert once)."""
    server = request.getfixturevalue("pg_server") if request.param == "postgresql" else None
    return StoreFactory(request.param, server)


@pytest.fixture
def store(make_store: StoreFactory, tmp_path: Path) -> str:
    """One empty store of the current backend."""
    return make_store(tmp_path)
