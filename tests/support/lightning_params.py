"""Lightning's two records of a version's hyper-parameters, written as Lightning writes them,
and the independent oracles that say what the store must show of them (design §6).

Lightning logs a version's hyper-parameters twice: as an hparams session in its event file
(flattened with ``/``, anything but bool/int/float/str made text: ``None`` is ``"None"``,
``[0]`` is ``"[0]"``) and as ``hparams.yaml`` (PyYAML's dump of the nested dict).  The oracles
are TensorBoard's own ``EventFileLoader`` for the session, and ``yaml.safe_load`` of the sidecar
for the keys only it holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import yaml
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.plugins.hparams import metadata as hp_metadata

from tests.support.snapshots import connect, rows

HPARAMS: dict[str, Any] = {
    "config": {
        "InputCh": [0],
        "shape": [65, 384, 384],
        "norm": None,
        "name": "unet",
        "mixed": [[1, 2], [0.5, None, True, "x"]],
    },
    "lr": 0.001,
    "batch_size": 32,
    "augment": True,
    "scale": 1.0,
    "weights": None,
}
# Keys only the sidecar holds (a user's save_hyperparameters beyond what was logged).
YAML_ONLY: dict[str, Any] = {
    "seed": 7,
    "ratio": 0.25,
    "big": 2**70,
    "flags": [True, False],
    "data": {"root": "/data", "splits": [0.8, 0.2], "folds": [1, 2, 3]},
    "nothing": None,
    "grid": [[1, 2], [0.5, None, True, "x"]],
}
PARAMS_SQL = (
    "SELECT key, value, value_num, value_type FROM v_params WHERE run_path = ? ORDER BY key"
)
VERSION = "lightning_logs/version_0"


def lightning_flat(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Lightning's ``_flatten_dict`` (``/`` between keys) then ``_sanitize_params``."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(lightning_flat(value, name))
        else:
            flat[name] = value if type(value) in (bool, int, float, str) else str(value)
    return flat


def write_session(directory: Path, params: Mapping[str, Any], name: str = "a") -> Path:
    """An event file as Lightning's TensorBoardLogger writes it: the hparams session, then
    metrics."""
    from tensorboardX import FileWriter
    from tensorboardX.summary import hparams as hparams_summaries
    from tensorboardX.summary import scalar

    directory.mkdir(parents=True, exist_ok=True)
    writer = FileWriter(str(directory), flush_secs=3600, filename_suffix=f".{name}")
    if params:
        for summary in hparams_summaries(lightning_flat(params), {"hp_metric": -1}):
            writer.add_summary(summary)
    for step in range(3):
        writer.add_summary(scalar("train_loss", 1.0 / (step + 1)), step)
    writer.close()
    (path,) = directory.glob(f"*tfevents*.{name}")
    return path


def write_yaml(directory: Path, params: Mapping[str, Any]) -> Path:
    """``hparams.yaml`` as Lightning's ``save_hparams_to_yaml`` dumps it."""
    path = directory / "hparams.yaml"
    with path.open("w", encoding="utf-8") as handle:
        yaml.dump(dict(params), handle)
    return path


def lightning_version(root: Path) -> Path:
    version = root / VERSION
    write_session(version, HPARAMS)
    write_yaml(version, {**HPARAMS, **YAML_ONLY})
    return version


def tensorboard_session(path: Path) -> dict[str, tuple[str, Any]]:
    """key -> (kind, value) of the session TensorBoard's own reader finds in an event file."""
    found: dict[str, tuple[str, Any]] = {}
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.tag != hp_metadata.SESSION_START_INFO_TAG:
                continue
            content = value.metadata.plugin_data.content
            session = hp_metadata.parse_session_start_info_plugin_data(content)
            for key, item in session.hparams.items():
                kind = item.WhichOneof("kind")
                found[key] = (kind, getattr(item, kind))
    return found


def yaml_flat(parsed: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in parsed.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            flat.update(yaml_flat(value, name))
        else:
            flat[name] = value
    return flat


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``[0] != [0.0]``, ``1 != True``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def check_row_against_session(row: tuple[Any, ...], kind: str, expected: Any) -> None:
    _key, value, value_num, value_type = row
    if kind == "number_value":
        assert value_type == "number" and value_num == expected and float(value) == expected
    elif kind == "string_value":
        assert (value, value_num, value_type) == (expected, None, "string")
    else:
        assert kind == "bool_value"
        assert (value, value_num, value_type) == (str(expected).lower(), float(expected), "bool")


def check_row_against_yaml(row: tuple[Any, ...], expected: Any) -> None:
    _key, value, value_num, value_type = row
    if isinstance(expected, bool):
        assert (value, value_num, value_type) == (str(expected).lower(), float(expected), "bool")
    elif isinstance(expected, int):
        assert value_type == "integer" and same(int(value), expected)
        assert value_num == (float(expected) if abs(expected) < 2**1000 else None)
    elif isinstance(expected, float):
        assert value_type == "number" and value_num == expected and same(float(value), expected)
    elif isinstance(expected, str):
        assert (value, value_num, value_type) == (expected, None, "string")
    else:
        assert value_type == "json" and value_num is None and same(json.loads(value), expected)


def params_rows(store: str, run_path: str = VERSION) -> list[tuple[Any, ...]]:
    with closing(connect(store)) as conn:
        return rows(conn, PARAMS_SQL, (run_path,))


def check_version(store: str, version: Path) -> None:
    """One row per key: the session's as TensorBoard reads it, plus the YAML's other keys
    with their YAML types."""
    session: dict[str, tuple[str, Any]] = {}
    for path in sorted(version.glob("*tfevents*")):
        session.update(tensorboard_session(path))
    sidecar = version / "hparams.yaml"
    from_yaml = yaml_flat(yaml.safe_load(sidecar.read_text("utf-8"))) if sidecar.exists() else {}
    found = params_rows(store)
    keys = [row[0] for row in found]
    assert keys == sorted(set(keys)), "a key shows more than once"
    assert set(keys) == set(session) | set(from_yaml)
    for row in found:
        if row[0] in session:
            check_row_against_session(row, *session[row[0]])
        else:
            check_row_against_yaml(row, from_yaml[row[0]])
