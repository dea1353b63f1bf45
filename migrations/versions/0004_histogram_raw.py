"""Histograms as TensorBoard shows them, with the HistogramProto's own buckets kept raw.

Until 0003 a ``HistogramProto`` was stored with every bucket, the first one running from
``min`` to the first limit (backwards on torch and Keras files, whose first limit lies below
``min``) and the last one ending at the last limit (DBL_MAX on TF's ladder).  TensorBoard
drops the empty buckets at both ends and uses ``min`` and ``max`` as the outer edges; the
``buckets`` column now holds that, and the new ``raw_buckets`` column the proto's buckets as
written, ``[[bucket_limit, bucket], ...]`` (NULL for TF2 ``[k, 3]`` tensors, which are
TensorBoard's form already).

Rows stored before this revision are rewritten the same way.  A proto row is told from a
tensor row by its ``sum`` or ``sum_squares`` (a tensor has neither); a proto whose sum and sum
of squares were both NaN (stored as NULL) cannot be told apart and keeps its old buckets.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

KEY = ("series_id", "step", "file_id", "record_offset", "value_index")
# Frozen copy of the view of 0002/0003: dropped around the change of ``histograms`` (a batch
# rebuild on SQLite breaks a view naming the table).
V_HISTOGRAMS = """
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step,
               p.wall_time, p.count, p.min, p.max, p.buckets
        FROM histograms AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
"""
_TABLE = sa.table(
    "histograms",
    *(sa.column(name) for name in KEY),
    sa.column("min", sa.Double()),
    sa.column("max", sa.Double()),
    sa.column("sum", sa.Double()),
    sa.column("sum_squares", sa.Double()),
    sa.column("buckets", sa.Text()),
    sa.column("raw_buckets", sa.Text()),
)


def _number(value: float | None) -> str:
    """A float as the JSON of the histograms plugin: ±inf as ±1e999, NaN as null."""
    if value is None or math.isnan(value):
        return "null"
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    return repr(float(value))


def _json(rows: Iterable[Sequence[float | None]]) -> str:
    return "[" + ",".join("[" + ",".join(_number(x) for x in row) + "]" for row in rows) + "]"


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _shown(low: float, high: float, limits: list[float], counts: list[float]) -> list[Any]:
    """TensorBoard's buckets: empty end buckets dropped, min and max as the outer edges."""
    filled = [index for index, count in enumerate(counts) if count > 0]
    if not filled:
        return []
    first, last = filled[0], filled[-1]
    inner = limits[first:last]
    return list(zip([low, *inner], [*inner, high], counts[first : last + 1], strict=True))


def _rewrite_proto_rows() -> None:
    bind = op.get_bind()
    proto = sa.or_(_TABLE.c.sum.is_not(None), _TABLE.c.sum_squares.is_not(None))
    found = bind.execute(
        sa.select(
            *(_TABLE.c[name] for name in KEY), _TABLE.c.min, _TABLE.c.max, _TABLE.c.buckets
        ).where(proto)
    ).all()
    update = (
        sa.update(_TABLE)
        .where(*(_TABLE.c[name] == sa.bindparam(f"key_{name}") for name in KEY))
        .values(buckets=sa.bindparam("new_buckets"), raw_buckets=sa.bindparam("new_raw"))
    )
    changes = []
    for row in found:
        old = json.loads(row.buckets)  # [[left, right, count], ...], right = bucket_limit
        limits = [_float(bucket[1]) for bucket in old]
        counts = [_float(bucket[2]) for bucket in old]
        low, high = _float(row.min), _float(row.max)
        changes.append(
            {
                **{f"key_{name}": getattr(row, name) for name in KEY},
                "new_buckets": _json(_shown(low, high, limits, counts)),
                "new_raw": _json(zip(limits, counts, strict=True)),
            }
        )
    if changes:
        bind.execute(update, changes)


def upgrade() -> None:
    op.execute("DROP VIEW IF EXISTS v_histograms")
    with op.batch_alter_table("histograms") as batch:
        batch.add_column(sa.Column("raw_buckets", sa.Text(), nullable=True))
    _rewrite_proto_rows()
    op.execute(f"CREATE VIEW v_histograms AS {V_HISTOGRAMS}")


def downgrade() -> None:
    """Back to 0003's form: every raw bucket, the first one starting at ``min``."""
    bind = op.get_bind()
    found = bind.execute(
        sa.select(*(_TABLE.c[name] for name in KEY), _TABLE.c.min, _TABLE.c.raw_buckets).where(
            _TABLE.c.raw_buckets.is_not(None)
        )
    ).all()
    update = (
        sa.update(_TABLE)
        .where(*(_TABLE.c[name] == sa.bindparam(f"key_{name}") for name in KEY))
        .values(buckets=sa.bindparam("new_buckets"))
    )
    changes = []
    for row in found:
        raw = json.loads(row.raw_buckets)
        limits = [_float(limit) for limit, _ in raw]
        lefts = [_float(row.min), *limits[:-1]]
        triples = zip(lefts, limits, (_float(count) for _, count in raw), strict=True)
        changes.append(
            {**{f"key_{name}": getattr(row, name) for name in KEY}, "new_buckets": _json(triples)}
        )
    if changes:
        bind.execute(update, changes)
    op.execute("DROP VIEW IF EXISTS v_histograms")
    with op.batch_alter_table("histograms") as batch:
        batch.drop_column("raw_buckets")
    op.execute(f"CREATE VIEW v_histograms AS {V_HISTOGRAMS}")
