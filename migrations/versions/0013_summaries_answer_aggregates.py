"""Series summaries that answer every aggregate of ``--where`` (#49).

``series_summaries`` gains, for scalars, what ``mean``, ``argmin`` and ``argmax`` need and
whether a series may hold several attempts, so that a selection reads no point:

* ``value_sum``: the sum of the finite values (NaN and +-inf left out; the infinities are in
  ``min_value``/``max_value``), ``value_count``: the values that are not NaN.
* ``argmin_step``, ``argmax_step``: the first step (in key order) holding the smallest and
  largest value.
* ``maybe_resumed``: the series' points come from more than one event file, or go back in
  step within their file (in record order).  A series without it has one attempt in the sense
  of ``query.resumed``, unless a ``SessionLog`` of its run says otherwise.

Every series is filled here from its points.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen copies of the writer's recount (writing.series_summaries.recount_sql) of this revision.
_FINITE = "CASE WHEN q.value - q.value = 0 THEN q.value END"
_ARG = (
    "(SELECT min(q.step) FROM scalars AS q WHERE q.series_id = series_summaries.series_id "
    "AND q.value = series_summaries.{})"
)
_GOES_BACK = (
    "SELECT 1 FROM (SELECT step, LAG(step) OVER (PARTITION BY file_id "
    "ORDER BY record_offset, value_index) AS before FROM scalars "
    "WHERE series_id = series_summaries.series_id) AS w WHERE w.step < w.before"
)
_FILL = f"""
    UPDATE series_summaries SET
        value_sum = (SELECT sum({_FINITE}) FROM scalars AS q
                     WHERE q.series_id = series_summaries.series_id),
        value_count = (SELECT count(q.value) FROM scalars AS q
                       WHERE q.series_id = series_summaries.series_id),
        argmin_step = {_ARG.format("min_value")},
        argmax_step = {_ARG.format("max_value")},
        maybe_resumed = ((SELECT count(DISTINCT q.file_id) FROM scalars AS q
                          WHERE q.series_id = series_summaries.series_id) > 1
                         OR EXISTS ({_GOES_BACK}))
    WHERE point_table = 'scalars'
"""


def upgrade() -> None:
    # Added in place (no batch copy on SQLite: views read the table).
    op.add_column("series_summaries", sa.Column("value_sum", sa.Double(), nullable=True))
    op.add_column("series_summaries", sa.Column("value_count", sa.BigInteger(), nullable=True))
    op.add_column("series_summaries", sa.Column("argmin_step", sa.BigInteger(), nullable=True))
    op.add_column("series_summaries", sa.Column("argmax_step", sa.BigInteger(), nullable=True))
    op.add_column(
        "series_summaries",
        sa.Column("maybe_resumed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.execute(_FILL)


def downgrade() -> None:
    for column in ("maybe_resumed", "argmax_step", "argmin_step", "value_count", "value_sum"):
        op.execute(f"ALTER TABLE series_summaries DROP COLUMN {column}")
