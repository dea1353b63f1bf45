"""The environment of a conversion the suite runs in a child process."""

from __future__ import annotations

import os
from pathlib import Path

from tbconvert.conversion.options import BY_RECORD_BYTES_VARIABLE

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that imports this checkout, without the
    suite's by-record knob (``conftest.py`` sends small files down the block path in-process):
    a child reads with the real thresholds, as a user's conversion does, so the crash and
    signal suites cover the record-by-record and batched small-file paths."""
    env = {key: value for key, value in os.environ.items() if key != BY_RECORD_BYTES_VARIABLE}
    return {**env, "PYTHONPATH": str(ROOT), **extra}
