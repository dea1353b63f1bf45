"""The schema the migrations give an empty SQLite store, replayed without Alembic.

Importing Alembic and running every migration cost a fresh store about 0.3 CPU-s, a third
of a converter's start-up, paid again by every sweep or CI job converting into a new file
(issue #14).  ``sqlite_schema.sql`` holds what the migrations leave in an empty SQLite
database (``sqlite3``'s dump of it); :func:`statements` replays it.  It is only ever made by
running the migrations: after adding one, ``python -m converter.store.snapshot`` writes it
again, and a test fails until then (and checks that both ways give the same schema).  A
snapshot of another revision than the code's head is not used: Alembic runs as before.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from functools import cache
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("sqlite_schema.sql")
_REVISION_LINE = "-- revision "


@cache
def _read() -> tuple[str | None, tuple[str, ...]]:
    """(revision, statements) of the snapshot file; (None, ()) when it is missing."""
    try:
        text = SNAPSHOT.read_text(encoding="utf-8")
    except OSError:
        return None, ()
    revision = None
    found: list[str] = []
    pending = ""
    for line in text.splitlines(keepends=True):
        if not pending and line.startswith(_REVISION_LINE):
            revision = line[len(_REVISION_LINE) :].strip()
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    return revision, tuple(found)


def statements(revision: str) -> tuple[str, ...] | None:
    """The snapshot's statements when it is of ``revision``, else None."""
    found, script = _read()
    return script if found == revision and script else None


def dump(revision: str) -> str:
    """The snapshot text: an empty SQLite database brought to ``revision`` by Alembic."""
    from alembic import command
    from sqlalchemy import create_engine

    from converter.store.migrate import alembic_config

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "schema.db"
        engine = create_engine(f"sqlite:///{path}")
        try:
            with engine.begin() as conn:
                command.upgrade(alembic_config(conn), revision)
        finally:
            engine.dispose()
        raw = sqlite3.connect(path)
        try:
            lines = [
                line for line in raw.iterdump() if line not in ("BEGIN TRANSACTION;", "COMMIT;")
            ]
        finally:
            raw.close()
    return f"{_REVISION_LINE}{revision}\n" + "\n".join(lines) + "\n"


def main() -> int:
    """Write the snapshot of the migrations' head next to this module."""
    from converter.store.migrate import head_revision

    SNAPSHOT.write_text(dump(head_revision()), encoding="utf-8")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
