"""A datasette metadata file for a store: labels, facets, descriptions and canned queries.

``tbconvert datasette-metadata --store runs.db -o metadata.json`` then
``datasette runs.db -m metadata.json`` opens the store with the public views described
column by column, useful facets, names instead of ids, and the SQL cookbook (docs/cookbook.md) as
canned queries with forms.  Datasette reads SQLite files only.
"""

from __future__ import annotations

import copy
import os
from typing import TYPE_CHECKING, Any

from tbconvert.errors import UsageError

if TYPE_CHECKING:
    from tbconvert.query.store import Store

_OWNER = {
    "run_id": "The run (see v_runs).",
    "run_path": "The run's directory relative to its logdir ('.' for the logdir itself).",
    "context": "Sub-directory of the run holding the event file ('' for the run directory).",
    "tag": "The tag as logged.",
    "step": "Global step (int64).",
    "wall_time": "Seconds since 1970-01-01 UTC, as logged.",
}
# Views without the full (run, context, tag, step, wall_time) prefix.
_OWNED = {
    "v_runs": ("run_id", "run_path"),
    "v_params": ("run_id", "run_path", "context"),
    "v_series": ("run_id", "run_path", "context", "tag"),
}
# Facets only where they are cheap: a facet is a GROUP BY over the whole view, and the point
# views grow with every step logged (past datasette's 1 s limit at a few million points);
# v_series has a row per series, and its plugin and context facets say the same.
_VIEWS: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "v_runs": (
        "One row per run: where it came from and when it was written.",
        ["group_path", "logdir"],
        {
            "group_path": "The group directory holding the run ('' at the top).",
            "name": "The run directory's own name.",
            "first_wall_time": "Earliest event time (seconds since the epoch, UTC).",
            "last_wall_time": "Latest event time (seconds since the epoch, UTC).",
        },
    ),
    "v_scalars": (
        "Every scalar record: one row each, duplicates and resumed steps kept.",
        [],
        {"value": "float64; NULL exactly when a NaN was logged."},
    ),
    "v_last_scalars": (
        "The last point of each scalar series (highest step, then last written).",
        ["tag", "context"],
        {"value": "float64; NULL exactly when a NaN was logged."},
    ),
    "v_series": (
        "One row per series of every plugin: how many points, their step and time range, "
        "and for scalars the last value, min and max. Kept up to date as points are written: "
        "reading it never counts points.",
        ["plugin", "context"],
        {
            "plugin": "The TensorBoard plugin that wrote the tag (scalars, images, ...).",
            "points": "Number of points (rows of the plugin's view).",
            "first_step": "Lowest step.",
            "last_step": "Highest step.",
            "first_wall_time": "Earliest wall time of a point.",
            "last_wall_time": "Latest wall time of a point.",
            "last_value": "Scalars: the value v_last_scalars shows (NULL for NaN).",
            "min_value": "Scalars: the smallest value, NaN left out.",
            "max_value": "Scalars: the largest value, NaN left out.",
        },
    ),
    "v_params": (
        "Hyper-parameters (hparams sessions; hparams.yaml, params.json for keys the "
        "event files lack), typed as written.",
        ["key", "value_type"],
        {
            "context": "The hparams session (torch/tensorboardX: one sub-directory "
            "per add_hparams call).",
            "key": "Hyper-parameter name.",
            "value": "The value as text.",
            "value_num": "Numbers, integers and bools (1/0) as REAL, else NULL.",
            "value_type": "number, integer, string, bool or json.",
        },
    ),
    "v_images": (
        "Images, bytes exactly as logged (PNG, GIF, JPEG).",
        [],
        {"idx": "Index of the image within its record.", "data": "The encoded image."},
    ),
    "v_texts": (
        "Text summaries, one row per string element.",
        [],
        {"idx": "Element index (row-major).", "value": "UTF-8 text."},
    ),
    "v_histograms": (
        "Histograms as TensorBoard shows them.",
        [],
        {
            "buckets": "JSON [[left, right, count], ...]: empty end buckets dropped, "
            "min and max as the outer edges (the HistogramProto's own "
            "buckets: histograms.raw_buckets)."
        },
    ),
    "v_audio": ("Audio clips (WAV bytes).", [], {"sample_rate": "Samples per second."}),
    "v_tensors": (
        "Everything else, kept raw: pr_curves, custom_scalars, mesh, graphs, session logs, "
        "log messages, unknown plugins.",
        [],
        {"shape": "JSON list of dimensions.", "data": "The tensor's raw bytes."},
    ),
}
_TABLES: dict[str, dict[str, Any]] = {
    "runs": {"label_column": "run_path", "facets": ["group_path"]},
    "contexts": {"label_column": "name"},
    "series": {"label_column": "name", "facets": ["plugin"]},
    "event_files": {"label_column": "path", "facets": ["status"]},
    "conversions": {"facets": ["status"]},
    "blobs": {"hidden": True},
    "tbconvert_alembic_version": {"hidden": True},
}
# The SQL cookbook (docs/cookbook.md, tested there with literal values), with datasette forms.
QUERIES: dict[str, dict[str, Any]] = {
    "learning_curve": {
        "title": "Learning curve of a tag",
        "description": "Every point of one series, in step order (context: '' for the run "
        "directory itself).",
        "sql": "SELECT step, wall_time, value FROM v_scalars\n"
        "WHERE run_path = :run_path AND context = :context AND tag = :tag\n"
        "ORDER BY step, wall_time",
        "params": ["run_path", "context", "tag"],
    },
    "series_overview": {
        "title": "Every series at a glance",
        "description": "Points, step range and, for scalars, last value, min and max: one "
        "row per series, read from summaries (no point is counted).",
        "sql": "SELECT run_path, context, tag, plugin, points, first_step, last_step,\n"
        "       last_value, min_value, max_value\n"
        "FROM v_series ORDER BY run_path, context, tag, plugin",
    },
    "last_values": {
        "title": "Last value of every series",
        "sql": "SELECT run_path, context, tag, step, value FROM v_last_scalars\n"
        "ORDER BY run_path, context, tag",
    },
    "final_metric_with_params": {
        "title": "Final value of a tag in every run, next to the run's params",
        "description": "Long format: one row per (run, param). Pivot in pandas, or see "
        "tbconvert's SQL cookbook for a wide query with known keys.",
        "sql": "SELECT l.run_path, l.context, l.value AS final_value, p.context AS session,\n"
        "       p.key, p.value\n"
        "FROM v_last_scalars AS l JOIN v_params AS p ON p.run_id = l.run_id\n"
        "WHERE l.tag = :tag\n"
        "ORDER BY final_value DESC, l.run_path, p.key",
        "params": ["tag"],
    },
    "nan_series": {
        "title": "Series that went NaN",
        "sql": "SELECT run_path, context, tag, min(step) AS first_nan_step,\n"
        "       count(*) AS nan_points\n"
        "FROM v_scalars WHERE value IS NULL\n"
        "GROUP BY run_id, run_path, context, tag ORDER BY run_path, context, tag",
    },
    "images_at_step": {
        "title": "Images of a tag at a step",
        "sql": "SELECT run_path, context, idx, format, width, height, data FROM v_images\n"
        "WHERE tag = :tag AND step = CAST(:step AS INTEGER)\n"
        "ORDER BY run_path, context, idx",
        "params": ["tag", "step"],
    },
    "search_texts": {
        "title": "Search the texts",
        "description": "Case-insensitive substring search (no full-text index: every text "
        "is scanned).",
        "sql": "SELECT run_path, context, tag, step, value FROM v_texts\n"
        "WHERE lower(value) LIKE '%' || lower(:words) || '%'\n"
        "ORDER BY run_path, context, tag, step",
        "params": ["words"],
    },
}


def metadata(database: str) -> dict[str, Any]:
    """The metadata document for a store that datasette serves as ``database``.

    Args:
        database: Datasette's name for the file: its name without the extension.
    """
    tables: dict[str, dict[str, Any]] = {}
    for view, (description, facets, columns) in _VIEWS.items():
        owner = {name: _OWNER[name] for name in _OWNED.get(view, tuple(_OWNER))}
        tables[view] = {"description": description, "columns": {**owner, **columns}}
        if facets:
            tables[view]["facets"] = facets
    tables["v_runs"]["label_column"] = "run_path"
    tables.update(copy.deepcopy(_TABLES))
    return {
        "title": "TensorBoard runs",
        "description": "Converted by tbconvert. Start with v_runs, v_last_scalars and the "
        "canned queries; the v_* views are the stable interface.",
        "databases": {database: {"tables": tables, "queries": copy.deepcopy(QUERIES)}},
    }


def database_name(path: str | os.PathLike[str]) -> str:
    """The name datasette gives a database file: its base name without the extension."""
    return os.path.splitext(os.path.basename(os.fspath(path)))[0]


def metadata_for(store: Store) -> dict[str, Any]:
    """The metadata document for an open SQLite store.

    Raises:
        UsageError: the store is not a SQLite file (datasette reads SQLite only).
    """
    from tbconvert.store.engine import sqlite_path

    path = sqlite_path(str(store.engine.url))
    if path is None:
        raise UsageError(
            "datasette serves SQLite files only",
            path=store.display,
            hint="give --store a SQLite file",
        )
    return metadata(database_name(path))
