"""The choices of the read commands' options, and the default of ``--resumed``: defined once,
for the library and the command line alike.

Nothing here imports more than the package's own constants, so the command line builds its
``click.Choice`` options from this module without importing NumPy, SQLAlchemy or matplotlib
(``tbconvert --help`` stays fast).  ``RESUMED`` is the read API's own (``query.resumed``,
which checks it), imported here so that every choice has one address.
"""

from __future__ import annotations

from tbconvert.query.resumed import RESUMED, RESUMED_DEFAULT

__all__ = [
    "AGGREGATES",
    "BANDS",
    "EXPORT_FORMATS",
    "EXPORT_KINDS",
    "RESUMED",
    "RESUMED_DEFAULT",
    "X_AXES",
]

# plot: the x axis; a group's line and its band.
X_AXES = ("step", "relative", "wall")
AGGREGATES = ("mean", "median")
BANDS = ("std", "sem", "ci95", "minmax", "none")
# export: what is exported, and the formats of the files it writes.
EXPORT_KINDS = ("scalars", "params", "texts", "hparams", "images")
EXPORT_FORMATS = ("csv", "json", "jsonl", "parquet")
