"""How a published bundle writes numbers (``static/published.js`` reads them back): steps as
differences, values as little-endian float32 (when every value is one, as ``add_scalar``
logs them) or float64 in base64, wall times as whole milliseconds since the first, and the
files themselves as ``TBV.receive(name, payload)`` scripts, since a page opened from
``file://`` may not fetch.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import orjson

# A wall-time difference past this many milliseconds (24 days) is written as float64.
MAX_MILLISECONDS = 2**31 - 1


def to_json(value: Any) -> str:
    """``value`` as compact JSON text."""
    return orjson.dumps(value).decode("utf-8")


def script(name: str, payload: str) -> str:
    """The data file ``name`` holding ``payload`` (JSON text) for the page."""
    return f"TBV.receive({to_json(name)},{payload});"


def step_differences(steps: Sequence[int]) -> list[int]:
    """Each step less the one before (the first less 0): short numbers in JSON."""
    import numpy as np

    return np.diff(np.asarray(steps, dtype=np.int64), prepend=0).tolist()  # type: ignore[no-any-return]


def floats(values: Sequence[float | None], *, narrow: bool = True) -> dict[str, Any]:
    """``{"f32", "y64"}``: the values in base64, float32 when ``narrow`` and every finite
    value is one, else float64; None and NaN as NaN."""
    import numpy as np

    array = np.array([float("nan") if v is None else v for v in values], dtype=np.float64)
    single = narrow and bool(np.all(array.astype(np.float32) == array, where=np.isfinite(array)))
    kind = np.dtype(np.float32 if single else np.float64).newbyteorder("<")
    return {"f32": single, "y64": base64.b64encode(array.astype(kind).tobytes()).decode("ascii")}


def wall_times(times: Sequence[float | None]) -> dict[str, Any]:
    """Wall times, compactly: ``{"t0", "dt"}``, the first and each one's whole milliseconds
    since it less the one before as base64 int32 (rounded once each, so the error stays
    under half a millisecond however many there are); or ``{"t64"}`` as float64 when one is
    missing or two are more than 24 days apart."""
    import numpy as np

    array = np.array([float("nan") if t is None else t for t in times], dtype=np.float64)
    if not len(array):
        return {"t0": 0.0, "dt": ""}
    if np.all(np.isfinite(array)):
        since = np.rint((array - array[0]) * 1000).astype(np.int64)
        steps = np.diff(since, prepend=0)
        if np.all(np.abs(steps) <= MAX_MILLISECONDS):
            packed = steps.astype("<i4").tobytes()
            return {"t0": float(array[0]), "dt": base64.b64encode(packed).decode("ascii")}
    return {"t64": base64.b64encode(array.astype("<f8").tobytes()).decode("ascii")}
