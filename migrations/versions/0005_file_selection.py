"""The store is a function of the logdir (#13): what each file was read under, and a last
point that does not depend on the order files were met.

* ``event_files.selection``: the plugins and tags a file's points were read under, as
  canonical JSON (NULL: everything).  A file is skipped only when it was read to its end under
  a selection that covers the current one.
* Status ``reading``: a file whose read stopped between two chunks (a crash, Ctrl-C).  Such a
  file used to keep the status ``partial`` of a torn tail, and the size and mtime of the whole
  file, so later runs skipped it as unchanged: every ``partial`` row becomes ``reading``, and
  the next run reads on from its offset (a torn tail costs one look at its last bytes).
* Files stored twice, once under their old (run, context) marked ``gone`` and once where they
  are now (``--flat`` switched before this revision): the ``gone`` copy goes, with its points,
  and series and runs left with nothing go too.
* ``v_last_scalars``: "then last written" is the file later in name order (TensorBoard reads a
  directory's files in that order), not the file the store happened to meet last: the file ids
  of a store depend on its history, the view must not.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

POINT_TABLES = ("scalars", "images", "histograms", "texts", "params", "audio", "tensors")

_OWNER = "r.id AS run_id, r.run_path, c.name AS context, s.name AS tag"
_SERIES_OWNER = """
        FROM series AS s
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id"""
# Frozen copies of 0003's view, for the downgrade.
_OLD_ORDER = "q.step DESC, q.file_id DESC, q.record_offset DESC, q.value_index DESC"
OLD_LAST_SCALARS = {
    "sqlite": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        JOIN scalars AS p ON p.series_id = s.id
         AND (p.step, p.file_id, p.record_offset, p.value_index) = (
            SELECT q.step, q.file_id, q.record_offset, q.value_index
            FROM scalars AS q WHERE q.series_id = s.id
            ORDER BY {_OLD_ORDER} LIMIT 1)
    """,
    "postgresql": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        CROSS JOIN LATERAL (
            SELECT q.step, q.wall_time, q.value FROM scalars AS q WHERE q.series_id = s.id
            ORDER BY {_OLD_ORDER} LIMIT 1) AS p
    """,
}
# The highest step is one probe of the clustered key; only the points at that step are sorted
# by file name (byte order on both backends), offset and position.
_AT_LAST_STEP = """
            FROM scalars AS q JOIN event_files AS f ON f.id = q.file_id
            WHERE q.series_id = s.id
              AND q.step = (SELECT max(m.step) FROM scalars AS m WHERE m.series_id = s.id)"""
LAST_SCALARS = {
    "sqlite": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        JOIN scalars AS p ON p.series_id = s.id
         AND (p.step, p.file_id, p.record_offset, p.value_index) = (
            SELECT q.step, q.file_id, q.record_offset, q.value_index {_AT_LAST_STEP}
            ORDER BY f.path DESC, q.record_offset DESC, q.value_index DESC LIMIT 1)
    """,
    "postgresql": f"""
        SELECT {_OWNER}, p.step, p.wall_time, p.value {_SERIES_OWNER}
        CROSS JOIN LATERAL (
            SELECT q.step, q.wall_time, q.value {_AT_LAST_STEP}
            ORDER BY f.path COLLATE "C" DESC, q.record_offset DESC, q.value_index DESC
            LIMIT 1) AS p
    """,
}


def _replace_last_scalars(views: dict[str, str]) -> None:
    name = op.get_bind().dialect.name
    op.execute("DROP VIEW IF EXISTS v_last_scalars")
    op.execute(f"CREATE VIEW v_last_scalars AS {views.get(name, views['sqlite'])}")


def _drop_doubled_gone_files() -> None:
    """Delete the ``gone`` rows of files present again under another (run, context) of the
    same source, their points, and the series and runs that leaves empty."""
    doubled = """
        SELECT f.id FROM event_files AS f JOIN runs AS r ON r.id = f.run_id
        WHERE f.status = 'gone' AND EXISTS (
            SELECT 1 FROM event_files AS g JOIN runs AS t ON t.id = g.run_id
            WHERE g.path = f.path AND t.source = r.source AND g.status <> 'gone')
    """
    ids = [row[0] for row in op.get_bind().execute(sa.text(doubled)).all()]
    if not ids:
        return
    marks = ", ".join(str(int(file_id)) for file_id in ids)
    for table in POINT_TABLES:
        op.execute(f"DELETE FROM {table} WHERE file_id IN ({marks})")
    op.execute(f"DELETE FROM event_files WHERE id IN ({marks})")
    unused = " AND ".join(
        f"NOT EXISTS (SELECT 1 FROM {table} AS p WHERE p.series_id = series.id)"
        for table in POINT_TABLES
    )
    op.execute(f"DELETE FROM series WHERE {unused}")
    op.execute(
        "DELETE FROM runs WHERE NOT EXISTS (SELECT 1 FROM event_files AS f "
        "WHERE f.run_id = runs.id) AND NOT EXISTS (SELECT 1 FROM series AS s "
        "WHERE s.run_id = runs.id)"
    )


def upgrade() -> None:
    op.add_column("event_files", sa.Column("selection", sa.Text(), nullable=True))
    op.execute("UPDATE event_files SET status = 'reading' WHERE status = 'partial'")
    _drop_doubled_gone_files()
    _replace_last_scalars(LAST_SCALARS)


def downgrade() -> None:
    _replace_last_scalars(OLD_LAST_SCALARS)
    op.execute("UPDATE event_files SET status = 'partial' WHERE status = 'reading'")
    # A plain DROP COLUMN (SQLite >= 3.35): a batch rebuild of ``event_files`` would drop a
    # table the point tables' foreign keys name.
    op.drop_column("event_files", "selection")
