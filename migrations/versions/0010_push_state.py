"""What was pushed into another tracker (#39): ``push_runs`` and ``push_marks``.

``tbconvert push mlflow`` sends a store's runs into an MLflow tracking server.  MLflow's
writes are not in the store's transaction, so the store keeps, per destination (tracker,
tracking URI and experiment):

* ``push_runs``: one row per pushed run: the tracker's id for it, and ``pending`` while a
  push of it may have sent points it has not marked yet (the next push compares with what the
  tracker holds before it sends anything of that run).
* ``push_marks``: per (series, point table, event file) the last point sent and acknowledged
  (its record offset and value index: points of a file are appended in that order), with the
  file's path and first-record digest when marked, so that a file replaced under the same id
  is pushed again.

Neither table declares foreign keys: the converter deletes runs, series and files (a file
moved to another run) with SQLite's enforcement off, and a mark that outlives its series
is simply never matched again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_runs",
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("remote_id", sa.Text(), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("pushed_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("destination", "run_id", name="pk_push_runs"),
    )
    op.create_table(
        "push_marks",
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("series_id", sa.BigInteger(), nullable=False),
        sa.Column("point_table", sa.Text(), nullable=False),
        sa.Column("file_id", sa.BigInteger(), nullable=False),
        sa.Column("file_path", sa.Text(), nullable=False),
        sa.Column("file_digest", sa.Text(), nullable=True),
        sa.Column("record_offset", sa.BigInteger(), nullable=False),
        sa.Column("value_index", sa.Integer(), nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "destination", "series_id", "point_table", "file_id", name="pk_push_marks"
        ),
    )


def downgrade() -> None:
    op.drop_table("push_marks")
    op.drop_table("push_runs")
