"""The aggregates of resumed series as their last attempt left them (#49): ``current_summaries``.

One row per scalar series that may have several attempts (its summary's ``maybe_resumed``,
or a ``SessionLog`` in its run and context): the aggregates of ``series_summaries`` over the
points its last attempt left, and the last point in write order, from which the writer adds
points in place.  ``--resumed current`` reads them instead of the series' points.

Every such series is filled here from its points, by the writer's own code
(``writing.current_summaries.fill``, the rule of ``store.attempts_rule``): the rows must be
what the writer keeps, and a frozen copy of a rule written in Python would be a second rule.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    from tbconvert.writing.current_summaries import fill
    from tbconvert.writing.statements import Statements

    op.create_table(
        "current_summaries",
        sa.Column("series_id", Id, nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("last_value", sa.Double(), nullable=True),
        sa.Column("min_value", sa.Double(), nullable=True),
        sa.Column("max_value", sa.Double(), nullable=True),
        sa.Column("value_sum", sa.Double(), nullable=True),
        sa.Column("value_count", sa.BigInteger(), nullable=True),
        sa.Column("argmin_step", sa.BigInteger(), nullable=True),
        sa.Column("argmax_step", sa.BigInteger(), nullable=True),
        sa.Column("all_points", sa.BigInteger(), nullable=False),
        sa.Column("written_file_id", Id, nullable=False),
        sa.Column("written_record_offset", sa.BigInteger(), nullable=False),
        sa.Column("written_value_index", sa.Integer(), nullable=False),
        sa.Column("written_step", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name="fk_current_summaries_series_id_series"
        ),
        sa.ForeignKeyConstraint(
            ["written_file_id"],
            ["event_files.id"],
            name="fk_current_summaries_written_file_id_event_files",
        ),
        sa.PrimaryKeyConstraint("series_id", name="pk_current_summaries"),
    )
    bind = op.get_bind()
    statements = Statements(
        lambda: bind.connection.dbapi_connection, pyformat=bind.dialect.name == "postgresql"
    )
    fill(statements)


def downgrade() -> None:
    op.drop_table("current_summaries")
