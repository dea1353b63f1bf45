"""Histograms and texts as ordinary rowid tables on SQLite (#14): their rows are wide.

A ``WITHOUT ROWID`` table holds a row in its B-tree leaf only up to about a quarter of a page
(1 KB at 4 KiB pages) and moves the rest to overflow pages of its own.  A histogram row (its
buckets as JSON, about 1.4 KB for 30 buckets) then took 4.5 KB: the mixed benchmark's store
was 40 MB instead of 16 MB, and each commit wrote the difference (0.40 s against 0.19 s of
its 1.7 s).  A rowid table holds rows of up to a page in its leaves; the primary key stays
what it was, kept in an index of its own.  Wide rows (histograms, texts) get this layout; the
narrow point tables keep theirs.

PostgreSQL has no such layout: nothing changes there.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import re

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

WIDE = ("histograms", "texts")
_HEAD = re.compile(r'^\s*CREATE\s+TABLE\s+("?)(\w+)\1', re.IGNORECASE)
_WITHOUT_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\s*$", re.IGNORECASE)


def _rebuild(with_rowid: bool) -> None:
    """Copy each wide table into one of the other layout, its DDL otherwise as it was.

    By hand rather than by a batch rebuild, which reflects the table and writes its foreign
    keys in an order that changes from one process to the next (the schema snapshot must
    not); the views and indexes that name the table are kept and made again, as a batch
    rebuild would lose them or fail on them (Alembic #1207)."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    for table in WIDE:
        ddl = bind.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).scalar_one()
        dependants = bind.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND ("
            "(type = 'view' AND sql LIKE ?) OR (type IN ('index', 'trigger') AND tbl_name = ?)"
            ") ORDER BY rowid",
            (f"%{table}%", table),
        ).all()
        for kind, name, _sql in dependants:
            if kind == "view":
                op.execute(f'DROP VIEW "{name}"')
        rebuilt = f"_rebuild_{table}"
        body = _WITHOUT_ROWID.sub(")", ddl.rstrip())
        body = _HEAD.sub(f'CREATE TABLE "{rebuilt}"', body, count=1)
        op.execute(body if with_rowid else f"{body} WITHOUT ROWID")
        op.execute(f'INSERT INTO "{rebuilt}" SELECT * FROM "{table}"')
        op.execute(f'DROP TABLE "{table}"')
        op.execute(f'ALTER TABLE "{rebuilt}" RENAME TO "{table}"')
        for _kind, _name, sql in dependants:
            op.execute(sql)


def upgrade() -> None:
    _rebuild(with_rowid=True)


def downgrade() -> None:
    _rebuild(with_rowid=False)
