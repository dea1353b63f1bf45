"""Histograms: TF1 / torch / tensorboardX ``HistogramProto`` and TF2 ``[k, 3]`` tensors, stored
as TensorBoard shows them (design §5, reference §2.3 and §4 item 18).

Each value becomes one row ``(count, min, max, sum, sum_squares, buckets, raw_buckets)`` where
``buckets`` is JSON text ``[[left, right, count], ...]``.

* ``HistogramProto`` holds right edges only (bucket ``i`` ends at ``bucket_limit[i]``), and real
  writers leave empty buckets at both ends with outer limits far beyond the data (TF's ladder
  ends at ±DBL_MAX; torch and Keras files start with a limit below ``min``).  ``buckets`` is
  TensorBoard's conversion (``tensorboard/data_compat.py``, ``_migrate_histogram_value``):
  the empty buckets at both ends are dropped (a bucket is empty unless its count is > 0),
  the left edge of the first remaining bucket is ``min``, the right edge of the last one
  ``max``, and the edges in between are the remaining inner limits.  No bucket has data: ``[]``.
  TensorBoard's Python reader then rounds the triples to float32; here they keep the float64
  written (the rounding would change no bar TensorBoard draws, and loses digits).
  ``raw_buckets`` keeps the proto itself, ``[[bucket_limit, bucket], ...]`` as written (empty
  end buckets and ±DBL_MAX limits too), so the file's data stay recoverable.  ``count`` is
  ``num``; ``min``, ``max``, ``sum`` and ``sum_squares`` are kept as written.
* TF2 tensors are ``(left, right, count)`` rows already, TensorBoard's own form: kept as given
  (float32 widens to float64 exactly), ``raw_buckets`` NULL.  ``count`` is the exactly rounded
  sum of the counts (``math.fsum``; NaN where they hold NaN or both infinities, and beyond the
  float range ±inf), ``min`` the first left edge, ``max`` the last right edge
  (NULL when ``k = 0``); ``sum`` and ``sum_squares`` are not in the tensor and stay NULL.

Non-finite numbers in the JSON (which has no literal for them): ``+inf`` is written ``1e999``
and ``-inf`` ``-1e999`` (valid JSON numbers that overflow back to ±infinity in Python's
``json``, JavaScript's ``JSON.parse`` and SQLite's ``json_extract``), and NaN is written
``null``.  Finite numbers use Python's shortest round-tripping ``repr``, so every float64
(±DBL_MAX, ``-0.0``, subnormals) survives exactly.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

from tbconvert.plugins._tensorproto import (
    DT_DOUBLE,
    DT_FLOAT,
    dtype_name,
    shape_of,
    tensor_to_array,
)
from tbconvert.plugins.base import Decoded, DecodeFailure

if TYPE_CHECKING:
    # Imported where needed: a run that finds nothing new to read need not pay for NumPy.
    import numpy as np

TABLE = "histograms"
POS_INF_JSON = "1e999"
NEG_INF_JSON = "-1e999"
NAN_JSON = "null"
# Packed dtypes read as Python floats: (struct format, item size).
_PACKED_FORMATS = {DT_FLOAT: ("f", 4), DT_DOUBLE: ("d", 8)}
_VALUE_FIELDS = (
    "float_val",
    "double_val",
    "half_val",
    "int_val",
    "int64_val",
    "uint32_val",
    "uint64_val",
)


def decode(value: Any, _metadata: Any) -> Decoded:
    """Decode one histogram value into a row of the histograms table.

    Args:
        value: A ``Summary.Value`` holding ``histo`` or a ``[k, 3]`` numeric tensor.
        _metadata: Its SummaryMetadata (unused: the value's shape says everything).

    Returns:
        One row ``(count, min, max, sum, sum_squares, buckets_json, raw_buckets_json)``.

    Raises:
        DecodeFailure: neither a HistogramProto nor a real-valued ``[k, 3]`` tensor, or a
            HistogramProto whose ``bucket`` and ``bucket_limit`` lengths differ.
    """
    kind = value.WhichOneof("value")
    if kind == "histo":
        return Decoded(TABLE, [proto_row(value.histo)], "float64")
    if kind == "tensor":
        return Decoded(TABLE, [tensor_row(value.tensor)], dtype_name(value.tensor.dtype))
    raise DecodeFailure(f"a histogram must be histo or a [k,3] tensor, got {kind or 'no value'}")


def proto_row(histo: Any) -> tuple[Any, ...]:
    """The row of a ``HistogramProto``: TensorBoard's buckets, and the proto's own as raw.

    Args:
        histo: A ``HistogramProto``.

    Returns:
        ``(num, min, max, sum, sum_squares, buckets_json, raw_buckets_json)``.

    Raises:
        DecodeFailure: ``bucket`` and ``bucket_limit`` have different lengths.
    """
    # Python lists, not NumPy: a histogram has tens of buckets, where a NumPy call costs
    # more than the arithmetic it saves (a third of the mixed benchmark's decoding was here).
    limits, counts = histo.bucket_limit[:], histo.bucket[:]
    if len(limits) != len(counts):
        raise DecodeFailure(
            f"histogram has {len(limits)} bucket limits but {len(counts)} bucket counts"
        )
    low, high = histo.min, histo.max
    return (
        histo.num,
        low,
        high,
        histo.sum,
        histo.sum_squares,
        _floats_json(shown_buckets(low, high, limits, counts)),
        _floats_json(list(zip(limits, counts, strict=True))),
    )


def shown_buckets(
    low: float, high: float, limits: list[float], counts: list[float]
) -> list[tuple[float, float, float]]:
    """TensorBoard's (left, right, count) buckets of a ``HistogramProto``.

    Empty buckets at both ends are dropped (``count > 0`` is not empty, so NaN counts are
    empty too); the outer edges become ``low`` and ``high`` (the proto's min and max), the
    inner ones are the limits between the buckets kept.

    Args:
        low: The histogram's ``min``; high: its ``max``.
        limits: ``bucket_limit`` (right edges); counts: ``bucket``, as long as ``limits``.

    Returns:
        The ``[left, right, count]`` buckets, none when every bucket is empty.
    """
    first = 0
    for count in counts:
        if count > 0:
            break
        first += 1
    else:
        return []
    last = len(counts) - 1
    while not counts[last] > 0:
        last -= 1
    inner = limits[first:last]
    return list(zip([low, *inner], [*inner, high], counts[first : last + 1], strict=True))


def tensor_row(tensor: Any) -> tuple[Any, ...]:
    """The row of a TF2 ``[k, 3]`` (left, right, count) tensor, buckets as given.

    Args:
        tensor: A real-valued ``TensorProto`` of shape ``[k, 3]`` (any field encoding).

    Returns:
        ``(count, min, max, None, None, buckets_json, None)``; min and max are None when
        ``k = 0``.

    Raises:
        DecodeFailure: the tensor is not real-valued, not of shape ``[k, 3]``, or its values
            do not fill that shape exactly.
    """
    shape = shape_of(tensor)
    if len(shape) != 2 or shape[1] != 3 or shape[0] < 0:
        raise DecodeFailure(f"a histogram tensor must have shape [k,3], got {shape}")
    packed = _PACKED_FORMATS.get(tensor.dtype)
    content = tensor.tensor_content
    if packed is not None and content and len(content) == shape[0] * 3 * packed[1]:
        # Packed floats, as writers send them: Python floats straight from the bytes (in
        # tensor_to_array's native order), with no NumPy call (tens of buckets each).
        values = array(packed[0], content).tolist()
        counts = values[2::3]
        buckets = list(zip(values[0::3], values[1::3], counts, strict=True))
        return (total(counts), values[0], values[-2], None, None, _floats_json(buckets), None)
    if not content:
        # Checked before decoding: TensorFlow would repeat a lone value over the whole shape.
        given = max(len(getattr(tensor, name)) for name in _VALUE_FIELDS)
        if given != shape[0] * 3:
            raise DecodeFailure(f"a [{shape[0]},3] histogram tensor holds {given} values")
    decoded = tensor_to_array(tensor)
    if decoded.dtype.kind not in "fiu" or decoded.shape != (shape[0], 3):
        raise DecodeFailure(f"a histogram tensor must be real [k,3], got {decoded.dtype}")
    rows = decoded.astype("float64")
    count = total(rows[:, 2].tolist())
    low = float(rows[0, 0]) if len(rows) else None
    high = float(rows[-1, 1]) if len(rows) else None
    return (count, low, high, None, None, buckets_json(rows), None)


def total(counts: list[float]) -> float:
    """The exactly rounded sum of ``counts``, as ``math.fsum`` gives it, and IEEE's sum where
    fsum raises: NaN when they hold both infinities, ±inf when the exact sum of finite counts
    lies beyond the float range."""
    try:
        return math.fsum(counts)
    except (ValueError, OverflowError):  # +inf with -inf; partial sums beyond the range
        pass
    infinite = {count for count in counts if math.isinf(count)}
    if len(infinite) == 2 or any(count != count for count in counts):
        return math.nan
    if infinite:
        return infinite.pop()
    exact = sum(map(Fraction, counts))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _floats_json(rows: Sequence[Sequence[float]]) -> str:
    """``buckets_json`` of rows (lists or tuples) of Python floats, with no NumPy array made
    of them."""
    text = orjson.dumps(rows)  # the same text as of their float64 array (tested)
    return text.decode("ascii") if _no_null(text) else _spelled(rows)


def buckets_json(buckets: Sequence[Sequence[float]] | np.ndarray) -> str:
    """JSON text ``[[left,right,count],...]`` with ±inf as ``±1e999`` and NaN as ``null``.

    Args:
        buckets: Sequences of numbers, or a 2-D array: (left, right, count) triples, or
            (limit, count) pairs.

    Returns:
        The JSON text (no spaces).
    """
    # orjson writes a float64 in its shortest round-tripping form, as repr() does (the
    # spelling may differ, as 1e-05 against 0.00001, never the number), about four times
    # faster than the json module, which float formatting dominates here.  It writes
    # NaN and ±inf as null: any null sends the buckets through json_number, number by
    # number.  Numbers go through float64 first, as json_number's float() does, so an
    # integer count is written as a float.
    import numpy as np

    array = np.ascontiguousarray(buckets, dtype=np.float64)
    text = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)
    return text.decode("ascii") if _no_null(text) else _spelled(array)


def _no_null(text: bytes) -> bool:
    """Whether orjson's text holds no ``null`` (no NaN or ±inf written as one)."""
    # Not ``b"n" not in text``: bytes' ``in`` first tries its operand as an integer and
    # formats the TypeError, which cost more than the search (a histogram's JSON is short).
    return text.find(b"n") < 0


def _spelled(rows: Any) -> str:
    """Buckets holding NaN or ±inf, which orjson writes as null: number by number."""
    return "[" + ",".join("[" + ",".join(json_number(x) for x in row) + "]" for row in rows) + "]"


def json_number(number: float) -> str:
    """One float as a JSON number that parses back to the same float64 (see module docs)."""
    number = float(number)
    if math.isfinite(number):
        return repr(number)
    if math.isnan(number):
        return NAN_JSON
    return POS_INF_JSON if number > 0 else NEG_INF_JSON
