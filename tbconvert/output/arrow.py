"""Rows as Arrow tables, for every Parquet file the package writes (``export -o x.parquet``,
``export dataset``); pyarrow is imported only when called (the ``parquet`` extra)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["arrow_column", "arrow_schema", "arrow_table"]


def arrow_schema(columns: Iterable[tuple[str, str]]) -> Any:
    """An Arrow schema from (name, Arrow type name) pairs, e.g. ``("step", "int64")``."""
    import pyarrow as pa

    return pa.schema([(name, pa.type_for_alias(kind)) for name, kind in columns])


def arrow_column(values: Any, kind: Any) -> Any:
    """An Arrow array of Python values (None is null), through a NumPy object array, which
    pyarrow converts about three times faster than the list or tuple itself."""
    import numpy as np
    import pyarrow as pa

    if isinstance(values, np.ndarray):
        return pa.array(values, type=kind)
    objects = np.empty(len(values), dtype=object)
    objects[:] = values
    return pa.array(objects, type=kind)


def arrow_table(rows: Sequence[Sequence[Any]], schema: Any) -> Any:
    """A batch of rows, one value per field of ``schema`` each, as an Arrow table."""
    import pyarrow as pa

    columns = zip(*rows, strict=True)
    arrays = [
        arrow_column(values, field.type) for values, field in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
