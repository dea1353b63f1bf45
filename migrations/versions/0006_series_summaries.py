"""A store that stays fast at 100M points (#16): per-series summaries and ``v_series``.

* ``series_summaries``: one row per (series, point table) with its point count, step and
  wall-time ranges, its last point (key, wall time, scalar value) and, for scalars, its
  value range.  The writer
  keeps it exact in the transaction of the points; this revision fills it from the points
  already stored (one ``GROUP BY`` per point table).
* ``v_last_scalars`` reads the last point there: one row per series instead of a scan of
  ``scalars`` with a subquery per row (9.6 s at 20M points before).
* ``v_series``: one row per series of every plugin, for listings and overviews.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

POINT_TABLES = ("scalars", "images", "histograms", "texts", "params", "audio", "tensors")
COLUMNS = (
    "series_id, point_table, points, first_step, last_step, first_wall_time, last_wall_time, "
    "last_file_id, last_record_offset, last_value_index, last_point_wall_time, last_value, "
    "min_value, max_value"
)
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# A typed NULL: PostgreSQL takes an untyped one in a subquery for text.
_NO_VALUE = "CAST(NULL AS DOUBLE PRECISION)"
_OWNER = "r.id AS run_id, r.run_path, c.name AS context, s.name AS tag"
_SERIES_OWNER = """
        JOIN series AS s ON s.id = m.series_id
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id"""
# The last point's step, wall time and value are in the summary: no point table is joined.
LAST_SCALARS = f"""
        SELECT {_OWNER}, m.last_step AS step, m.last_point_wall_time AS wall_time,
               m.last_value AS value
        FROM series_summaries AS m {_SERIES_OWNER}
        WHERE m.point_table = 'scalars'
"""
SERIES = f"""
        SELECT {_OWNER}, s.plugin, t.points, t.first_step, t.last_step, t.first_wall_time,
               t.last_wall_time, m.last_value, m.min_value, m.max_value
        FROM (SELECT series_id, CAST(sum(points) AS BIGINT) AS points,
                     min(first_step) AS first_step, max(last_step) AS last_step,
                     min(first_wall_time) AS first_wall_time,
                     max(last_wall_time) AS last_wall_time
              FROM series_summaries GROUP BY series_id) AS t
        JOIN series AS s ON s.id = t.series_id
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id
        LEFT JOIN series_summaries AS m ON m.series_id = t.series_id
         AND m.point_table = 'scalars'
"""

# 0005's view, frozen, for the downgrade.
_AT_LAST_STEP = """
            FROM scalars AS q JOIN event_files AS f ON f.id = q.file_id
            WHERE q.series_id = s.id
              AND q.step = (SELECT max(m.step) FROM scalars AS m WHERE m.series_id = s.id)"""
_OLD_SERIES_OWNER = """
        FROM series AS s
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id"""
OLD_LAST_SCALARS = {
    "sqlite": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_OLD_SERIES_OWNER}
        JOIN scalars AS p ON p.series_id = s.id
         AND (p.step, p.file_id, p.record_offset, p.value_index) = (
            SELECT q.step, q.file_id, q.record_offset, q.value_index {_AT_LAST_STEP}
            ORDER BY f.path DESC, q.record_offset DESC, q.value_index DESC LIMIT 1)
    """,
    "postgresql": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_OLD_SERIES_OWNER}
        CROSS JOIN LATERAL (
            SELECT q.step, q.wall_time, q.value {_AT_LAST_STEP}
            ORDER BY f.path COLLATE "C" DESC, q.record_offset DESC, q.value_index DESC
            LIMIT 1) AS p
    """,
}


def _fill(dialect: str) -> None:
    """Summarise every series from the points already stored."""
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    for table in POINT_TABLES:
        scalars = table == "scalars"
        low, high = ("min(value)", "max(value)") if scalars else (_NO_VALUE, _NO_VALUE)
        last = (
            "(SELECT q.{} FROM " + table + " AS q JOIN event_files AS f ON f.id = q.file_id "
            "WHERE q.series_id = a.series_id AND q.step = a.last_step "
            f"ORDER BY f.path{collate} DESC, q.record_offset DESC, q.value_index DESC LIMIT 1)"
        )
        op.execute(
            f"INSERT INTO series_summaries ({COLUMNS}) "
            f"SELECT a.series_id, '{table}', a.points, a.first_step, a.last_step, a.first_wall, "
            f"a.last_wall, {last.format('file_id')}, {last.format('record_offset')}, "
            f"{last.format('value_index')}, {last.format('wall_time')}, "
            f"{last.format('value') if scalars else _NO_VALUE}, a.low, a.high "
            "FROM (SELECT series_id, "
            "count(*) AS points, min(step) AS first_step, max(step) AS last_step, "
            f"min(wall_time) AS first_wall, max(wall_time) AS last_wall, {low} AS low, "
            f"{high} AS high FROM {table} GROUP BY series_id) AS a"
        )


def upgrade() -> None:
    op.create_table(
        "series_summaries",
        sa.Column("series_id", Id, nullable=False),
        sa.Column("point_table", sa.Text(), nullable=False),
        sa.Column("points", sa.BigInteger(), nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("first_wall_time", sa.Double(), nullable=True),
        sa.Column("last_wall_time", sa.Double(), nullable=True),
        sa.Column("last_file_id", Id, nullable=False),
        sa.Column("last_record_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_value_index", sa.Integer(), nullable=False),
        sa.Column("last_point_wall_time", sa.Double(), nullable=True),
        sa.Column("last_value", sa.Double(), nullable=True),
        sa.Column("min_value", sa.Double(), nullable=True),
        sa.Column("max_value", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("series_id", "point_table", name="pk_series_summaries"),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name="fk_series_summaries_series_id_series"
        ),
        sa.ForeignKeyConstraint(
            ["last_file_id"],
            ["event_files.id"],
            name="fk_series_summaries_last_file_id_event_files",
        ),
    )
    _fill(op.get_bind().dialect.name)
    op.execute("DROP VIEW IF EXISTS v_last_scalars")
    op.execute(f"CREATE VIEW v_last_scalars AS {LAST_SCALARS}")
    op.execute(f"CREATE VIEW v_series AS {SERIES}")


def downgrade() -> None:
    name = op.get_bind().dialect.name
    op.execute("DROP VIEW v_series")
    op.execute("DROP VIEW v_last_scalars")
    op.execute(
        f"CREATE VIEW v_last_scalars AS {OLD_LAST_SCALARS.get(name, OLD_LAST_SCALARS['sqlite'])}"
    )
    op.drop_table("series_summaries")
