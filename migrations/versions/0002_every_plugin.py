"""Every plugin: blobs, images, audio, histograms, texts, params, tensors, and their views.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KEY = ("series_id", "step", "file_id", "record_offset", "value_index")

# Every point view starts with where the value belongs.
_OWNER = "r.id AS run_id, r.run_path, c.name AS context, s.name AS tag"
_JOINS = """
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
"""
VIEWS = {
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


def _point_table(name: str, *columns: sa.Column, sub_key: tuple[str, ...] = ()) -> None:
    blob = any(column.name == "blob_id" for column in columns)
    op.create_table(
        name,
        *columns,
        sa.Column("series_id", Id, nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("file_id", Id, nullable=False),
        sa.Column("record_offset", sa.BigInteger(), nullable=False),
        sa.Column("value_index", sa.Integer(), nullable=False),
        sa.Column("wall_time", sa.Double(), nullable=True),
        *(
            [sa.ForeignKeyConstraint(["blob_id"], ["blobs.id"], name=f"fk_{name}_blob_id_blobs")]
            if blob
            else []
        ),
        sa.ForeignKeyConstraint(
            ["file_id"], ["event_files.id"], name=f"fk_{name}_file_id_event_files"
        ),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=f"fk_{name}_series_id_series"),
        sa.PrimaryKeyConstraint(*KEY, *sub_key, name=f"pk_{name}"),
        sqlite_with_rowid=False,
    )
    if blob:
        op.create_index(f"ix_{name}_blob_id", name, ["blob_id"])


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("id", Id, nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_blobs"),
        sa.UniqueConstraint("sha256", name="uq_blobs_sha256"),
    )
    _point_table(
        "images",
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("blob_id", Id, nullable=False),
        sa.Column("format", sa.Text(), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sub_key=("idx",),
    )
    _point_table(
        "audio",
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("blob_id", Id, nullable=False),
        sa.Column("sample_rate", sa.Double(), nullable=True),
        sa.Column("num_channels", sa.Integer(), nullable=True),
        sa.Column("length_frames", sa.BigInteger(), nullable=True),
        sa.Column("content_type", sa.Text(), nullable=True),
        sa.Column("label", sa.Text(), nullable=True),
        sub_key=("idx",),
    )
    _point_table(
        "histograms",
        sa.Column("count", sa.Double(), nullable=True),
        sa.Column("min", sa.Double(), nullable=True),
        sa.Column("max", sa.Double(), nullable=True),
        sa.Column("sum", sa.Double(), nullable=True),
        sa.Column("sum_squares", sa.Double(), nullable=True),
        sa.Column("buckets", sa.Text(), nullable=False),
    )
    _point_table(
        "texts",
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sub_key=("idx",),
    )
    _point_table(
        "params",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("value_num", sa.Double(), nullable=True),
        sa.Column("value_type", sa.Text(), nullable=False),
        sub_key=("key",),
    )
    _point_table(
        "tensors",
        sa.Column("dtype", sa.Text(), nullable=False),
        sa.Column("shape", sa.Text(), nullable=False),
        sa.Column("blob_id", Id, nullable=False),
    )
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
    for table in ("tensors", "params", "texts", "histograms", "audio", "images", "blobs"):
        op.drop_table(table)
