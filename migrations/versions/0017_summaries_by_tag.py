"""A series' summary carries the key of its series, so a tag's summaries are one index range
(#49): ``series_summaries`` gains ``run_id``, ``context_id``, ``name`` and ``plugin``.

A ``--where`` aggregate reads one summary per series of its tag.  With the tag only in
``series``, that was an index range of ``series`` and then a probe of the summaries' index per
series: at 100,000 runs, 45 ms of SQLite's 60 and a hash of every summary on PostgreSQL.
``ix_series_summaries_tag`` (point table, plugin, tag, run, context, series, whether it may
have several attempts, then every column an aggregate reads) answers it from one range of
index entries, and a run's series of a tag, where another series leads the selection, from
one probe; it replaces
``ix_series_summaries_values`` of revision 0014, which only that selection read.

A series' key never changes but by a move of its run or context, which the writer applies to
both tables in one transaction.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Frozen copy of models.SUMMARY_VALUE_COLUMNS of this revision.
_VALUES = (
    "last_value",
    "min_value",
    "max_value",
    "points",
    "value_sum",
    "value_count",
    "argmin_step",
    "argmax_step",
)
_KEY = ("run_id", "context_id", "name", "plugin")


def upgrade() -> None:
    op.add_column("series_summaries", sa.Column("run_id", Id, nullable=True))
    op.add_column("series_summaries", sa.Column("context_id", Id, nullable=True))
    op.add_column("series_summaries", sa.Column("name", sa.Text(), nullable=True))
    op.add_column("series_summaries", sa.Column("plugin", sa.Text(), nullable=True))
    op.execute(
        f"UPDATE series_summaries SET ({', '.join(_KEY)}) = (SELECT "
        f"{', '.join('s.' + column for column in _KEY)} FROM series AS s "
        "WHERE s.id = series_summaries.series_id)"
    )
    op.drop_index("ix_series_summaries_values", table_name="series_summaries")
    op.create_index(
        "ix_series_summaries_tag",
        "series_summaries",
        [
            "point_table",
            "plugin",
            "name",
            "run_id",
            "context_id",
            "series_id",
            "maybe_resumed",
            *_VALUES,
        ],
    )


def downgrade() -> None:
    op.drop_index("ix_series_summaries_tag", table_name="series_summaries")
    op.create_index(
        "ix_series_summaries_values", "series_summaries", ["series_id", "point_table", *_VALUES]
    )
    for column in reversed(_KEY):
        op.drop_column("series_summaries", column)
