"""Which params rows ``v_params`` shows: one rule for params from several sources (design §6).

A run's params may come from its event files (hparams sessions) and from sidecars beside them
(``hparams.yaml``, ``params.json``: series named after the file).  The store keeps every row
each file gave, so that the rule holds whatever order files are converted, grow, change or go
in; the rule is applied where rows are read: ``v_params`` (revision 0012 holds its own frozen
copy), the read API's params and what ``push`` sends.

A sidecar's row is shown only when no event file of its run holds the key, and no sidecar
named before it (``hparams.yaml`` before ``params.json``) does: what TensorBoard shows wins,
and the sidecars only add keys it lacks.

Of the rows shown, a selection (``--where``, ``--by``, ``--column``) reads one value per (run,
key): the first context by name (code points), then the last written (step, file, offset,
value index).  The writer keeps that row in ``run_params`` (``writing.run_params``, revision
0018) by :func:`selected_params_sql`.
"""

from __future__ import annotations

__all__ = ["PARAMS_SIDECAR_SERIES", "selected_params_sql", "shown_params"]

# The names of sidecar series: ``reading.layouts.PARAMS_SIDECARS`` (a test keeps them equal).
PARAMS_SIDECAR_SERIES = ("hparams.yaml", "params.json")


def shown_params(row: str = "p", series: str = "s") -> str:
    """A SQL condition true when the params row ``row`` of series ``series`` is shown.

    Args:
        row: The alias of the ``params`` row in the query.
        series: The alias of its ``series`` row.
    """
    sidecars = ", ".join(f"'{name}'" for name in PARAMS_SIDECAR_SERIES)
    return (
        f"({series}.name NOT IN ({sidecars}) OR NOT EXISTS ("
        "SELECT 1 FROM series AS o JOIN params AS q ON q.series_id = o.id "
        f"WHERE o.run_id = {series}.run_id AND o.plugin = 'hparams' AND q.key = {row}.key "
        f"AND (o.name NOT IN ({sidecars}) OR o.name < {series}.name)))"
    )


def selected_params_sql(dialect: str, runs: str | None = None) -> str:
    """A query of the value a selection reads of each (run, key): ``run_id, key, value,
    value_num, value_type`` of the shown row ranked first.

    Args:
        dialect: The backend's name (text is ranked by code point on both).
        runs: A SQL list of run ids (``1, 2``) to limit it to, or None for every run.
    """
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    only = "" if runs is None else f"s.run_id IN ({runs}) AND "
    return (
        "SELECT run_id, key, value, value_num, value_type FROM ("
        "SELECT s.run_id, p.key, p.value, p.value_num, p.value_type, ROW_NUMBER() OVER ("
        f"PARTITION BY s.run_id, p.key ORDER BY c.name{collate}, p.step DESC, p.file_id DESC, "
        "p.record_offset DESC, p.value_index DESC) AS rank "
        "FROM params AS p JOIN series AS s ON s.id = p.series_id "
        "JOIN contexts AS c ON c.id = s.context_id "
        f"WHERE {only}{shown_params()}) AS ranked WHERE rank = 1"
    )
