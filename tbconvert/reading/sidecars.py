"""Hyper-parameters that writers keep beside a run's event files (design §3).

Lightning's ``hparams.yaml`` and Ray Tune's ``params.json`` hold a run's hyper-parameters,
sometimes ones its event files never logged.  Each is read whole (they are small) into
``params`` rows of one series named after the file, typed as the file wrote them (an integer
stays one, in a list too: ``plugins.hparams.plain_rows``); nested mappings are flattened with
``/`` between keys, as both libraries do when they log to TensorBoard.  Where the run's event
files hold a key too, ``v_params`` shows theirs (design §6, ``store.params_rule``): the rows
here are kept whole, so the rule holds whatever order files come and go in.  The rows have no
wall time.  YAML is read with safe loading only.  A sidecar that cannot be parsed gives a
warning and no rows, never a failure: its run keeps whatever its event files hold.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Mapping
from typing import Any

from tbconvert.reading.chunks import Chunk, FileTask, ReadSettings
from tbconvert.reading.decode_stats import DecodeStats
from tbconvert.reading.layouts import PARAMS_SIDECARS
from tbconvert.reading.remote import open_binary
from tbconvert.rows import FileRows, SeriesDefinition

__all__ = ["read_sidecar"]


def read_sidecar(task: FileTask, settings: ReadSettings) -> Chunk:
    """The one chunk of a sidecar: its params as rows (or a warning), and the file read whole."""
    name = posixpath.basename(task.path)
    try:
        with open_binary(task.path, task.size, settings.remote) as handle:
            data = handle.read(task.size)
    except OSError as error:
        return _chunk(task, settings, b"", error=f"cannot read: {error.strerror or error}")
    if not settings.selection.accepts_plugin("hparams") or not settings.selection.accepts_tag(name):
        return _chunk(task, settings, data)
    try:
        values = _flat(_parsed(name, data))
    except ValueError as error:
        warning = f"{task.rel_path}: {PARAMS_SIDECARS[name]} params not read ({error})"
        return _chunk(task, settings, data, warning=warning)
    from tbconvert.plugins.hparams import plain_rows

    # No wall time: the file's mtime is not the logdir's (a copy, an upload or a touch
    # changes it), and nothing in the store may depend on it (design §6).
    rows = [(0, 0, 0, 0, index, None, *row) for index, row in enumerate(plain_rows(values))]
    definition = SeriesDefinition(0, name, "hparams", None, None, None, None)
    return _chunk(task, settings, data, rows=rows, definition=definition)


def _parsed(name: str, data: bytes) -> Any:
    text = data.decode("utf-8", errors="strict") if data else ""
    if name.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"invalid JSON: {error}") from error
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"invalid YAML: {str(error).splitlines()[0]}") from error


def _flat(parsed: Any) -> dict[str, Any]:
    """Nested mappings flattened with ``/``; values JSON cannot hold (dates...) made text."""
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise ValueError(f"a {type(parsed).__name__}, not a mapping of names to values")
    flat: dict[str, Any] = {}

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for key, item in value.items():
                add(f"{prefix}/{key}" if prefix else str(key), item)
        else:
            flat[prefix] = _plain(value)

    add("", parsed)
    return flat


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)  # dates and other YAML scalars, as their text


def _chunk(
    task: FileTask,
    settings: ReadSettings,
    data: bytes,
    *,
    rows: list[tuple[Any, ...]] | None = None,
    definition: SeriesDefinition | None = None,
    error: str | None = None,
    warning: str | None = None,
) -> Chunk:
    digest = hashlib.sha256(data).hexdigest()
    stats = DecodeStats()
    if rows:
        stats.points["hparams"] += len(rows)
    return Chunk(
        rows={"params": FileRows.of(rows)} if rows else {},
        blobs={},
        new_series=[definition] if definition is not None and rows else [],
        consumed=len(data),
        records=len(rows or ()),
        damage=[],
        first_wall_time=None,
        last_wall_time=None,
        done=True,
        # Read whole every time it changes: what it held before goes first.
        restart=True,
        replaces=settings.full or task.stored_size is not None,
        digest=digest,
        error=error,
        warning=warning,
        stats=stats,
        read=len(data),
    )
