"""Getting data out of a store: long-format CSV and JSON lines, pandas frames, text listings.

Long-format rows have the columns of the public views (SPEC §6): ``scalars`` those of
``v_scalars``, ``texts`` of ``v_texts``, ``params`` of ``v_params``.  They are streamed series
by series, so an export needs little memory whatever the store's size.

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
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO

from converter.errors import ConverterError, UsageError

if TYPE_CHECKING:
    import pandas

    from converter.store.reader import Globs, Store

KINDS = ("scalars", "params", "texts")
FORMATS = ("csv", "jsonl")
COLUMNS = {
    "scalars": ("run_id", "run_path", "context", "tag", "step", "wall_time", "value"),
    "texts": ("run_id", "run_path", "context", "tag", "step", "wall_time", "idx", "value"),
    "params": ("run_id", "run_path", "context", "key", "value", "value_num", "value_type"),
}
_PLUGIN = {"scalars": "scalars", "texts": "text", "params": "hparams"}
Metric = str | tuple[str, str]


class MissingDependency(ConverterError, ImportError):
    """An optional dependency is not installed; the hint names the extra that brings it."""


def require_pandas() -> Any:
    """Import pandas, or say which extra installs it.

    Raises:
        MissingDependency: pandas is not installed.
    """
    try:
        import pandas
    except ImportError as error:
        raise MissingDependency("this needs pandas, which is not installed",
                                hint="pip install 'tbconvert[pandas]'") from error
    return pandas


def rows(store: Store, kind: str, run: Globs = None, tag: Globs = None,
         context: Globs = None) -> Iterator[tuple[Any, ...]]:
    """Long-format rows of one kind, in run, context, tag (or key) and step order.

    The filters are checked now; the rows are read as they are consumed.

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` or ``params``.
        run: Globs on run paths.
        tag: Globs on tags (text tags also match without ``/text_summary``); for ``params``,
            on keys.
        context: Globs on contexts.

    Raises:
        UsageError: an unknown kind.
    """
    from converter.store.reader import globs, matches

    if kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", hint=f"choose from {', '.join(KINDS)}")
    key_globs = globs(tag) if kind == "params" else ()
    chosen = store.series(run=run, tag=None if kind == "params" else tag, context=context,
                          plugin=_PLUGIN[kind])
    points = store.points(kind, chosen)
    return (row for row in points if kind != "params" or matches(row[3], key_globs))


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
        return "{" + ", ".join(f"{json.dumps(str(key), ensure_ascii=False)}: "
                               f"{_dumps_non_finite(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_dumps_non_finite(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def write_rows(columns: Sequence[str], data: Iterable[Sequence[Any]], out: TextIO,
               fmt: str = "csv") -> int:
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
    directory = os.path.dirname(os.path.abspath(output))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tbconvert-", dir=directory)
    except OSError as error:
        raise ConverterError(f"cannot write here: {error.strerror or error}", path=output,
                             hint="check that the directory exists and is writable") from error
    try:
        with open(handle, "w", encoding="utf-8", newline="") as out:
            yield out
        os.replace(temporary, output)
    except BaseException:
        os.unlink(temporary)
        raise


def export(store: Store, kind: str, output: str = "-", fmt: str | None = None,
           run: Globs = None, tag: Globs = None, context: Globs = None) -> int:
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


def hparams_table(store: Store, metrics: Sequence[Metric] = (),
                  run: Globs = None) -> list[dict[str, Any]]:
    """One row per hparams session: run, context, every param key, then each metric.

    Args:
        store: An open store.
        metrics: Tags, or ``(context, tag)`` pairs, whose last value (highest step, then last
            written) becomes a column named by the tag (``context/tag`` for a pair).  A bare
            tag is looked up in the session's own context, then in the run's ``''`` context,
            then in the only context of the run that has it.
        run: Globs on run paths.

    Returns:
        Dicts with ``run_id``, ``run_path``, ``context``, the params (every key of the store,
        sorted; None where a session lacks one), then the metrics (None where not found).
    """
    from converter.store.reader import globs, matches

    sessions = store.param_sessions()
    last = {(row["run_id"], row["context"], row["tag"]): row["value"]
            for row in store.query("SELECT run_id, context, tag, value FROM v_last_scalars")}
    keys = sorted({key for by_context in sessions.values() for values in by_context.values()
                   for key in values})
    table = []
    runs = sorted(store.query("SELECT run_id, run_path, logdir FROM v_runs"),
                  key=lambda run: (run["logdir"], run["run_path"], run["run_id"]))
    for entry in ({"run_id": run["run_id"], "run_path": run["run_path"]} for run in runs):
        if not matches(entry["run_path"], globs(run)):
            continue
        for context, values in sessions.get(entry["run_id"], {}).items():
            row = {**entry, "context": context, **{key: values.get(key) for key in keys}}
            for metric in metrics:
                name = metric if isinstance(metric, str) else "/".join(metric)
                row[name] = _metric_value(last, entry["run_id"], context, metric)
            table.append(row)
    return table


def _metric_value(last: dict[tuple[Any, ...], Any], run_id: int, context: str,
                  metric: Metric) -> Any:
    if not isinstance(metric, str):
        return last.get((run_id, *metric))
    for where in (context, ""):
        if (run_id, where, metric) in last:
            return last[(run_id, where, metric)]
    found = [value for (owner, _, tag), value in last.items() if (owner, tag) == (run_id, metric)]
    return found[0] if len(found) == 1 else None


def to_pandas(store: Store, kind: str = "scalars", **filters: Any) -> pandas.DataFrame:
    """A pandas DataFrame of ``runs``, ``scalars``, ``texts``, ``params`` or ``hparams``.

    Args:
        store: An open store.
        kind: ``scalars``, ``texts`` and ``params`` are long format (the views' columns;
            NaN where a scalar is NULL); ``runs`` is :meth:`Store.runs`; ``hparams`` is
            :func:`hparams_table` (wide: one column per param and metric).
        **filters: Keyword arguments of :func:`rows`, ``Store.runs`` or :func:`hparams_table`.

    Raises:
        MissingDependency: pandas is not installed (``pip install 'tbconvert[pandas]'``).
        UsageError: an unknown kind.
    """
    library = require_pandas()
    frame: pandas.DataFrame
    if kind == "runs":
        frame = library.DataFrame(store.runs(**filters))
    elif kind == "hparams":
        frame = library.DataFrame(hparams_table(store, **filters))
    else:
        frame = library.DataFrame.from_records(list(rows(store, kind, **filters)),
                                               columns=list(COLUMNS[kind]))
    if kind == "scalars":
        frame = frame.astype({"step": "int64", "wall_time": "float64", "value": "float64"})
    return frame


def render_table(columns: Sequence[str], data: Sequence[Sequence[Any]],
                 indent: str = "") -> str:
    """An aligned plain-text table: numbers right-aligned, text left-aligned."""
    cells = [[_cell(value) for value in row] for row in data]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(columns)]
    numeric = [bool(data) and all(isinstance(row[i], (int, float)) or row[i] is None
                                  for row in data) for i in range(len(columns))]
    lines = [list(columns), *cells]
    return "\n".join(indent + "  ".join(
        value.rjust(width) if right else value.ljust(width)
        for value, width, right in zip(line, widths, numeric, strict=True)).rstrip()
        for line in lines)


def render_runs(runs: Sequence[dict[str, Any]]) -> str:
    """The ``tbconvert runs`` listing: one line per run."""
    if not runs:
        return "no runs in this store"
    columns = ("run", "group", "contexts", "series", "points", "params")
    return render_table(columns, [
        (row["run_path"], row["group_path"] or "-", ",".join(map(_context, row["contexts"])),
         row["series"], ", ".join(f"{table} {n}" for table, n in row["points"].items()) or "-",
         _params_line(row["params"])) for row in runs])


def render_run(detail: dict[str, Any]) -> str:
    """The ``tbconvert show`` text: the run, its series per plugin, params and files."""
    run = detail["run"]
    lines = [f"run      {run['run_path']}  (id {run['run_id']}, name {run['name']})",
             f"logdir   {run['logdir']}", f"group    {run['group_path'] or '-'}",
             f"written  {_time(run['first_wall_time'])} .. {_time(run['last_wall_time'])}"]
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for series in detail["series"]:
        by_plugin.setdefault(series["plugin"], []).append(series)
    for plugin, series_list in sorted(by_plugin.items()):
        lines += ["", f"{plugin} ({len(series_list)} series)", render_table(
            ("context", "tag", "points", "steps", "last value"),
            [(_context(s["context"]), s["tag"], s["points"], _steps(s),
              _value(s.get("last_value", ""))) for s in series_list], indent="  ")]
    sessions = len(detail["params"])
    lines += ["", f"params ({sessions} session{'' if sessions == 1 else 's'})"]
    lines += [f"  {_context(context)}: {_params_line({context: values})}"
              for context, values in detail["params"].items()]
    lines += ["", f"files ({len(detail['files'])})", render_table(
        ("path", "context", "bytes", "read to", "records", "damaged", "status"),
        [(f["path"], _context(f["context"]), f["size"], f["offset_consumed"], f["records"],
          f["damaged_records"], f["status"] + (f": {f['last_error']}" if f["last_error"]
                                                else "")) for f in detail["files"]],
        indent="  ")]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _context(name: str) -> str:
    return name if name else "''"


def _steps(series: dict[str, Any]) -> str:
    if series["first_step"] is None:
        return "-"
    return f"{series['first_step']}..{series['last_step']}"


def _value(value: Any) -> str:
    if value is None:
        return "NaN"  # a NULL scalar is a logged NaN (SPEC §6)
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 40 else text[:39] + "…"


def _time(wall_time: float | None) -> str:
    if wall_time is None:
        return "-"
    return datetime.fromtimestamp(wall_time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _params_line(sessions: dict[str, dict[str, Any]]) -> str:
    # One value per key, or every value the sessions gave it, in context order.
    values: dict[str, list[Any]] = {}
    for params in sessions.values():
        for key, value in params.items():
            if value not in values.setdefault(key, []):
                values[key].append(value)
    return " ".join(f"{key}={'|'.join(map(_param, found))}"
                    for key, found in sorted(values.items())) or "-"


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:.6g}" if isinstance(value, float) else str(value)
