"""The binary COPY stream NumPy writes for a server's scalars (``writing.pg_copy``).

The oracle is PostgreSQL itself: the stream is copied into a table of the point table's
column types and read back, and must give every row as written, NaN as NULL (``value IS
NULL`` means NaN), ±inf, -0.0 and the extremes of each width kept; a table that does not fit
the fixed widths is refused, so the caller writes it row by row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import BigInteger, Double, Integer, LargeBinary, Text

from tbconvert.rows import POINT_COLUMNS, _with_file, packed_dtype
from tbconvert.store import models
from tbconvert.writing.pg_copy import POINT_TYPES, Stream, encodable

_TYPES = POINT_TYPES["scalars"]
_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
_rows = st.lists(
    st.tuples(
        st.integers(0, 2**31 - 1),  # series_id (int4)
        st.integers(-(2**63), 2**63 - 1),  # step
        st.integers(-(2**63), 2**63 - 1),  # record offset
        _floats,  # wall time
        _floats,  # value
    ),
    max_size=60,
)


# PostgreSQL's name of each column type, as binary COPY spells it (most specific first:
# BigInteger is an Integer).
_PG_NAMES = (
    (BigInteger, "int8"),
    (Integer, "int4"),
    (Double, "float8"),
    (LargeBinary, "bytea"),
    (Text, "text"),
)


def _pg_name(column: Any) -> str:
    return next(name for kind, name in _PG_NAMES if isinstance(column.type, kind))


def test_the_copy_types_are_the_models_column_types() -> None:
    for table, columns in POINT_COLUMNS.items():
        definition = models.Base.metadata.tables[table]
        assert POINT_TYPES[table] == tuple(_pg_name(definition.c[name]) for name in columns)


def _table(rows: list[tuple[Any, ...]], file_id: int) -> np.ndarray:
    packed = np.array(rows, dtype=packed_dtype())
    return _with_file(packed, file_id, value_index=True)


def _nan_rows(table: np.ndarray) -> np.ndarray:
    return np.isnan(table["wall_time"]) | np.isnan(table["value"])


def _same(stored: Any, written: float) -> bool:
    if math.isnan(written):
        return stored is None
    return stored == written and math.copysign(1, stored) == math.copysign(1, written)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=_rows, file_id=st.integers(0, 2**31 - 1), piece_rows=st.integers(1, 70))
def test_the_server_reads_back_every_row_as_written(
    pg_server: Any, rows: list[tuple[Any, ...]], file_id: int, piece_rows: int
) -> None:
    table = _table(rows, file_id)
    assert encodable(table, _TYPES)
    columns = ", ".join(
        f"{name} {kind}" for name, kind in zip(POINT_COLUMNS["scalars"], _TYPES, strict=True)
    )
    with psycopg.connect(pg_server.url("postgres").replace("+psycopg", "")) as connection:
        cursor = connection.cursor()
        cursor.execute(f"CREATE TEMPORARY TABLE t ({columns})")
        # The stream as a server's conversion sends it: piece by piece, each made when sent.
        pieces = list(Stream(table, _TYPES).pieces(piece_rows))
        # Pieces of any size make the same stream as one piece of every row.
        assert b"".join(pieces) == b"".join(Stream(table, _TYPES).pieces(len(rows) + 1))
        # Rows without NaN, piece_rows at a time; then those with NaN and the trailer.
        assert len(pieces) == -(-int((~_nan_rows(table)).sum()) // piece_rows) + 1
        with cursor.copy("COPY t FROM STDIN (FORMAT BINARY)") as copy:
            for piece in pieces:
                copy.write(piece)
        got = cursor.execute("SELECT * FROM t ORDER BY series_id, step, record_offset").fetchall()
    expected = sorted(
        ((s, p, file_id, o, 0, w, v) for s, p, o, w, v in rows), key=lambda row: row[:4]
    )
    assert len(got) == len(expected)
    # The key columns sort the same on both sides (duplicates keep their order unknown).
    assert sorted(row[:5] for row in got) == [row[:5] for row in expected]
    by_key: dict[tuple[Any, ...], list[tuple[Any, Any]]] = {}
    for row in got:
        by_key.setdefault(row[:5], []).append((row[5], row[6]))
    for row in expected:
        candidates = by_key[row[:5]]
        match = next(
            pair for pair in candidates if _same(pair[0], row[5]) and _same(pair[1], row[6])
        )
        candidates.remove(match)


def test_values_beyond_a_column_s_width_are_left_to_the_row_by_row_path() -> None:
    narrow = ["int4", "int8", "int4", "int8", "int4", "float8", "float8"]
    assert encodable(_table([(2**31 - 1, 0, 0, 0.0, 0.0)], -(2**31)), narrow)
    assert not encodable(_table([(2**31, 0, 0, 0.0, 0.0)], 1), narrow)
    assert not encodable(_table([(1, 0, 0, 0.0, 0.0)], -(2**31) - 1), narrow)
    assert not encodable(_table([(1, 0, 0, 0.0, 0.0)], 1), [*narrow[:6], "text"])
