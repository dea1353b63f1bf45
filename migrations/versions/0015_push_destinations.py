"""Destinations as a user names them (#48): ``push_destinations``.

The runs and marks of a push are keyed by its destination, which for MLflow holds the
experiment's id (an experiment keeps its id when renamed), while a user names the experiment.
``push_destinations`` records, per (tracker, location, name), the destination a push to it
used, so that ``push mlflow --dry-run`` finds the marks from the store alone, without
opening MLflow (which creates a tracking store that is missing).  ``location`` is the
tracking URI without credentials, as in a destination.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_destinations",
        sa.Column("tracker", sa.Text(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("tracker", "location", "name", name="pk_push_destinations"),
    )


def downgrade() -> None:
    op.drop_table("push_destinations")
