"""A throwaway PostgreSQL server for tests and benchmarks: initdb into a temporary directory,
listen on 127.0.0.1 only, one fresh database per store, everything removed at the end.

Uses the server binaries of Debian's ``postgresql`` package (``.ci/run`` installs them).
PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

_SEARCH = (
    "/usr/lib/postgresql/*/bin",
    "/usr/local/pgsql/bin",
    "/opt/homebrew/bin",
    "/usr/local/bin",
    "/usr/bin",
)
# Tests want speed, not durability: the whole cluster is thrown away.
_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
    "listen_addresses=127.0.0.1",
)


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, newest version first; None if absent."""
    explicit = os.environ.get("PG_BINDIR")
    candidates = [explicit] if explicit else []
    for pattern in _SEARCH:
        candidates += sorted(glob.glob(pattern), key=_version_key, reverse=True)
    for candidate in candidates:
        if (
            candidate
            and (Path(candidate) / "initdb").exists()
            and (Path(candidate) / "pg_ctl").exists()
        ):
            return Path(candidate)
    return None


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(part) for part in Path(path).parent.name.split(".") if part.isdigit())


class PostgresServer:
    """One running cluster; :meth:`new_database` hands out empty databases as URLs."""

    def __init__(self, bindir: Path, parent: Path | None = None) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="tbconvert-pg-", dir=parent))
        self.port = _free_port()
        self.user = "tbconvert"
        self._run_as = _unprivileged_user()
        self._counter = itertools.count(1)
        # Every database handed out, in order (checked for dangling rows after each test).
        self.databases: list[str] = []
        self._store_template: str | None = None
        if self._run_as is not None:
            entry = pwd.getpwnam(self._run_as)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    @classmethod
    def start(cls, parent: Path | None = None) -> PostgresServer:
        """Create and start a cluster in a new directory under ``parent`` (default: the system's
        temporary directory); raises RuntimeError with the server's log on failure."""
        bindir = find_bindir()
        if bindir is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl) found")
        server = cls(bindir, parent)
        try:
            server._initdb()
            server._pg_ctl(
                "start",
                "-w",
                "-t",
                "60",
                "-l",
                str(server.root / "server.log"),
                "-o",
                " ".join(f"-c {setting}" for setting in _SETTINGS)
                + f" -p {server.port} -k {server.root}",
            )
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def base_url(self) -> str:
        """URL of the maintenance database."""
        return self.url("postgres")

    def url(self, database: str) -> str:
        """SQLAlchemy URL of a database of this server."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "store", template: str | None = None) -> str:
        """Create an empty database (or a copy of the database ``template``) and return its
        URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        copy = f' TEMPLATE "{template}"' if template else ""
        self.execute(f'CREATE DATABASE "{name}"{copy}')
        self.databases.append(self.url(name))
        return self.url(name)

    def store_template(self) -> str:
        """The name of a database holding an empty store at the code's schema revision, made
        once by the code's own migrations: a store copied from it skips them."""
        if self._store_template is None:
            from tbconvert.store.engine import create_store_engine
            from tbconvert.store.migrate import ensure_schema

            name = f"template_{os.getpid()}"
            self.execute(f'CREATE DATABASE "{name}"')
            engine = create_store_engine(self.url(name))
            try:
                ensure_schema(engine)
            finally:
                engine.dispose()
            self._store_template = name
        return self._store_template

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        """Run one statement in autocommit mode; returns its rows (if any)."""
        import psycopg

        conninfo = f"host=127.0.0.1 port={self.port} user={self.user} dbname={database}"
        with psycopg.connect(conninfo, autocommit=True) as connection:
            cursor = connection.execute(sql)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def password_role(self, name: str, password: str) -> None:
        """Create a login role that must give its password (the rest of the server stays
        trust): for tests of a wrong password."""
        self.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        hba = self.root / "data" / "pg_hba.conf"
        hba.write_text(f"host all {name} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self._pg_ctl("reload")
        self.execute("SELECT pg_reload_conf()")

    def stop(self) -> None:
        """Stop the server at once and delete its files."""
        if (self.root / "data" / "postmaster.pid").exists():
            self._pg_ctl("stop", "-m", "immediate", "-w", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        """The server's log so far (for failure messages)."""
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def _initdb(self) -> None:
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.root / "data"),
                "-A",
                "trust",
                "-U",
                self.user,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), *args], check=check)

    def _run(self, command: list[str], check: bool = True) -> None:
        result = subprocess.run(
            command, user=self._run_as, cwd=self.root, capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{Path(command[0]).name} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}{self.log()}"
            )


def _unprivileged_user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and no 'postgres' user to run the server as")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
