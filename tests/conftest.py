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
from hypothesis import HealthCheck, settings

from converter.store.writer import StoreWriter
from tests.pgserver import PostgresServer, find_bindir
from tests.snapshots import StoreFactory

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session", autouse=True)
def dangling_foreign_keys() -> Iterator[list[tuple[str, tuple[object, ...]]]]:
    """The converter's SQLite connection does not enforce foreign keys (for speed): every
    conversion in the suite checks, as its writer closes, that none would have failed.
    Yields the (store, row of ``PRAGMA foreign_key_check``) found and not yet reported."""
    found: list[tuple[str, tuple[object, ...]]] = []
    close = StoreWriter.close

    def checked_close(writer: StoreWriter) -> None:
        if writer.engine.dialect.name == "sqlite":
            raw = writer.conn.connection.dbapi_connection
            assert raw is not None
            found.extend(
                (str(writer.engine.url), tuple(row))
                for row in raw.execute("PRAGMA foreign_key_check")
            )
        close(writer)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StoreWriter, "close", checked_close)
        yield found


@pytest.fixture(autouse=True)
def _no_dangling_foreign_keys(
    dangling_foreign_keys: list[tuple[str, tuple[object, ...]]],
) -> Iterator[None]:
    yield
    dangling, dangling_foreign_keys[:] = list(dangling_foreign_keys), []
    assert not dangling, f"rows whose foreign key points nowhere: {dangling[:5]}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 for the whole session."""
    if find_bindir() is None:
        message = (
            "PostgreSQL server binaries not found (install Debian's 'postgresql' "
            "package, or set PG_BINDIR)"
        )
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


# Long runs of the stateful invariant test (tests/test_invariant_property.py):
# pytest tests/test_invariant_property.py --hypothesis-profile=invariant-long
settings.register_profile(
    "invariant-long",
    max_examples=1000,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
