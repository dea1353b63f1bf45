"""Initial schema: runs, contexts, series, event files, scalars, conversions, and the views.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

VIEWS = {
    "v_runs": """
        SELECT r.id AS run_id, r.logdir, r.run_path, r.group_path, r.name,
               (SELECT min(f.first_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
                   AS first_wall_time,
               (SELECT max(f.last_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
                   AS last_wall_time
        FROM runs AS r
    """,
    "v_scalars": """
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag,
               p.step, p.wall_time, p.value
        FROM scalars AS p
        JOIN series AS s ON s.id = p.series_id
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id
    """,
    # The last point of each series: highest step, then the last written (file, offset).
    "v_last_scalars": """
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag,
               p.step, p.wall_time, p.value
        FROM series AS s
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id
        JOIN scalars AS p ON p.series_id = s.id
         AND (p.step, p.file_id, p.record_offset, p.value_index) = (
            SELECT q.step, q.file_id, q.record_offset, q.value_index
            FROM scalars AS q
            WHERE q.series_id = s.id
            ORDER BY q.step DESC, q.file_id DESC, q.record_offset DESC, q.value_index DESC
            LIMIT 1)
    """,
}


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", Id, primary_key=True),
        sa.Column("logdir", sa.Text(), nullable=False),
        sa.Column("run_path", sa.Text(), nullable=False),
        sa.Column("group_path", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("logdir", "run_path", name="uq_runs_logdir_run_path"),
    )
    op.create_index("ix_runs_group_path", "runs", ["group_path"])
    op.create_table(
        "contexts",
        sa.Column("id", Id, primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_contexts"),
        sa.UniqueConstraint("name", name="uq_contexts_name"),
    )
    op.create_table(
        "series",
        sa.Column("id", Id, primary_key=True),
        sa.Column("run_id", Id, nullable=False),
        sa.Column("context_id", Id, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("plugin", sa.Text(), nullable=False),
        sa.Column("dtype", sa.Text(), nullable=True),
        sa.Column("display_name", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("plugin_content", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_series_run_id_runs"),
        sa.ForeignKeyConstraint(
            ["context_id"], ["contexts.id"], name="fk_series_context_id_contexts"
        ),
        sa.UniqueConstraint(
            "run_id",
            "context_id",
            "name",
            "plugin",
            name="uq_series_run_id_context_id_name_plugin",
        ),
    )
    op.create_index("ix_series_name", "series", ["name"])
    op.create_table(
        "event_files",
        sa.Column("id", Id, primary_key=True),
        sa.Column("run_id", Id, nullable=False),
        sa.Column("context_id", Id, nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("head_digest", sa.Text(), nullable=True),
        sa.Column("offset_consumed", sa.BigInteger(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("damaged_records", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("first_wall_time", sa.Double(), nullable=True),
        sa.Column("last_wall_time", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_event_files"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_event_files_run_id_runs"),
        sa.ForeignKeyConstraint(
            ["context_id"], ["contexts.id"], name="fk_event_files_context_id_contexts"
        ),
        sa.UniqueConstraint("run_id", "path", name="uq_event_files_run_id_path"),
    )
    op.create_table(
        "scalars",
        sa.Column("series_id", Id, nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("file_id", Id, nullable=False),
        sa.Column("record_offset", sa.BigInteger(), nullable=False),
        sa.Column("value_index", sa.Integer(), nullable=False),
        sa.Column("wall_time", sa.Double(), nullable=True),
        sa.Column("value", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint(
            "series_id", "step", "file_id", "record_offset", "value_index", name="pk_scalars"
        ),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_scalars_series_id_series"),
        sa.ForeignKeyConstraint(
            ["file_id"], ["event_files.id"], name="fk_scalars_file_id_event_files"
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "conversions",
        sa.Column("id", Id, primary_key=True),
        sa.Column("logdir", sa.Text(), nullable=False),
        sa.Column("tool_version", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("options", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_conversions"),
    )
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
    for table in ("conversions", "scalars", "event_files", "series", "contexts", "runs"):
        op.drop_table(table)
