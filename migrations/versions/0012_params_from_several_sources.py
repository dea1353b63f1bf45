"""One rule for params from several sources (#44, design §6).

``v_params`` showed a run's key twice where an event file's hparams session and a sidecar
(``hparams.yaml``, ``params.json``) both held it, and the sidecar's rows had gone through
protobuf's ``Value``: ``[0]`` stored as ``[0.0]``, ``2`` as ``2.0``, with the file's mtime as
their wall time (so a copy, an upload or a ``touch`` changed ``v_series``).  Now:

* ``v_params`` shows a sidecar's row only where no event file of its run holds the key (and no
  sidecar named before it does): the event file's value, what TensorBoard shows.  The rule is
  in the view, so it holds whatever order files come and go in; ``ix_params_series_id_key``
  makes its look-up of a key an index seek.
* Sidecar rows have no wall time: cleared here, with their series' summaries.
* Their types cannot be recovered from the stored text (``2.0`` was written ``2`` or ``2.0``):
  the sidecars are marked changed, so the next plain ``tbconvert tf`` reads them again, whole,
  and replaces their rows with ones typed as written.  A sidecar deleted since keeps its rows
  as they were (the history of a deleted file, design §7).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Frozen copies: later code may change its own rule, never this revision's.
_SIDECARS = "'hparams.yaml', 'params.json'"
_PARAMS = """
        SELECT r.id AS run_id, r.run_path, c.name AS context, p.key, p.value, p.value_num,
               p.value_type
        FROM params AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
"""
# ``r.id``, not ``s.run_id``: SQLite then tests the rule after a filter on the run, not before.
_SHOWN = f"""
        WHERE s.name NOT IN ({_SIDECARS}) OR NOT EXISTS (
            SELECT 1 FROM series AS o JOIN params AS q ON q.series_id = o.id
            WHERE o.run_id = r.id AND o.plugin = 'hparams' AND q.key = p.key
              AND (o.name NOT IN ({_SIDECARS}) OR o.name < s.name))
"""
_SIDECAR_SERIES = f"SELECT id FROM series WHERE plugin = 'hparams' AND name IN ({_SIDECARS})"
_SIDECAR_FILES = (
    "path IN ('hparams.yaml', 'params.json') "
    "OR path LIKE '%/hparams.yaml' OR path LIKE '%/params.json'"
)


def upgrade() -> None:
    # The rule looks a key up by series: key is last in the primary key.
    op.create_index("ix_params_series_id_key", "params", ["series_id", "key"])
    op.execute("DROP VIEW v_params")
    op.execute(f"CREATE VIEW v_params AS {_PARAMS}{_SHOWN}")
    op.execute(f"UPDATE params SET wall_time = NULL WHERE series_id IN ({_SIDECAR_SERIES})")
    op.execute(
        "UPDATE series_summaries SET first_wall_time = NULL, last_wall_time = NULL, "
        f"last_point_wall_time = NULL WHERE series_id IN ({_SIDECAR_SERIES})"
    )
    # A time no file has: the planner's "changed", so the next run reads them again.
    op.execute(
        f"UPDATE event_files SET mtime_ns = -1 WHERE status <> 'gone' AND ({_SIDECAR_FILES})"
    )


def downgrade() -> None:
    op.execute("DROP VIEW v_params")
    op.execute(f"CREATE VIEW v_params AS {_PARAMS}")
    op.drop_index("ix_params_series_id_key", table_name="params")
