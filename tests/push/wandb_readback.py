"""W&B's offline run directories read back with W&B's own reader, and what the store says
they should hold.

``wandb leet inspect --json`` (wandb-core's reader of ``.wandb`` logs, the code ``wandb sync``
uploads with) prints each record as a JSON line; a run's history rows give each key's value,
under ``KEY@step`` its step, and under ``_timestamp`` the row's wall time (a float64, printed
in its shortest exact form).  Keys are parsed back to (context, tag) here by the
documented rule, written out again (first ``/`` ends the context, ``run`` is the run
directory's, ``%XX`` escapes), not by the code under test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.snapshots import connect

WANDB = str(Path(sys.executable).with_name("wandb"))
SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass
class WandbRun:
    """One W&B run as its offline directories hold it."""

    run_id: str
    name: str
    group: str
    config: dict[str, Any] = field(default_factory=dict)
    # (context, tag) -> [(step, value)] in the order the rows were written
    scalars: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    # (context, tag) -> [(step, the row's _timestamp)], as scalars
    times: dict[tuple[str, str], list[tuple[int, float]]] = field(default_factory=dict)
    # (context, tag) -> [(step, the value's W&B type)]
    media: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    rows: list[int] = field(default_factory=list)  # each row's _step, in order
    directories: int = 0


def records(directory: Path) -> Iterator[dict[str, Any]]:
    """The records of one offline run directory, as W&B's reader prints them."""
    done = subprocess.run(
        [WANDB, "leet", "inspect", "--json", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            yield json.loads(line)


def series_of(key: str) -> tuple[str, str]:
    head, _, tail = key.partition("/")
    context = "" if head == "run" else urllib.parse.unquote(head)
    return context, urllib.parse.unquote(tail)


def wandb_runs(root: Path) -> dict[str, WandbRun]:
    """Every run under ``root/wandb``, by name (its tbconvert run path), its directories
    read oldest first."""
    runs: dict[str, WandbRun] = {}
    for directory in sorted((root / "wandb").glob("offline-run-*")):
        run: WandbRun | None = None
        for record in records(directory):
            if record["type"] == "run":
                info = record["run"]
                name = info.get("display_name", "")
                run = runs.setdefault(
                    name, WandbRun(info["run_id"], name, info.get("run_group", ""))
                )
                assert run.run_id == info["run_id"], (name, run.run_id, info["run_id"])
                run.config.update(info.get("config", {}).get("update", {}))
                run.directories += 1
            elif record["type"] == "history":
                assert run is not None
                add_row(run, record["history"]["item"])
    return runs


def add_row(run: WandbRun, item: dict[str, Any]) -> None:
    run.rows.append(int(item["_step"]))
    for name, value in item.items():
        if name.endswith("@step"):
            key = name[: -len("@step")]
            if key in item:
                scalar = item[key]
                scalar = SPECIAL.get(scalar, scalar) if isinstance(scalar, str) else scalar
                run.scalars.setdefault(series_of(key), []).append((int(value), scalar))
                run.times.setdefault(series_of(key), []).append((int(value), item["_timestamp"]))
            else:
                run.media.setdefault(series_of(key), []).append((int(value), item[key + "._type"]))


def store_current(store: Path | str) -> dict[str, dict[tuple[str, str], list[tuple[int, Any]]]]:
    """Per run and series, ``v_scalars_current`` with one point per step: the one written
    last (the test writers log a step's repeats at growing wall times), NaN as NaN."""
    return {
        run: {series: [(s, v) for s, v, _ in points] for series, points in by.items()}
        for run, by in _current_points(store).items()
    }


def store_times(store: Path | str) -> dict[str, dict[tuple[str, str], list[tuple[int, float]]]]:
    """Per run and series, the wall time of each point :func:`store_current` gives."""
    return {
        run: {series: [(s, w) for s, _, w in points] for series, points in by.items()}
        for run, by in _current_points(store).items()
    }


def _current_points(
    store: Path | str,
) -> dict[str, dict[tuple[str, str], list[tuple[int, Any, float]]]]:
    found: dict[str, dict[tuple[str, str], dict[int, tuple[float, Any]]]] = {}
    with closing(connect(store)) as conn:
        for run_path, context, tag, step, wall, value in conn.execute(
            "SELECT run_path, context, tag, step, wall_time, value FROM v_scalars_current"
        ):
            steps = found.setdefault(run_path, {}).setdefault((context, tag), {})
            value = math.nan if value is None else value
            if step not in steps or steps[step][0] <= wall:
                steps[step] = (wall, value)
    return {
        run: {
            series: sorted((s, v, w) for s, (w, v) in steps.items()) for series, steps in by.items()
        }
        for run, by in found.items()
    }


def store_params(store: Path | str) -> dict[str, dict[str, Any]]:
    """Per run, ``v_params`` typed by its ``value_type`` (one hparams session per run)."""
    found: dict[str, dict[str, Any]] = {}
    with closing(connect(store)) as conn:
        for run_path, key, value, number, kind in conn.execute(
            "SELECT run_path, key, value, value_num, value_type FROM v_params"
        ):
            typed: Any = value
            if kind == "number":
                typed = number
            elif kind == "integer":
                typed = int(value)
            elif kind == "bool":
                typed = value == "true"
            found.setdefault(run_path, {})[key] = typed
    return found


def same(left: list[tuple[int, Any]], right: list[tuple[int, Any]]) -> bool:
    """Equal point lists, NaN equal to NaN."""

    def key(points: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        return [(s, "nan" if isinstance(v, float) and math.isnan(v) else v) for s, v in points]

    return key(left) == key(right)
