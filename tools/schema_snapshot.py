"""Write the schema snapshot a fresh SQLite store replays (``migrate.snapshot_statements``).

    python tools/schema_snapshot.py      # after adding a migration

The snapshot is what the migrations leave in an empty SQLite database, as ``sqlite3``'s dump
of it, headed by the revision it is of; a test checks it against the migrations' head.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from tbconvert.store.migrate import SNAPSHOT, SNAPSHOT_REVISION_LINE, alembic_config, head_revision


def dump(revision: str) -> str:
    """The snapshot text: an empty SQLite database brought to ``revision`` by Alembic."""
    from alembic import command
    from sqlalchemy import create_engine

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
    return f"{SNAPSHOT_REVISION_LINE}{revision}\n" + "\n".join(lines) + "\n"


def main() -> int:
    """Write the snapshot of the migrations' head next to ``migrate``."""
    SNAPSHOT.write_text(dump(head_revision()), encoding="utf-8")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
