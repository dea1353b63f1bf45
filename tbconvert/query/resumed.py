"""A scalar series as its last attempt left it (``--resumed current``; the view
``v_scalars_current`` holds the same rows for SQL clients, and a property test holds the two
to one rule: the commands read through this module because the view is about three times
slower on big series: docs/performance.md, "A resumed run's current points").

The rule itself is ``store.attempts_rule`` (the writer keeps the aggregates of every series
with several attempts by it too); this module reads the points it needs.
"""

from __future__ import annotations

from tbconvert.plugins.names import SESSION_LOG_TAG
from tbconvert.store.attempts_rule import is_start, last_attempt

__all__ = ["is_start", "last_attempt"]

RESUMED = ("current", "all")
# What plot, report and export read unless told: each series as its run ended, as TensorBoard
# shows a restarted run (docs/cli.md#resumed-runs says why export agrees).
RESUMED_DEFAULT = "current"
# Points of one series in write order: (step, wall_time, value, path, offset, index).
WRITE_ORDER_SQL = (
    "SELECT p.step, p.wall_time, p.value, f.path, p.record_offset, p.value_index "
    "FROM scalars AS p JOIN event_files AS f ON f.id = p.file_id WHERE p.series_id = :id "
    "ORDER BY f.path, p.record_offset, p.value_index"
)
# Session starts of one series' run and context: (step, path, offset).  A SessionLog whose
# status (field 1, a varint) is START (1) serialises as 08 01 first.
STARTS_SQL = (
    "SELECT t.step, f.path, t.record_offset, b.data FROM tensors AS t "
    "JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id "
    "JOIN blobs AS b ON b.id = t.blob_id JOIN series AS mine ON mine.id = :id "
    "WHERE s.plugin = 'session_log' AND s.run_id = mine.run_id "
    "AND s.context_id = mine.context_id"
)

# Whether the store holds a SessionLog: one probe of ix_series_name_plugin (its series are
# all named so, ``reading.routing``).
ANY_SESSION_LOG_SQL = (
    f"SELECT 1 FROM series WHERE name = '{SESSION_LOG_TAG}' AND plugin = 'session_log' LIMIT 1"
)
