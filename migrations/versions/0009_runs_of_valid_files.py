"""``v_runs`` leaves out runs that hold nothing but invalid files (#40): no series, an
invalid file, and no other file.

A file that holds no valid record (random bytes under an event file's name) is kept in
``event_files`` with status ``invalid``, so that the next conversion knows it and keeps saying
so; it needs a run to belong to, and that run showed in ``v_runs`` (and ``tbconvert runs``)
with nothing in it.  Such a run is left out now, until one of its files holds a record or a
series.  The file's damage is still said by every conversion while it is there.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_RUN_SPAN = """
        (SELECT min(f.first_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS first_wall_time,
        (SELECT max(f.last_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS last_wall_time"""
_COLUMNS = f"""
        SELECT r.id AS run_id, r.logdir, r.run_path, r.group_path, r.name, {_RUN_SPAN},
               r.source, r.host
        FROM runs AS r"""
RUNS = (
    _COLUMNS
    + """
        WHERE EXISTS (SELECT 1 FROM series AS s WHERE s.run_id = r.id)
           OR NOT EXISTS (SELECT 1 FROM event_files AS f WHERE f.run_id = r.id
                          AND f.status = 'invalid')
           OR EXISTS (SELECT 1 FROM event_files AS f WHERE f.run_id = r.id
                      AND f.status <> 'invalid')
"""
)


def upgrade() -> None:
    op.execute("DROP VIEW v_runs")
    op.execute(f"CREATE VIEW v_runs AS {RUNS}")


def downgrade() -> None:
    op.execute("DROP VIEW v_runs")
    op.execute(f"CREATE VIEW v_runs AS {_COLUMNS}")
