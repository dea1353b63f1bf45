"""W&B's offline run directories: where a push writes them, and what they hold.

``wandb`` in offline mode writes each ``wandb.init`` of a run into a directory of its own,
``DIR/wandb/offline-run-YYYYMMDD_HHMMSS-ID``, holding the run's records in ``run-ID.wandb``
(what ``wandb sync`` uploads).  The file is W&B's LevelDB-style log: a 7-byte header, then
blocks of 32 KiB holding records cut into fragments, each with a CRC-32 (zlib's, seeded with
the CRC of its type byte), a length and a type; a record is a ``wandb_internal_pb2.Record``.

A push reads back what a run's directories hold (:func:`held_history`) before it sends
anything more: a push killed midway leaves a file whose last record may be torn, and the
reading stops there, as ``wandb sync`` does.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER = b":W&B\xe1\xbe\x00"
BLOCK_SIZE = 32 * 1024
_FRAGMENT_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_SEEDS = {kind: zlib.crc32(bytes([kind])) for kind in (_FULL, _FIRST, _MIDDLE, _LAST)}


@dataclass
class HeldHistory:
    """What the offline directories of one run hold: per key, its points' (step, value)
    in the order they were written (the step read from the key's ``@step`` companion); and
    the last row number (W&B's ``_step``) written."""

    points: dict[str, list[tuple[int, Any]]] = field(default_factory=dict)
    last_row: int = -1


def run_directories(root: Path, run_id: str) -> list[Path]:
    """The offline directories of ``run_id`` under ``root`` (``--offline DIR``), oldest
    first (their names start with the time they were made)."""
    folder = root / "wandb"
    if not folder.is_dir():
        return []
    return sorted(
        path for path in folder.glob(f"offline-run-*-{run_id}") if path.name.endswith(run_id)
    )


def read_records(path: Path) -> Iterator[bytes]:
    """The records of one ``.wandb`` log, up to the first torn or damaged one."""
    data = path.read_bytes()
    if not data.startswith(HEADER):
        return
    position, pieces = len(HEADER), b""
    while position + _FRAGMENT_HEADER <= len(data):
        room = BLOCK_SIZE - position % BLOCK_SIZE
        if room < _FRAGMENT_HEADER:
            position += room  # a block's tail too short for a header is padding
            continue
        checksum, length, kind = struct.unpack_from("<IHB", data, position)
        start = position + _FRAGMENT_HEADER
        fragment = data[start : start + length]
        if kind not in _SEEDS or len(fragment) < length:
            return
        if zlib.crc32(fragment, _SEEDS[kind]) != checksum:
            return
        position = start + length
        pieces = fragment if kind in (_FULL, _FIRST) else pieces + fragment
        if kind in (_FULL, _LAST):
            yield pieces
            pieces = b""


def held_history(root: Path, run_id: str, step_suffix: str) -> HeldHistory:
    """What every offline directory of ``run_id`` holds; ``step_suffix`` names the key of
    each series' step (the key and the suffix)."""
    from wandb.proto import wandb_internal_pb2

    held = HeldHistory()
    for directory in run_directories(root, run_id):
        for path in directory.glob("run-*.wandb"):
            for data in read_records(path):
                record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
                record.ParseFromString(data)
                if record.WhichOneof("record_type") == "history":
                    _add_row(held, record.history, step_suffix)
    return held


def _add_row(held: HeldHistory, history: Any, step_suffix: str) -> None:
    # An item's key is its path in the row (``nested_key``; ``key`` in older files): a
    # media value is a dict, one item per field.
    row: dict[str, Any] = {}
    for item in history.item:
        path = [item.key] if item.key else list(item.nested_key)
        if not path or not item.value_json:
            continue
        place = row
        for name in path[:-1]:
            place = place.setdefault(name, {})
        place[path[-1]] = json.loads(item.value_json)
    held.last_row = max(held.last_row, int(row.get("_step", history.step.num)))
    for key, value in row.items():
        step = row.get(key + step_suffix)
        if step is not None and not key.startswith("_"):
            held.points.setdefault(key, []).append((int(step), value))
