"""Which params rows ``v_params`` shows: one rule for params from several sources (design §6).

A run's params may come from its event files (hparams sessions) and from sidecars beside them
(``hparams.yaml``, ``params.json``: series named after the file).  The store keeps every row
each file gave, so that the rule holds whatever order files are converted, grow, change or go
in; the rule is applied where rows are read: ``v_params`` (revision 0012 holds its own frozen
copy), the read API's params and what ``push`` sends.

A sidecar's row is shown only when no event file of its run holds the key, and no sidecar
named before it (``hparams.yaml`` before ``params.json``) does: what TensorBoard shows wins,
and the sidecars only add keys it lacks.
"""

from __future__ import annotations

__all__ = ["PARAMS_SIDECAR_SERIES", "shown_params"]

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
