"""Indexes that answer a ``--where`` aggregate from index entries alone (#49).

At 100,000 runs, most of a selection's time went to look-ups of table rows: ``ix_series_name``
(``name``) found a tag's series but left each row to read for its plugin, context and run, and
each series' summary was a probe of the primary key's index and then of the row.

* ``ix_series_name_plugin`` (``name, plugin, context_id, run_id``, with ``id`` on PostgreSQL,
  where an index holds no row id) replaces ``ix_series_name``, whose column it starts with.
* ``ix_series_summaries_values`` (the key, then every column an aggregate reads) makes a
  series' summary one probe.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

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


def upgrade() -> None:
    op.create_index(
        "ix_series_name_plugin",
        "series",
        ["name", "plugin", "context_id", "run_id"],
        postgresql_include=["id"],
    )
    op.drop_index("ix_series_name", table_name="series")
    op.create_index(
        "ix_series_summaries_values", "series_summaries", ["series_id", "point_table", *_VALUES]
    )


def downgrade() -> None:
    op.drop_index("ix_series_summaries_values", table_name="series_summaries")
    op.create_index("ix_series_name", "series", ["name"])
    op.drop_index("ix_series_name_plugin", table_name="series")
