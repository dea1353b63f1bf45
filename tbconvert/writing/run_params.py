"""The value a selection reads of each (run, param key), kept in ``run_params`` in the
transaction of the params rows, so that ``--where lr < 1e-3`` probes one row per run (or
leads from the runs an index says pass) instead of ranking every params row of the key
(issue #49, revision 0018).

The row is the one ``store.params_rule.selected_params_sql`` ranks first: of the rows
``v_params`` shows (a sidecar's key hidden where an event file, or an earlier sidecar, of the
run holds it), the first context by name, then the last written.  Which row that is depends
on every params row of the run (a sidecar's row shows or hides as event files come and go), so
a run's rows are made again, whole, whenever any params row of the run is inserted, deleted or
moved in a transaction: a run holds a few dozen params, and a conversion changes them rarely.
"""

from __future__ import annotations

from collections.abc import Collection

from tbconvert.store.params_rule import selected_params_sql
from tbconvert.writing.statements import Statements, id_list

COLUMNS = ("run_id", "key", "value", "value_num", "value_type")
# The runs made again a statement.
_BATCH = 2000


def refresh_series(statements: Statements, dialect: str, series_ids: Collection[int]) -> None:
    """Make again the rows of every run holding one of some series whose params changed."""
    ids = sorted(series_ids)
    runs: set[int] = set()
    for start in range(0, len(ids), _BATCH):
        marks = id_list(ids[start : start + _BATCH])
        runs.update(
            int(row[0])
            for row in statements.all(
                f"SELECT DISTINCT run_id FROM series WHERE id IN ({marks}) AND plugin = 'hparams'",
                {},
            )
        )
    refresh_runs(statements, dialect, runs)


def refresh_runs(statements: Statements, dialect: str, run_ids: Collection[int]) -> None:
    """Make again the rows of some runs from their params rows, in the open transaction."""
    ids = sorted(run_ids)
    for start in range(0, len(ids), _BATCH):
        marks = id_list(ids[start : start + _BATCH])
        statements.run(f"DELETE FROM run_params WHERE run_id IN ({marks})", {})
        statements.run(_insert(selected_params_sql(dialect, marks)), {})


def fill(statements: Statements, dialect: str) -> None:
    """Make the rows of every run (a store made before the table)."""
    statements.run("DELETE FROM run_params", {})
    statements.run(_insert(selected_params_sql(dialect)), {})


def _insert(select: str) -> str:
    return f"INSERT INTO run_params ({', '.join(COLUMNS)}) {select}"
