"""What the layout read of a remote logdir's files (#37): ``file_heads``.

The layout (design §3) tells a writer's sub-directory from a run by the tags of the first
records of the directory's first event file.  For a logdir in an object store those records
cost a request per directory on every pass; this table keeps, per source and file (its path
relative to the logdir), the tags read and the size and time the file had then.  A file
listed with the same size and time is not fetched again: a re-run over unchanged objects
fetches nothing.  It is a cache: a row that no longer matches is read again and replaced.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "file_heads",
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("source", "path", name="pk_file_heads"),
    )


def downgrade() -> None:
    op.drop_table("file_heads")
