"""Compare stores through their public views, the contract SQL clients see."""

from __future__ import annotations

import sqlite3
from pathlib import Path

VIEWS = ("v_runs", "v_scalars", "v_last_scalars", "v_images", "v_histograms", "v_texts",
         "v_params", "v_audio", "v_tensors")


def view_rows(store: str | Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every view, as a sorted multiset (repr order copes with NULLs)."""
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {view: sorted(connection.execute(f"SELECT * FROM {view}").fetchall(), key=repr)
                for view in VIEWS}
    finally:
        connection.close()


def without_run_ids(views: dict[str, list[tuple[object, ...]]]) -> dict[str, list[tuple]]:
    """The same rows minus their first column (run_id), for stores whose runs were created
    in another order (files that appeared while converting, concurrent converters)."""
    return {view: sorted((row[1:] for row in rows), key=repr) for view, rows in views.items()}


def point_count(store: str | Path) -> int:
    """Rows in all point tables together."""
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return sum(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                   for table in ("scalars", "images", "histograms", "texts", "params", "audio",
                                 "tensors"))
    finally:
        connection.close()


def file_states(store: str | Path) -> dict[str, tuple[object, ...]]:
    """path -> (status, offset_consumed, records) of every event file."""
    connection = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {row[0]: row[1:] for row in connection.execute(
            "SELECT path, status, offset_consumed, records FROM event_files")}
    finally:
        connection.close()
