"""Run sources for shared stores, and views that plan well on PostgreSQL.

A run was identified by (logdir, run_path); on a server fed by several machines two logdirs
can have the same path.  Runs now belong to a ``source`` (the logdir's absolute path unless
the user names it) and remember the ``host`` that first wrote them.  ``v_runs`` gains the
source; ``v_last_scalars`` uses a LATERAL join on PostgreSQL, whose planner turns the
correlated row-value subquery into a scan of every point.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Frozen copies of the views of 0001 and 0002: they must be dropped around the rebuild of
# ``runs`` on SQLite (a view naming a table being rebuilt breaks the rebuild).
_OWNER = "r.id AS run_id, r.run_path, c.name AS context, s.name AS tag"
_JOINS = """
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
"""
_RUN_SPAN = """
        (SELECT min(f.first_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS first_wall_time,
        (SELECT max(f.last_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS last_wall_time"""
_LAST_ORDER = "q.step DESC, q.file_id DESC, q.record_offset DESC, q.value_index DESC"
POINT_VIEWS = {
    "v_scalars": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value
        FROM scalars AS p {_JOINS}
    """,
    "v_images": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.idx, p.format, p.width, p.height, b.data
        FROM images AS p {_JOINS} JOIN blobs AS b ON b.id = p.blob_id
    """,
    "v_histograms": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.count, p.min, p.max, p.buckets
        FROM histograms AS p {_JOINS}
    """,
    "v_texts": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.idx, p.value
        FROM texts AS p {_JOINS}
    """,
    "v_params": f"""
        SELECT r.id AS run_id, r.run_path, c.name AS context, p.key, p.value, p.value_num,
               p.value_type
        FROM params AS p {_JOINS}
    """,
    "v_audio": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.idx, p.sample_rate, b.data
        FROM audio AS p {_JOINS} JOIN blobs AS b ON b.id = p.blob_id
    """,
    "v_tensors": f"""
        SELECT {_OWNER}, s.plugin, p.step, p.wall_time, p.dtype, p.shape, b.data
        FROM tensors AS p {_JOINS} JOIN blobs AS b ON b.id = p.blob_id
    """,
}
_SERIES_OWNER = """
        FROM series AS s
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id"""
LAST_SCALARS = {
    "sqlite": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        JOIN scalars AS p ON p.series_id = s.id
         AND (p.step, p.file_id, p.record_offset, p.value_index) = (
            SELECT q.step, q.file_id, q.record_offset, q.value_index
            FROM scalars AS q WHERE q.series_id = s.id
            ORDER BY {_LAST_ORDER} LIMIT 1)
    """,
    "postgresql": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        CROSS JOIN LATERAL (
            SELECT q.step, q.wall_time, q.value FROM scalars AS q WHERE q.series_id = s.id
            ORDER BY {_LAST_ORDER} LIMIT 1) AS p
    """,
}
OLD_RUNS = f"""
        SELECT r.id AS run_id, r.logdir, r.run_path, r.group_path, r.name, {_RUN_SPAN}
        FROM runs AS r
"""
NEW_RUNS = f"""
        SELECT r.id AS run_id, r.logdir, r.run_path, r.group_path, r.name, {_RUN_SPAN},
               r.source, r.host
        FROM runs AS r
"""


def _views(runs: str) -> dict[str, str]:
    name = op.get_bind().dialect.name
    last = LAST_SCALARS.get(name, LAST_SCALARS["sqlite"])
    return {"v_runs": runs, **POINT_VIEWS, "v_last_scalars": last}


def _drop_views() -> None:
    for name in ("v_runs", "v_last_scalars", *POINT_VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")


def _create_views(views: dict[str, str]) -> None:
    for name, body in views.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def upgrade() -> None:
    _drop_views()
    op.add_column("runs", sa.Column("source", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("host", sa.Text(), nullable=True))
    op.execute("UPDATE runs SET source = logdir")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("source", existing_type=sa.Text(), nullable=False)
        batch.drop_constraint("uq_runs_logdir_run_path", type_="unique")
        batch.create_unique_constraint("uq_runs_source_run_path", ["source", "run_path"])
    _create_views(_views(NEW_RUNS))


def downgrade() -> None:
    _drop_views()
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("uq_runs_source_run_path", type_="unique")
        batch.create_unique_constraint("uq_runs_logdir_run_path", ["logdir", "run_path"])
        batch.drop_column("host")
        batch.drop_column("source")
    views = _views(OLD_RUNS)
    views["v_last_scalars"] = LAST_SCALARS["sqlite"]
    _create_views(views)
