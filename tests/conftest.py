"""Fixtures shared by the suites: stores on both backends.

``make_store`` is parametrised over SQLite and PostgreSQL: a test that takes it runs once per
backend.  The PostgreSQL server is a throwaway cluster started once per session (see
``tests/support/pgserver.py``); each store is a fresh database of it, copied from one that the
code's migrations brought to its schema once per session (``PostgresServer.store_template``; a
test that needs a database without the schema, to see it migrated, asks the server for a new
one).  Without server binaries the PostgreSQL half is skipped with the reason, unless
``TBCONVERT_REQUIRE_POSTGRES`` is set (CI), where their absence is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tbconvert.conversion.options import BY_RECORD_BYTES_VARIABLE
from tbconvert.writing.writer import StoreWriter
from tests.support.emulators import Emulator, azurite_binary, start_azurite, start_gcs
from tests.support.pgserver import PostgresServer, find_bindir
from tests.support.s3server import S3Server
from tests.support.s3server import start as start_s3_server
from tests.support.snapshots import StoreFactory
from tests.support.storecheck import dangling_in

pytest_plugins = ["pytester"]

# gcsfs asks a bucket's type over gRPC, which the GCS emulator does not answer (a minute of
# retries per bucket); read when gcsfs is imported, so set before any test imports it.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

# Files under 16 KiB are decoded record by record (``ReadTuning.by_record_bytes``), and nearly
# every fixture file is that small: the suite's conversions send them down the block path, so
# that the incremental, crash and invariant tests keep covering it, through the knob a
# conversion reads when it is given no tuning (conversion/options.py).  Set here, before any
# test module makes its options or its subprocesses' environment.  The protobuf path is the
# reference (``test_block_scalars``, ``test_oracle``); ``by_record_switch`` tests, and tests
# that pass a ``ReadTuning`` of their own, read with the real threshold, and so do the
# conversions the suite runs in child processes (``tests/support/children.py``).
os.environ[BY_RECORD_BYTES_VARIABLE] = "0"

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(autouse=True)
def _by_record_switch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("by_record_switch") is not None:
        monkeypatch.delenv(BY_RECORD_BYTES_VARIABLE)


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


# The server of the session once started, and the stores already checked for dangling rows.
_SERVERS: list[PostgresServer] = []
_CHECKED: set[str] = set()


class _Made:
    """The directories and server databases made from one moment on (tests, or their
    module's fixtures, may convert into them in-process, in workers or in subprocesses)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.basetemp = tmp_path_factory.getbasetemp()
        self.entries = set(os.listdir(self.basetemp))
        self.databases = len(_SERVERS[0].databases) if _SERVERS else 0

    def unchecked_problems(self) -> list[str]:
        """Dangling rows in what was made since and not checked yet (then it is)."""
        new = sorted(set(os.listdir(self.basetemp)) - self.entries)
        # Not the ``*current`` links pytest keeps to the newest directory of each name.
        directories = [self.basetemp / name for name in new]
        directories = [d for d in directories if not d.is_symlink()]
        databases = _SERVERS[0].databases[self.databases :] if _SERVERS else []
        fresh = [str(d) for d in directories if str(d) not in _CHECKED]
        fresh += [url for url in databases if url not in _CHECKED]
        _CHECKED.update(fresh)
        return dangling_in(
            [Path(d) for d in fresh if "://" not in d], [u for u in fresh if "://" in u]
        )


@pytest.fixture(autouse=True)
def _no_dangling_rows(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """After every test: the stores it made hold no row whose reference points nowhere,
    whichever process wrote them (see ``tests/support/storecheck.py``).  A test that leaves such
    rows on purpose (and checks them itself) is marked ``dangling_rows``."""
    made = _Made(tmp_path_factory)
    yield
    problems = made.unchecked_problems()
    if request.node.get_closest_marker("dangling_rows") is None:
        assert not problems, f"rows that point nowhere: {problems[:5]}"


@pytest.fixture(scope="module", autouse=True)
def _no_dangling_rows_in_module_stores(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The same for the stores of a module's own fixtures (made before any of its tests)."""
    made = _Made(tmp_path_factory)
    yield
    problems = made.unchecked_problems()
    assert not problems, f"rows that point nowhere, in this module's stores: {problems[:5]}"


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A local S3-compatible server (moto's, in a process of its own) counting what it
    serves; each test makes its own bucket."""
    server = start_s3_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs() -> Iterator[Emulator]:
    """A local Google Cloud Storage emulator (``gcp-storage-emulator``)."""
    emulator = start_gcs()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def azurite() -> Iterator[Emulator]:
    """A local Azure Blob Storage emulator (Azurite, from npm: ``.ci/run`` installs it).
    Skipped without it, unless ``TBCONVERT_REQUIRE_AZURITE`` is set (CI), where its absence
    is a failure."""
    binary = azurite_binary()
    if binary is None:
        if os.environ.get("TBCONVERT_REQUIRE_AZURITE"):
            pytest.fail("Azurite is required here: npm install --prefix .ci/node azurite@3")
        pytest.skip("Azurite is not installed (npm install --prefix .ci/node azurite@3)")
    emulator = start_azurite(binary)
    yield emulator
    emulator.stop()


# A session's cluster grows to a few GB of databases; on a RAM disk with room for them, they are
# made and removed in a fraction of the time a disk takes (docs/performance.md#the-test-suite-49).
RAM_DISK = Path("/dev/shm")
RAM_DISK_ROOM = 12 * 2**30


def _cluster_parent() -> Path | None:
    """The RAM disk when it and the free memory have room for the session's cluster, else None
    (the system's temporary directory)."""
    try:
        room = shutil.disk_usage(RAM_DISK).free
        meminfo = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    available = [line.split()[1] for line in meminfo if line.startswith("MemAvailable:")]
    if not available or min(room, int(available[0]) * 1024) < RAM_DISK_ROOM:
        return None
    return RAM_DISK


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 for the whole session."""
    if os.environ.get("TBCONVERT_SKIP_POSTGRES"):
        # Mutation runs (docs/mutation.md): one server per mutant would cost more than its tests.
        pytest.skip("TBCONVERT_SKIP_POSTGRES is set")
    if find_bindir() is None:
        message = (
            "PostgreSQL server binaries not found (install Debian's 'postgresql' "
            "package, or set PG_BINDIR)"
        )
        if os.environ.get("TBCONVERT_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer.start(_cluster_parent())
    _SERVERS.append(server)
    try:
        yield server
    finally:
        _SERVERS.remove(server)
        server.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """Stores of each backend in turn (module scope, so module fixtures can convert once)."""
    server = request.getfixturevalue("pg_server") if request.param == "postgresql" else None
    return StoreFactory(request.param, server)


@pytest.fixture
def store(make_store: StoreFactory, tmp_path: Path) -> str:
    """One new store of the current backend, with no runs (a server's already at the schema)."""
    return make_store(tmp_path)


# Long runs of the stateful invariant test (tests/safety/test_invariant_property.py):
# pytest tests/safety/test_invariant_property.py --hypothesis-profile=invariant-long
settings.register_profile(
    "invariant-long",
    max_examples=1000,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# The default (`make test`, CI): the same examples on every run of the same commit, and no
# example database, so a commit's result never depends on the draw or on an earlier run.
# Random exploration is `make test-long` (profile "long"); what it finds becomes an @example.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile(
    "long",
    max_examples=500,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Mutation runs (`make mutate`, docs/mutation.md): the same examples for every mutant.
settings.register_profile("mutmut", parent=settings.get_profile("ci"))
settings.load_profile(os.environ.get("TBCONVERT_HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``TBCONVERT_MUTATION_TESTS`` (set by tools/mutation_run.py), run only the test
    files aimed at the module of the mutant under test (``MUTANT_UNDER_TEST``, set by mutmut),
    or at any mutated module while mutmut maps tests to functions (docs/mutation.md); and
    for the score before the tests written for mutants (``--before``), none of those (the
    tests marked ``mutant_gap``)."""
    if not os.environ.get("TBCONVERT_MUTATION_TESTS"):
        return
    from tools.mutation_run import GAP_MARKER, leaves_out_gap_tests, test_files_for

    files = test_files_for(os.environ.get("MUTANT_UNDER_TEST", ""))
    before = leaves_out_gap_tests()

    def kept(item: pytest.Item) -> bool:
        gap = item.get_closest_marker(GAP_MARKER) is not None
        return item.path.name in files and not (before and gap)

    dropped = [item for item in items if not kept(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if kept(item)]
