"""Per-series summaries (``series_summaries``), kept exact in the transaction of the points.

One row per (series, point table): how many points, first and last step and wall time, the
key, wall time and (scalars) value of the last point (highest step, then the file later in
path byte order, then the record offset and value index: what ``v_last_scalars`` has always
meant), and for scalars the smallest and largest value.  ``v_series`` and ``v_last_scalars``
read them, so listing a store's series or their last values costs one row per series, never
a scan of the points.

Two ways keep them exact, both inside the writer's transaction:

* **Added rows.**  When every row of an insert was new (the driver's row count says so), the
  insert's own aggregates fold into the stored row: NumPy over its rows, then one select and
  one upsert per table.  An insert holds the rows of a whole group of small files (issue
  #14), so a series may get rows of several files at once: the last point among them is
  found by the same order as above, the files ranked by path.  An insert that stored
  nothing (the same bytes read again) changes nothing.
* **Anything else** (an insert that stored only part of its rows, points deleted with a
  replaced or moved file) recounts the series concerned from the point table, by SQL.

NaN is NULL in the point tables (``v_scalars``), so the aggregates here skip it, as SQL's
``min``/``max`` skip NULL.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from itertools import chain, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from tbconvert.rows import (
    POINT_TABLES,
    InsertRows,
    Row,
    join_packed,
    packed_columns,
)
from tbconvert.writing import current_summaries, run_params
from tbconvert.writing.current_summaries import first_step_of, pick
from tbconvert.writing.statements import Insert, Statements, id_list

if TYPE_CHECKING:
    import numpy as np

SUMMARY_COLUMNS = (
    "series_id",
    "point_table",
    "points",
    "first_step",
    "last_step",
    "first_wall_time",
    "last_wall_time",
    "last_file_id",
    "last_record_offset",
    "last_value_index",
    "last_point_wall_time",
    "last_value",
    "min_value",
    "max_value",
    "value_sum",
    "value_count",
    "argmin_step",
    "argmax_step",
    "maybe_resumed",
)
# The columns of a summary copied from its series (revision 0017): what it summarises.
SERIES_KEY_COLUMNS = ("run_id", "context_id", "name", "plugin")
_SERIES_KEY = ", ".join(f"s.{column}" for column in SERIES_KEY_COLUMNS)  # from ``series AS s``


class Summary(NamedTuple):
    """One ``series_summaries`` row."""

    series_id: int
    point_table: str
    points: int
    first_step: int
    last_step: int
    first_wall_time: float | None
    last_wall_time: float | None
    last_file_id: int
    last_record_offset: int
    last_value_index: int
    last_point_wall_time: float | None
    last_value: float | None
    min_value: float | None
    max_value: float | None
    value_sum: float | None
    value_count: int | None
    argmin_step: int | None
    argmax_step: int | None
    maybe_resumed: bool


_SUMMARY = partial(tuple.__new__, Summary)

# A typed NULL: PostgreSQL takes an untyped one in a subquery for text.
_NO_VALUE = "CAST(NULL AS DOUBLE PRECISION)"
_UPSERT = Insert(
    "series_summaries",
    SUMMARY_COLUMNS,
    " ON CONFLICT (series_id, point_table) DO UPDATE SET "
    + ", ".join(f"{column} = excluded.{column}" for column in SUMMARY_COLUMNS[2:]),
)
_FILE_PATH = "SELECT path FROM event_files WHERE id = :id"


def add_rows(
    statements: Statements,
    table: str,
    rows: InsertRows,
    unsummarised: set[int] | None = None,
    paths: Mapping[int, str] | None = None,
) -> list[int]:
    """Fold rows just inserted, all of them new, into the stored summaries of their series:
    one file's rows or a group's, in one aggregation whatever the number of files (on the
    driver's cursor: this runs for every group of a sweep).  ``unsummarised``: series known
    to have no summary row yet (made by the open transaction), whose look-up is skipped; they
    leave the set here.  ``paths``: the paths of the rows' files, where known (a tie on the
    last step between files is broken by path); the others are looked up when needed.
    Returns the series of the rows."""
    if not len(rows):
        return []
    known: dict[int, str] = dict(paths or {})

    def path_of(file_id: int) -> str:
        if file_id not in known:
            known[file_id] = statements.scalar(_FILE_PATH, {"id": file_id})
        return known[file_id]

    batch = {summary.series_id: summary for summary in _aggregate(table, rows, path_of)}
    if unsummarised:
        stored = _stored(statements, table, [i for i in batch if i not in unsummarised])
        unsummarised.difference_update(batch)
    else:
        stored = _stored(statements, table, list(batch))
    merged = [
        _merge(stored[series_id], summary, path_of) if series_id in stored else summary
        for series_id, summary in batch.items()
    ]
    statements.insert(_UPSERT, merged)  # a Summary is a tuple in the statement's order
    copy_series_keys(statements, [series_id for series_id in batch if series_id not in stored])
    return list(batch)


def copy_series_keys(statements: Statements, series_ids: Collection[int]) -> None:
    """Give the summaries of these series their series' key (``SERIES_KEY_COLUMNS``), which
    a selection reads from ``ix_series_summaries_tag`` instead of looking up each series."""
    if series_ids:
        marks = id_list(series_ids)
        keys = ", ".join(SERIES_KEY_COLUMNS)
        statements.run(
            f"UPDATE series_summaries SET ({keys}) = (SELECT {_SERIES_KEY} FROM series AS s "
            f"WHERE s.id = series_summaries.series_id) WHERE series_id IN ({marks})",
            {},
        )


def recount(
    statements: Statements,
    dialect: str,
    series_ids: Collection[int],
    tables: Iterable[str] = POINT_TABLES,
) -> None:
    """Summarise the given series again from their points (after a delete, or an insert
    that stored only some of its rows); a series left without points in a table loses
    its row there."""
    if not series_ids:
        return
    tables = list(tables)
    for statement in recount_sql(dialect, tables, series_ids):
        statements.run(statement, {})
    current_summaries.refresh(statements, series_ids, series_ids, recounted=True)
    if "params" in tables:
        run_params.refresh_series(statements, dialect, series_ids)


def recount_sql(
    dialect: str, tables: Iterable[str], series_ids: Collection[int] | None = None
) -> list[str]:
    """The statements that summarise series from their points: the given ones, or every
    series when ``series_ids`` is None.  Plain SQL, so that a test can run them on a copy of
    a store to check what the writer kept."""
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    only = ""
    if series_ids is not None:
        only = f" AND series_id IN ({id_list(series_ids)})"
    statements = []
    for table in tables:
        scalars = table == "scalars"
        low, high = ("min(value)", "max(value)") if scalars else (_NO_VALUE, _NO_VALUE)
        total, valued = ("sum(CASE WHEN value - value = 0 THEN value END)", "count(value)")
        if not scalars:
            total, valued = _NO_VALUE, "CAST(NULL AS BIGINT)"
        # The highest step is one probe of the clustered key; only the points at that step
        # are sorted by file path (byte order on both backends), offset and value index.
        last = (
            "(SELECT q.{} FROM " + table + " AS q JOIN event_files AS f ON f.id = q.file_id "
            "WHERE q.series_id = a.series_id AND q.step = a.last_step "
            f"ORDER BY f.path{collate} DESC, q.record_offset DESC, q.value_index DESC LIMIT 1)"
        )
        statements += [
            f"DELETE FROM series_summaries WHERE point_table = '{table}'{only}",
            f"INSERT INTO series_summaries ({', '.join((*SUMMARY_COLUMNS, *SERIES_KEY_COLUMNS))}) "
            f"SELECT a.series_id, '{table}', a.points, a.first_step, a.last_step, a.first_wall, "
            f"a.last_wall, {last.format('file_id')}, {last.format('record_offset')}, "
            f"{last.format('value_index')}, {last.format('wall_time')}, "
            f"{last.format('value') if scalars else _NO_VALUE}, a.low, a.high, a.total, "
            f"a.valued, {_first_step(table, 'low')}, {_first_step(table, 'high')}, "
            f"{_maybe_resumed_sql(table)}, "
            f"{_SERIES_KEY} "
            "FROM (SELECT series_id, "
            "count(*) AS points, min(step) AS first_step, max(step) AS last_step, "
            f"min(wall_time) AS first_wall, max(wall_time) AS last_wall, {low} AS low, "
            f"{high} AS high, {total} AS total, {valued} AS valued, "
            "count(DISTINCT file_id) AS files "
            f"FROM {table} WHERE 1 = 1{only} GROUP BY series_id) AS a "
            "LEFT JOIN series AS s ON s.id = a.series_id",
        ]
    return statements


def _first_step(table: str, extreme: str) -> str:
    if table != "scalars":
        return "CAST(NULL AS BIGINT)"
    return (
        f"(SELECT min(q.step) FROM {table} AS q "
        f"WHERE q.series_id = a.series_id AND q.value = a.{extreme})"
    )


def _maybe_resumed_sql(table: str) -> str:
    if table != "scalars":
        return "FALSE"
    return (
        "(a.files > 1 OR EXISTS (SELECT 1 FROM (SELECT q.step, LAG(q.step) OVER ("
        "ORDER BY q.record_offset, q.value_index) AS before FROM scalars AS q "
        "WHERE q.series_id = a.series_id) AS w WHERE w.step < w.before))"
    )


def series_of(table: str, rows: InsertRows) -> set[int]:
    """The series ids of some rows."""
    return {int(series_id) for series_id in set(_columns(table, rows)[0].tolist())}


def forget(statements: Statements, series_ids: Collection[int]) -> None:
    """Delete the summaries of series about to be deleted."""
    if series_ids:
        marks = id_list(series_ids)
        statements.run(f"DELETE FROM series_summaries WHERE series_id IN ({marks})", {})
        current_summaries.forget(statements, series_ids)


def _stored(
    statements: Statements, table: str, series_ids: list[int]
) -> dict[int, tuple[Summary, str]]:
    if not series_ids:
        return {}
    marks = id_list(series_ids)
    found = statements.all(
        f"SELECT {', '.join('m.' + column for column in SUMMARY_COLUMNS)}, f.path "
        "FROM series_summaries AS m JOIN event_files AS f ON f.id = m.last_file_id "
        f"WHERE m.point_table = :table AND m.series_id IN ({marks})",
        {"table": table},
    )
    return {row[0]: (Summary(*row[:-1]), row[-1]) for row in found}


def _merge(stored: tuple[Summary, str], new: Summary, path_of: Callable[[int], str]) -> Summary:
    old, old_path = stored
    if new.last_step != old.last_step:
        newer = new.last_step > old.last_step
    elif new.last_file_id == old.last_file_id:
        newer = (new.last_record_offset, new.last_value_index) > (
            old.last_record_offset,
            old.last_value_index,
        )
    else:
        newer = path_of(new.last_file_id).encode() > old_path.encode()
    last = new if newer else old
    return Summary(
        old.series_id,
        old.point_table,
        old.points + new.points,
        min(old.first_step, new.first_step),
        max(old.last_step, new.last_step),
        pick(min, old.first_wall_time, new.first_wall_time),
        pick(max, old.last_wall_time, new.last_wall_time),
        last.last_file_id,
        last.last_record_offset,
        last.last_value_index,
        last.last_point_wall_time,
        last.last_value,
        pick(min, old.min_value, new.min_value),
        pick(max, old.max_value, new.max_value),
        pick(_add, old.value_sum, new.value_sum),
        _add_counts(old.value_count, new.value_count),
        first_step_of(min, old.min_value, old.argmin_step, new.min_value, new.argmin_step),
        first_step_of(max, old.max_value, old.argmax_step, new.max_value, new.argmax_step),
        # Rows added to a file come after its stored ones: the steps go on from the last.
        old.maybe_resumed
        or new.maybe_resumed
        or (
            old.point_table == "scalars"
            and (new.last_file_id != old.last_file_id or new.first_step < old.last_step)
        ),
    )


def _add(old: float, new: float) -> float:
    return old + new


def _add_counts(old: int | None, new: int | None) -> int | None:
    return new if old is None else old if new is None else old + new


def _aggregate(
    table: str, rows: InsertRows, path_of: Callable[[int], str] | None = None
) -> list[Summary]:
    """Per series of the rows: the summary of those rows alone.  Rows of several files (a
    group's) rank the files by path, as ``v_last_scalars`` does, so ``path_of`` is asked for
    the path of each file only then."""
    import numpy as np

    series, step, file, offset, index, wall, value = _columns(table, rows)
    order = np.argsort(series, kind="stable")
    series, step, file, offset, index, wall = (
        column[order] for column in (series, step, file, offset, index, wall)
    )
    starts = np.flatnonzero(np.concatenate(([True], series[1:] != series[:-1])))
    counts = np.diff(np.append(starts, len(series)))
    last_step = np.maximum.reduceat(step, starts)
    segment = np.repeat(np.arange(len(starts)), counts)
    # The last point: among the rows at the highest step, the highest (path, offset, index).
    at_last = np.flatnonzero(step == last_step[segment])
    keys = [index[at_last], offset[at_last]]
    files = np.unique(file[at_last])
    if len(files) > 1:
        assert path_of is not None, "rows of several files need their paths"
        by_path = np.argsort([path_of(int(i)).encode() for i in files.tolist()], kind="stable")
        rank = np.empty(len(files), dtype=np.int64)
        rank[by_path] = np.arange(len(files))
        keys.append(rank[np.searchsorted(files, file[at_last])])
    ranked = at_last[np.lexsort((*keys, segment[at_last]))]
    ends = np.append(segment[ranked][1:] != segment[ranked][:-1], True)
    last = ranked[ends]
    columns: list[Any] = [
        series[starts],
        counts,
        np.minimum.reduceat(step, starts),
        last_step,
        _finite(np.fmin.reduceat(wall, starts)),
        _finite(np.fmax.reduceat(wall, starts)),
        file[last],
        offset[last],
        index[last],
        _finite(wall[last]),
    ]
    if value is None:
        columns += [[None] * len(starts)] * 7 + [[False] * len(starts)]
    else:
        value = value[order]
        low, high = np.fmin.reduceat(value, starts), np.fmax.reduceat(value, starts)
        finite = np.isfinite(value)
        # Finite values summing past the float range give an infinite sum (and mean), which
        # is the correctly rounded sum: nothing to warn a user about.
        with np.errstate(over="ignore"):
            sums = np.add.reduceat(np.where(finite, value, 0.0), starts)
        columns += [
            _finite(value[last]),
            _finite(low),
            _finite(high),
            _finite(np.where(np.add.reduceat(finite, starts) > 0, sums, np.nan)),
            np.add.reduceat(~np.isnan(value), starts),
            _first_steps(step, value == low[segment], starts),
            _first_steps(step, value == high[segment], starts),
            _maybe_resumed(series, file, offset, index, step, series[starts]),
        ]
    series_ids, *rest = (col.tolist() if hasattr(col, "tolist") else col for col in columns)
    # Made by the tuple constructor in C: Summary's own __new__ is a Python call a series.
    return list(map(_SUMMARY, zip(series_ids, repeat(table), *rest, strict=False)))


def _first_steps(step: np.ndarray, reached: np.ndarray, starts: np.ndarray) -> list[int | None]:
    """Per segment, the lowest step of the rows ``reached`` marks (None where none is)."""
    import numpy as np

    unreached = np.iinfo(np.int64).max
    lowest = np.minimum.reduceat(np.where(reached, step, unreached), starts).tolist()
    return [None if found == unreached else found for found in lowest]


def _maybe_resumed(
    series: np.ndarray,
    file: np.ndarray,
    offset: np.ndarray,
    index: np.ndarray,
    step: np.ndarray,
    summarised: np.ndarray,
) -> np.ndarray:
    """Per series of ``summarised``: whether its rows come from several files, or go back
    in step in record order within their file (``query.resumed``'s restart, or a superset)."""
    import numpy as np

    order = np.lexsort((index, offset, file, series))
    series, file, step = series[order], file[order], step[order]
    same_series = series[1:] == series[:-1]
    other_file = file[1:] != file[:-1]
    flagged = series[1:][same_series & (other_file | (step[1:] < step[:-1]))]
    return np.isin(summarised, flagged)


def _finite(values: np.ndarray) -> list[float | None]:
    # NaN is NULL in the point tables; from fmin/fmax it means every value was NaN (they skip
    # NaN), and SQL's min() of only NULLs is NULL too.
    return [None if v != v else v for v in values.tolist()]


def _columns(table: str, rows: InsertRows) -> tuple[Any, ...]:
    """(series, step, file, offset, value index, wall time, value or None) as NumPy columns."""
    import numpy as np

    tuples: list[list[Row]] = []
    local: list[tuple[list[Row], Sequence[int], int]] = []  # still in local series numbers
    parts: list[tuple[np.ndarray, ...]] = []
    packed_parts: list[tuple[bytes, int]] = []  # of every file at once
    for rows_of_file in rows.files():
        for part, ids in rows_of_file.tuple_parts():
            if ids is None:
                tuples.append(part)
            else:
                local.append((part, ids, rows_of_file.file_id))
        packed_parts.extend(
            (part, rows_of_file.file_id) for part in rows_of_file.parts() if isinstance(part, bytes)
        )
    if packed_parts:
        packed, file = join_packed(packed_parts)
        series, step, offset, index, wall, value = packed_columns(packed)
        parts.append((series, step, file, offset, index, wall, value))
    if any(tuples):
        parts.append(_tuple_columns(table, _joined(tuples)))
    if any(part for part, _ids, _file in local):
        parts.append(_local_columns(table, [entry for entry in local if entry[0]]))
    merged = [np.concatenate(column) for column in zip(*parts, strict=True)]
    return (*merged[:6], merged[6] if table == "scalars" else None)


def _local_columns(
    table: str, local: list[tuple[list[Row], Sequence[int], int]]
) -> tuple[np.ndarray, ...]:
    """The columns of row tuples still in local series numbers (each list with the store ids
    of its numbers and its file's id), mapped to store ids."""
    import numpy as np

    columns = list(_tuple_columns(table, _joined([rows for rows, _ids, _file in local])))
    sizes = [len(rows) for rows, _ids, _file in local]
    ids = [np.asarray(known, dtype=np.int64) for _rows, known, _file in local]
    bases = np.cumsum([0] + [len(known) for known in ids[:-1]])
    columns[0] = np.concatenate(ids)[np.repeat(bases, sizes) + columns[0]]
    columns[2] = np.repeat(np.array([file for _rows, _ids, file in local], dtype=np.int64), sizes)
    return tuple(columns)


def _joined(lists: list[list[Row]]) -> list[Row]:
    return lists[0] if len(lists) == 1 else list(chain.from_iterable(lists))


def _tuple_columns(table: str, rows: list[Row]) -> tuple[np.ndarray, ...]:
    # Column by column: zip(*rows) over a group's rows walks every row at each step.
    import numpy as np

    def column(position: int, dtype: Any) -> np.ndarray:
        try:
            return np.fromiter(map(itemgetter(position), rows), dtype=dtype, count=len(rows))
        except TypeError:  # None (NaN's NULL) in a float column becomes NaN
            return np.array(list(map(itemgetter(position), rows)), dtype=dtype)

    wall = column(5, np.float64)
    value = column(6, np.float64) if table == "scalars" else wall
    return (*(column(position, np.int64) for position in range(5)), wall, value)
