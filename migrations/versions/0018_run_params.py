"""The value a selection reads of each run's param (#49): ``run_params``.

A condition on a param (``--where 'lr < 1e-3'``) ranked every params row of its key under the
rule of ``v_params`` at each query: about 400 ms of a selection at 10^5 runs.  The writer now
keeps the row the ranking picks, one per (run, key), in the transaction of the params rows;
``ix_run_params_key_value_num`` lets a condition on a number lead the plan.

Every run is filled here from its params rows, by the writer's own code
(``writing.run_params.fill``, the rule of ``store.params_rule``): the rows must be what the
writer keeps, and a frozen copy of the rule would be a second rule.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    from tbconvert.writing.run_params import fill
    from tbconvert.writing.statements import Statements

    op.create_table(
        "run_params",
        sa.Column("run_id", Id, nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("value_num", sa.Double(), nullable=True),
        sa.Column("value_type", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_params_run_id_runs"),
        sa.PrimaryKeyConstraint("run_id", "key", name="pk_run_params"),
    )
    op.create_index("ix_run_params_key_value_num", "run_params", ["key", "value_num", "run_id"])
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    statements = Statements(lambda: bind.connection.dbapi_connection, pyformat=postgres)
    fill(statements, bind.dialect.name)


def downgrade() -> None:
    op.drop_index("ix_run_params_key_value_num", table_name="run_params")
    op.drop_table("run_params")
