"""A stored event file moved to another (run, context) with its points, nothing read again.

A file's points are keyed by their series, which belongs to the file's (run, context).  When
the file is alone in its place, its series move themselves, points and summaries untouched
(one statement for a file of any size); otherwise its points are pointed at the series of the
same tags in the new place (made as they were, with the metadata the tag's first occurrence
gave) and both sides are summarised again.
Used when a conversion takes over the files another source (a logdir inside or around its
own) stored (design §7: one event file in one run of a store).  Push marks follow the
points, so a push carries on where it was instead of sending them again.
"""

from __future__ import annotations

from typing import Any

from tbconvert.rows import POINT_TABLES, SeriesDefinition
from tbconvert.writing import current_summaries, run_params, series_summaries
from tbconvert.writing import statements as sql
from tbconvert.writing.writer import StoreWriter

_SERIES = (
    "SELECT id, name, plugin, dtype, display_name, description, plugin_content FROM series "
    "WHERE run_id = :run_id AND context_id = :context_id ORDER BY id"
)


def move_file(
    writer: StoreWriter, file_id: int, run_id: int, context_id: int, path: str
) -> tuple[int, int] | None:
    """Move the file ``file_id``, its points and push marks, to (``run_id``, ``context_id``)
    under ``path``; returns the (run, context) it left (for ``FileStates.drop_empty``),
    None when another converter took it away first."""
    writer.flush()
    statements = writer.statements
    row = statements.one(
        "SELECT run_id, context_id FROM event_files WHERE id = :id", {"id": file_id}
    )
    if row is None:
        return None
    old_run, old_context = int(row[0]), int(row[1])
    found = statements.all(_SERIES, {"run_id": old_run, "context_id": old_context})
    whole = _move_whole_series(writer, file_id, (old_run, old_context), (run_id, context_id), found)
    found = [series for series in found if series[0] not in whole]
    tables = _tables_of(writer, file_id, [int(series[0]) for series in found])
    used = sorted({series_id for ids in tables.values() for series_id in ids})
    definitions = [
        SeriesDefinition(index, *series[1:])
        for index, series in enumerate(found)
        if series[0] in used
    ]
    new_ids = writer.identities.series_ids(run_id, context_id, definitions) if definitions else []
    writer.flush()  # the new series exist before points refer to them
    mapping = dict(zip(used, new_ids, strict=True))
    for table, ids in tables.items():
        statements.run(
            f"UPDATE {table} SET series_id = {_case(mapping)} WHERE file_id = :file_id "
            f"AND series_id IN ({sql.id_list(ids)})",
            {"file_id": file_id},
        )
    statements.run(
        "UPDATE event_files SET run_id = :run_id, context_id = :context_id, path = :path "
        "WHERE id = :id",
        {"run_id": run_id, "context_id": context_id, "path": path, "id": file_id},
    )
    marks = {**{series_id: series_id for series_id in whole}, **mapping}
    _move_push_marks(writer, file_id, (old_run, run_id), marks, path)
    writer.identities.summaries_recounted()
    series_summaries.recount(statements, writer.engine.dialect.name, [*used, *new_ids], tables)
    # Whole series moved to another run and context may meet or leave a SessionLog there.
    current_summaries.refresh(statements, whole, whole, recounted=True)
    # Whole series of params moved take their values from one run to the other.
    if whole:
        run_params.refresh_runs(statements, writer.engine.dialect.name, {old_run, run_id})
    return old_run, old_context


def _move_whole_series(
    writer: StoreWriter,
    file_id: int,
    old: tuple[int, int],
    new: tuple[int, int],
    found: list[tuple[Any, ...]],
) -> set[int]:
    """Move the old place's series themselves, with their ids, points and summaries as they
    are, when the file is the only one there (every point of theirs is its own) and the new
    place has no series of their tag: one statement, however many points (the common case:
    one file per run and context).  Returns their ids."""
    statements = writer.statements
    others = statements.one(
        "SELECT id FROM event_files WHERE run_id = :run_id AND context_id = :context_id "
        "AND id <> :id LIMIT 1",
        {"run_id": old[0], "context_id": old[1], "id": file_id},
    )
    if others is not None:
        return set()
    there = statements.all(sql.SERIES_OF, {"run_id": new[0], "context_id": new[1]})
    taken = {(name, plugin) for _id, name, plugin in there}
    moving = [series for series in found if (series[1], series[2]) not in taken]
    if moving:
        for table, key in (("series", "id"), ("series_summaries", "series_id")):
            statements.run(
                f"UPDATE {table} SET run_id = :run_id, context_id = :context_id "
                f"WHERE {key} IN ({sql.id_list(int(series[0]) for series in moving)})",
                {"run_id": new[0], "context_id": new[1]},
            )
        writer.identities.adopt_series(*new, [series[:3] for series in moving])
    return {int(series[0]) for series in moving}


def forget_pushes_of_gone_runs(writer: StoreWriter, run_ids: set[int]) -> None:
    """Delete the push accounts of runs no longer in the store: SQLite may give a new run a
    deleted run's id, which must not find the tracker's run of the old one."""
    for run_id in sorted(run_ids):
        writer.statements.run(
            "DELETE FROM push_runs WHERE run_id = :run_id AND NOT EXISTS "
            "(SELECT 1 FROM runs WHERE id = :run_id)",
            {"run_id": run_id},
        )


def _tables_of(writer: StoreWriter, file_id: int, series: list[int]) -> dict[str, list[int]]:
    """The point tables holding the file's points, with the series they are in."""
    if not series:
        return {}
    summarised = writer.statements.all(
        "SELECT DISTINCT point_table FROM series_summaries "
        f"WHERE series_id IN ({sql.id_list(series)})",
        {},
    )
    tables: dict[str, list[int]] = {}
    for table in sorted(str(found[0]) for found in summarised):
        if table not in POINT_TABLES:
            continue
        ids = writer.statements.all(
            f"SELECT DISTINCT series_id FROM {table} WHERE series_id IN ({sql.id_list(series)}) "
            "AND file_id = :file_id",
            {"file_id": file_id},
        )
        if ids:
            tables[table] = sorted(int(found[0]) for found in ids)
    return tables


def _move_push_marks(
    writer: StoreWriter,
    file_id: int,
    runs: tuple[int, int],
    mapping: dict[int, int],
    path: str,
) -> None:
    """Carry the file's push marks to its new series, for each destination whose tracker run
    the new run continues (given to it when it had none there); drop them elsewhere, where
    the tracker's run of the new run never received these points."""
    old_run, new_run = runs
    run = writer.statements.run
    if old_run != new_run:
        run(
            "INSERT INTO push_runs (destination, run_id, remote_id, pending, pushed_at) "
            "SELECT o.destination, :new_run, o.remote_id, o.pending, o.pushed_at "
            "FROM push_runs AS o WHERE o.run_id = :old_run AND NOT EXISTS (SELECT 1 FROM "
            "push_runs AS n WHERE n.destination = o.destination AND n.run_id = :new_run)",
            {"old_run": old_run, "new_run": new_run},
        )
    followed = (
        "destination IN (SELECT o.destination FROM push_runs AS o JOIN push_runs AS n "
        "ON n.destination = o.destination AND n.remote_id = o.remote_id "
        "WHERE o.run_id = :old_run AND n.run_id = :new_run)"
    )
    params = {"file_id": file_id, "old_run": old_run, "new_run": new_run, "path": path}
    if mapping:
        run(
            f"UPDATE push_marks SET series_id = {_case(mapping)}, file_path = :path "
            f"WHERE file_id = :file_id AND series_id IN ({sql.id_list(mapping)}) AND {followed}",
            params,
        )
    run(
        "DELETE FROM push_marks WHERE file_id = :file_id AND NOT (file_path = :path AND "
        f"{followed})",
        params,
    )


def _case(mapping: dict[int, int]) -> str:
    """``series_id`` mapped through ``mapping`` (ids are integers: written inline)."""
    whens = " ".join(f"WHEN {int(old)} THEN {int(new)}" for old, new in sorted(mapping.items()))
    return f"CASE series_id {whens} END"
