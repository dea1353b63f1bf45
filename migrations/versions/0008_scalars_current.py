"""``v_scalars_current``: each scalar series as its last attempt left it (#38).

A run resumed from a checkpoint logs its steps again.  ``v_scalars`` keeps every record; this
view keeps what the last attempt left.  Going through a series' points in write order (its
files in path order, records in file order, values in record order), a point whose step is
less than the previous point's starts a new attempt and drops the earlier points whose step is
at or after its own (equal steps are not a restart).  A ``SessionLog.START`` event drops the
earlier points at or after its step in every series of its run and context.  That is
TensorBoard's purge of orphaned data, which it applies to TF1-era files and at session
starts only; on newer files it shows the zigzag its users complain about.

A point is kept when no later restart of its series, and no later session start of its run
and context, has a step at or below its own: the earliest such step after each point is a
window over the points that follow it.  Both dialects run the same SQL.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# A SessionLog whose status (field 1, a varint) is START (1) serialises as 08 01 first.
_STARTS_WITH_START = {
    "sqlite": "substr(b.data, 1, 2) = X'0801'",
    "postgresql": "substring(b.data from 1 for 2) = '\\x0801'::bytea",
}
_SESSION_STARTS = (
    "SELECT s.run_id, s.context_id, f.path, t.record_offset, t.step "
    "FROM tensors AS t JOIN series AS s ON s.id = t.series_id "
    "JOIN event_files AS f ON f.id = t.file_id JOIN blobs AS b ON b.id = t.blob_id "
    "WHERE s.plugin = 'session_log' AND {start}"
)
SCALARS_CURRENT = """
WITH ordered AS (
    SELECT p.series_id, s.run_id, s.context_id, s.name AS tag, f.path, p.record_offset,
           p.value_index, p.step, p.wall_time, p.value,
           CASE WHEN p.step < lag(p.step) OVER written THEN p.step END AS restart
    FROM scalars AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN event_files AS f ON f.id = p.file_id
    WINDOW written AS (PARTITION BY p.series_id ORDER BY f.path, p.record_offset, p.value_index)
), attempts AS (
    SELECT o.*, min(o.restart) OVER (
        PARTITION BY o.series_id ORDER BY o.path, o.record_offset, o.value_index
        ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
    ) AS later_restart
    FROM ordered AS o
)
SELECT r.id AS run_id, r.run_path, c.name AS context, a.tag, a.step, a.wall_time, a.value
FROM attempts AS a
JOIN runs AS r ON r.id = a.run_id
JOIN contexts AS c ON c.id = a.context_id
WHERE (a.later_restart IS NULL OR a.later_restart > a.step)
  AND NOT EXISTS (
    SELECT 1 FROM ({starts}) AS start
    WHERE start.run_id = a.run_id AND start.context_id = a.context_id
      AND start.step <= a.step
      AND (start.path > a.path OR (start.path = a.path AND start.record_offset > a.record_offset))
  )
"""


def scalars_current(dialect: str) -> str:
    """The view's query in ``dialect``."""
    starts = _SESSION_STARTS.format(start=_STARTS_WITH_START[dialect])
    return SCALARS_CURRENT.replace("{starts}", starts)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.execute(f"CREATE VIEW v_scalars_current AS {scalars_current(dialect)}")


def downgrade() -> None:
    op.execute("DROP VIEW v_scalars_current")
