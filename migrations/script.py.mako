"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Rules for revisions of the tbconvert store:
- never import tbconvert.store.models: freeze table definitions inline;
- change existing tables through op.batch_alter_table; views name tables, so drop the views a
  batch rebuild touches first and create them again after (SQLite refuses otherwise);
- dialect-specific SQL (views) branches on op.get_bind().dialect.name;
- downgrade() must undo upgrade() or raise NotImplementedError with the reason.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
