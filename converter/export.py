"""Getting data out of a store into files: long-format CSV and JSON lines.

The rows are those of ``store.query`` (the public views' columns), streamed series by series,
so an export needs little memory whatever the store's size.

JSON has no NaN or infinity: NaN is written as ``null`` (as the store holds it) and
+/-infinity as ``1e999`` / ``-1e999``, which is valid JSON that Python, JavaScript and pandas
read back as infinities.  CSV writes ``inf`` / ``-inf`` and leaves NaN cells empty.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from converter.errors import ConverterError, MissingDependency, UsageError
from converter.filters import Globs
from converter.store.engine import expand_path
from converter.store.query import (
    COLUMNS,
    KINDS,
    hparams_table,
    require_pandas,
    rows,
    to_pandas,
)

if TYPE_CHECKING:
    from converter.store.reader import Store

FORMATS = ("csv", "jsonl")
# The public names of earlier versions, kept: converter.export.hparams_table and friends.
__all__ = [
    "COLUMNS",
    "FORMATS",
    "KINDS",
    "MissingDependency",
    "dumps",
    "export",
    "format_for",
    "hparams_table",
    "open_output",
    "require_pandas",
    "rows",
    "to_pandas",
    "write_rows",
]


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON text for rows and documents: NaN as null, infinities as 1e999 / -1e999."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent)
    except ValueError:
        return _dumps_non_finite(value)


def _dumps_non_finite(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "null" if math.isnan(value) else ("1e999" if value > 0 else "-1e999")
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{json.dumps(str(key), ensure_ascii=False)}: {_dumps_non_finite(item)}"
                for key, item in value.items()
            )
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_dumps_non_finite(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def write_rows(
    columns: Sequence[str], data: Iterable[Sequence[Any]], out: TextIO, fmt: str = "csv"
) -> int:
    """Write rows as CSV (with a header) or JSON lines (one object per row).

    Returns:
        The number of rows written.

    Raises:
        UsageError: an unknown format.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint=f"choose from {', '.join(FORMATS)}")
    count = 0
    writer = csv.writer(out, lineterminator="\n")
    if fmt == "csv":
        writer.writerow(columns)
    for row in data:
        if fmt == "csv":
            writer.writerow(row)
        else:
            out.write(dumps(dict(zip(columns, row, strict=True))) + "\n")
        count += 1
    return count


def format_for(output: str, fmt: str | None) -> str:
    """The format asked for, else the one the file name suggests, else CSV."""
    if fmt is not None:
        return fmt
    return "jsonl" if output.lower().endswith((".jsonl", ".ndjson", ".json")) else "csv"


@contextmanager
def open_output(output: str) -> Iterator[TextIO]:
    """Standard output for ``-``; else a file that appears only once complete.

    Raises:
        ConverterError: the file cannot be created.
    """
    if output == "-":
        yield sys.stdout
        return
    output = expand_path(output)
    directory = os.path.dirname(os.path.abspath(output))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tbconvert-", dir=directory)
    except OSError as error:
        raise ConverterError(
            f"cannot write here: {error.strerror or error}",
            path=output,
            hint="check that the directory exists and is writable",
        ) from error
    try:
        with open(handle, "w", encoding="utf-8", newline="") as out:
            yield out
        os.replace(temporary, output)
    except BaseException:
        os.unlink(temporary)
        raise


def export(
    store: Store,
    kind: str,
    output: str = "-",
    fmt: str | None = None,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
) -> int:
    """Export one kind of rows (see :func:`rows`) to a file or standard output (``-``).

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` or ``params``.
        output: A file name, or ``-`` for standard output.
        fmt: ``csv`` or ``jsonl``; default from the file name, else ``csv``.
        run: Globs on run paths.
        tag: Globs on tags (on keys, for params).
        context: Globs on contexts.

    Returns:
        The number of rows written.
    """
    data = rows(store, kind, run=run, tag=tag, context=context)
    with open_output(output) as out:
        return write_rows(COLUMNS[kind], data, out, format_for(output, fmt))
