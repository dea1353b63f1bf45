"""Getting data out of a store into files: CSV, JSON, JSON lines, Parquet, image files.

Long-format rows are those of the public views (``query.tables.rows``), streamed series by
series, so a CSV, JSON or Parquet export of them needs little memory whatever the store's size
(the ``--wide`` step x series table, grouped scalars and the hparams table are built in
memory).  The whole store as a partitioned Parquet dataset is ``output.dataset``.  The format
comes from the file's extension, so a typo never writes CSV into ``results.xlsx``.

JSON has no NaN or infinity: NaN is written as ``null`` (as the store holds it) and
+/-infinity as ``1e999`` / ``-1e999``, which is valid JSON that Python, JavaScript and pandas
read back as infinities.  CSV writes ``NaN``, ``inf`` and ``-inf``; an empty cell is a value
that is not there (a step a series did not log, in ``--wide``), which JSON leaves out.
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

from tbconvert.errors import ConverterError, MissingDependency, UsageError, import_extra
from tbconvert.filters import Globs
from tbconvert.output.arrow import arrow_schema, arrow_table
from tbconvert.output.choices import EXPORT_FORMATS as FORMATS
from tbconvert.output.choices import EXPORT_KINDS as KINDS
from tbconvert.output.choices import RESUMED_DEFAULT
from tbconvert.output.image_export import export_images
from tbconvert.query.groups import Grouping, scalars_grouped
from tbconvert.query.metrics import Metric, column_name
from tbconvert.query.tables import COLUMNS, hparams_table, require_pandas, rows, to_pandas
from tbconvert.store.engine import expand_path

if TYPE_CHECKING:
    from tbconvert.query.store import Store

TEXT_FORMATS = ("csv", "json", "jsonl")
EXTENSIONS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}
# The public names of earlier versions, kept: tbconvert.output.export.hparams_table and friends.
__all__ = [
    "COLUMNS",
    "FORMATS",
    "KINDS",
    "MissingDependency",
    "dumps",
    "export",
    "export_images",
    "format_for",
    "hparams_table",
    "open_output",
    "require_pandas",
    "rows",
    "table_of",
    "to_pandas",
    "wide_scalars",
    "write_parquet",
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
    columns: Sequence[str],
    data: Iterable[Sequence[Any]],
    out: TextIO,
    fmt: str = "csv",
    *,
    omit_missing: bool = False,
) -> int:
    """Write rows as CSV (with a header), one JSON array of objects, or JSON lines; with
    ``omit_missing``, a None cell (a value that is not there) is a key left out of JSON.

    Returns:
        The number of rows written.

    Raises:
        UsageError: an unknown format (Parquet is binary: see :func:`write_parquet`).
    """
    if fmt not in TEXT_FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint=f"choose from {', '.join(TEXT_FORMATS)}")
    count = 0
    writer = csv.writer(out, lineterminator="\n")
    if fmt == "csv":
        writer.writerow(columns)
    elif fmt == "json":
        out.write("[")
    for row in data:
        if fmt == "csv":
            writer.writerow(["NaN" if value != value else value for value in row])
        else:
            separator = ("," if count else "") + "\n" if fmt == "json" else ""
            record = zip(columns, row, strict=True)
            line = dumps({name: v for name, v in record if v is not None or not omit_missing})
            out.write(separator + line + ("\n" if fmt == "jsonl" else ""))
        count += 1
    if fmt == "json":
        out.write("\n]\n" if count else "]\n")
    return count


def format_for(output: str, fmt: str | None) -> str:
    """The format asked for, else the one the file's extension names; ``-`` is CSV.

    Raises:
        UsageError: no format was asked for and the extension is not one of ours.
    """
    if fmt is not None:
        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}", hint=f"choose from {', '.join(FORMATS)}")
        return fmt
    if output == "-":
        return "csv"
    extension = os.path.splitext(output)[1].lower()
    if extension not in EXTENSIONS:
        raise UsageError(
            f"cannot tell the format of {output!r} from its extension",
            hint="name the file " + ", ".join(f"*{name}" for name in EXTENSIONS) + ", or use -",
        )
    return EXTENSIONS[extension]


@contextmanager
def open_output(output: str) -> Iterator[TextIO]:
    """Standard output for ``-``; else a file that appears only once complete.

    Raises:
        ConverterError: the file cannot be created.
    """
    if output == "-":
        yield sys.stdout
        return
    with (
        _replaced_when_done(expand_path(output)) as temporary,
        open(temporary, "w", encoding="utf-8", newline="") as out,
    ):
        yield out


# The Arrow types of the long-format kinds' columns, so that their rows are written a batch
# at a time (other tables are built whole: their columns' types are only known at the end).
PARQUET_TYPES = {
    "scalars": ("int64", "string", "string", "string", "int64", "float64", "float64"),
    "texts": ("int64", "string", "string", "string", "int64", "float64", "int64", "string"),
    "params": ("int64", "string", "string", "string", "string", "float64", "string"),
}
PARQUET_BATCH_ROWS = 65536


def write_parquet(
    columns: Sequence[str],
    data: Iterable[Sequence[Any]],
    output: str,
    types: Sequence[str] | None = None,
) -> int:
    """Write rows to a Parquet file (the ``parquet`` extra: pyarrow), created once complete.

    With ``types`` (Arrow type names, one per column) the rows are written a batch at a
    time, in bounded memory.  Without, the table is built whole, and a column whose values
    pyarrow cannot give one type (an hparam that is a number in one session and text in
    another) is written as text.

    Returns:
        The number of rows written.

    Raises:
        MissingDependency: pyarrow is not installed.
        ConverterError: the file cannot be created.
    """
    pq = import_extra("pyarrow.parquet", "parquet", "Parquet")
    if types is None:
        table = _whole_table(columns, data)
        with _replaced_when_done(expand_path(output)) as temporary:
            pq.write_table(table, temporary)
        return int(table.num_rows)
    schema = arrow_schema(zip(columns, types, strict=True))
    count = 0
    with (
        _replaced_when_done(expand_path(output)) as temporary,
        pq.ParquetWriter(temporary, schema) as writer,
    ):
        for batch in _batches(data, PARQUET_BATCH_ROWS):
            writer.write_table(arrow_table(batch, schema))
            count += len(batch)
        if not count:
            writer.write_table(schema.empty_table())
    return count


def _batches(data: Iterable[Sequence[Any]], size: int) -> Iterator[list[Sequence[Any]]]:
    batch: list[Sequence[Any]] = []
    for row in data:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _whole_table(columns: Sequence[str], data: Iterable[Sequence[Any]]) -> Any:
    import pyarrow as pa

    values: list[list[Any]] = [[] for _ in columns]
    for row in data:
        for column, value in zip(values, row, strict=True):
            column.append(value)
    arrays = []
    for column in values:
        try:
            arrays.append(pa.array(column))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays.append(pa.array([None if v is None else str(v) for v in column]))
    return pa.Table.from_arrays(arrays, names=list(columns))


@contextmanager
def _replaced_when_done(output: str) -> Iterator[str]:
    # A temporary file beside ``output`` that takes its name only once written.
    if os.path.isdir(output):
        raise ConverterError(
            "is a directory", path=output, hint="give the name of the file to write"
        )
    directory = os.path.dirname(os.path.abspath(output))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tbconvert-", dir=directory)
    except OSError as error:
        raise ConverterError(
            f"cannot write here: {error.strerror or error}",
            path=output,
            hint="check that the directory exists and is writable",
        ) from error
    os.close(handle)
    try:
        yield temporary
        # mkstemp makes the file private (0600); the result gets a new file's usual mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, output)
    except BaseException:
        os.unlink(temporary)
        raise


def table_of(
    store: Store,
    kind: str,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    *,
    wide: bool = False,
    metrics: Sequence[Metric] = (),
    agg: str = "last",
    grouping: Grouping | None = None,
    resumed: str = RESUMED_DEFAULT,
) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
    """The columns and rows an export of ``kind`` writes (see :func:`export`).

    Raises:
        UsageError: an unknown kind, or ``wide`` or ``grouping`` for another kind than
            scalars (or both together).
    """
    if (wide or grouping is not None) and kind != "scalars":
        what = "--wide is" if wide else "--group-by and --aggregate-over are"
        raise UsageError(f"{what} for scalars only", hint="leave it out, or export scalars")
    if grouping is not None:
        if wide:
            raise UsageError("--wide and --group-by do not go together", hint="choose one")
        return scalars_grouped(store, grouping, run, tag, context, resumed)
    if kind == "hparams":
        table = hparams_table(store, metrics=metrics, run=run, agg=agg, resumed=resumed)
        names = ["run_id", "run_path", "context", *(_metric_name(m) for m in metrics)]
        columns = list(table[0]) if table else names
        return columns, [[row[name] for name in columns] for row in table]
    if wide:
        return wide_scalars(store, run=run, tag=tag, context=context, resumed=resumed)
    found = rows(store, kind, run=run, tag=tag, context=context, resumed=resumed)
    if kind == "scalars":  # the store holds NaN as NULL
        found = (row if row[-1] is not None else (*row[:-1], math.nan) for row in found)
    return COLUMNS[kind], found


def wide_scalars(
    store: Store,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    resumed: str = RESUMED_DEFAULT,
) -> tuple[list[str], list[list[Any]]]:
    """Scalars as a step x series table: ``step``, then one column per ``run_path/context/tag``.

    A cell is the series' value at that step (the last written one when a resumed run logged
    the step twice; NaN as NaN), None where the series has no point at that step.
    A column name two sources share gets ``@run_id`` added.
    """
    chosen = store.series(run=run, tag=tag, context=context, plugin="scalars")
    names = [f"{s.run_path}/{s.context}/{s.tag}" for s in chosen]
    shared = {name for name in names if names.count(name) > 1}
    names = [
        f"{name}@{s.run_id}" if name in shared else name
        for name, s in zip(names, chosen, strict=True)
    ]
    index = {s.id: position for position, s in enumerate(chosen)}
    by_step: dict[int, list[Any]] = {}
    for series, points in store.points_by_series("scalars", chosen, resumed):
        for _, _, _, _, step, _, value in points:
            cells = by_step.setdefault(step, [None] * len(chosen))
            cells[index[series.id]] = math.nan if value is None else value
    return ["step", *names], [[step, *by_step[step]] for step in sorted(by_step)]


def _metric_name(metric: Metric) -> str:
    return metric if isinstance(metric, str) else column_name(metric[1], metric[0])


def export(
    store: Store,
    kind: str,
    output: str = "-",
    fmt: str | None = None,
    run: Globs = None,
    tag: Globs = None,
    context: Globs = None,
    *,
    wide: bool = False,
    metrics: Sequence[Metric] = (),
    agg: str = "last",
    grouping: Grouping | None = None,
    resumed: str = RESUMED_DEFAULT,
) -> int:
    """Export one kind of rows to a file or standard output (``-``).

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` or ``params`` (long format, the views' columns),
            ``hparams`` (:func:`hparams_table`: one row per session), or ``images`` (one file
            per image under the directory ``output``: see :func:`export_images`).
        output: A file name, or ``-`` for CSV on standard output.
        fmt: ``csv``, ``json`` (one array), ``jsonl`` or ``parquet``; default: from the file's
            extension.
        run: Globs on run paths.
        tag: Globs on tags (on keys, for params).
        context: Globs on contexts.
        wide: Scalars as a step x series table (:func:`wide_scalars`).
        metrics: For hparams: the metric tags, ``CONTEXT:TAG`` (or ``(context, tag)`` pairs)
            to add.
        agg: For hparams: ``last``, ``min`` or ``max`` of each metric.
        grouping: Scalars aggregated over the runs of each group
            (:func:`~tbconvert.query.groups.scalars_grouped`).
        resumed: ``current`` (the default): each scalar series as its last attempt left it
            (``v_scalars_current``), or ``all``: every record.

    Returns:
        The number of rows (images) written.

    Raises:
        UsageError: an unknown kind or format, or a file name whose extension names none.
    """
    if kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", hint=f"choose from {', '.join(KINDS)}")
    if kind == "images":
        return export_images(store, output, run=run, tag=tag, context=context)
    chosen = format_for(output, fmt)
    if chosen == "parquet" and output == "-":
        raise UsageError("Parquet is not written to standard output", hint="give -o FILE.parquet")
    with store.snapshot():  # every row as of one moment, however many reads it takes
        columns, data = table_of(
            store,
            kind,
            run,
            tag,
            context,
            wide=wide,
            metrics=metrics,
            agg=agg,
            grouping=grouping,
            resumed=resumed,
        )
        if chosen == "parquet":
            long_format = not wide and grouping is None and kind in PARQUET_TYPES
            types = PARQUET_TYPES[kind] if long_format else None
            return write_parquet(columns, data, output, types)
        with open_output(output) as out:
            return write_rows(columns, data, out, chosen, omit_missing=wide)
