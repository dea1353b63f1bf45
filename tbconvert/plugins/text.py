"""Text: ``DT_STRING`` tensors of any shape (design §5, reference §2.4).

TF2 writes rank 0, torch and tensorboardX shape ``[1]`` (under a tag ending in
``/text_summary``, kept as written by the caller), TF1 any shape (tables are 2-D).  Every
element becomes one row ``(idx, value)``: ``idx`` is its flat index in C (row-major) order,
``value`` its bytes decoded as UTF-8, invalid bytes written as ``\\xNN`` escapes
(``errors="backslashreplace"``) so a broken string is still kept.

A tensor whose ``string_val`` is shorter than its shape follows TensorFlow's
``make_ndarray``: the last value fills the remaining elements.  A tensor with no element at
all has no row to give and is refused, so the caller keeps it raw instead of losing the record;
so is a short tensor whose filling would exceed ``MAX_FILLED`` elements (a few bytes must not
claim gigabytes).
"""

from __future__ import annotations

from typing import Any

from tbconvert.plugins._tensorproto import DT_STRING, dtype_name, shape_of
from tbconvert.plugins.base import Decoded, DecodeFailure

TABLE = "texts"
MAX_FILLED = 1 << 16  # most elements a short string_val may be filled up to


def decode(value: Any, _metadata: Any) -> Decoded:
    """Decode a string tensor into one ``(idx, value)`` row per element.

    Args:
        value: A ``Summary.Value`` holding a ``DT_STRING`` tensor.
        _metadata: Its SummaryMetadata (unused).

    Returns:
        The rows for the texts table, in flat (row-major) order.

    Raises:
        DecodeFailure: not a string tensor, no element, or more strings than its shape holds.
    """
    kind = value.WhichOneof("value")
    if kind != "tensor":
        raise DecodeFailure(f"text must be a string tensor, got {kind or 'no value'}")
    tensor = value.tensor
    if tensor.dtype != DT_STRING:
        raise DecodeFailure(f"text must be a string tensor, got {dtype_name(tensor.dtype)}")
    strings = string_elements(tensor)
    return Decoded(
        TABLE,
        [(idx, raw.decode("utf-8", errors="backslashreplace")) for idx, raw in enumerate(strings)],
        "string",
    )


def string_elements(tensor: Any) -> list[bytes]:
    """The elements of a ``DT_STRING`` tensor, flattened in C order.

    Args:
        tensor: A ``TensorProto`` with dtype ``DT_STRING``.

    Returns:
        One ``bytes`` per element (the shape's product of them).

    Raises:
        DecodeFailure: packed ``tensor_content`` (TF-internal), no element, too many strings,
            or too few to fill more than ``MAX_FILLED`` elements.
    """
    if tensor.tensor_content:
        raise DecodeFailure("packed tensor_content in a string tensor is not readable")
    size = 1
    for dim in shape_of(tensor):
        if dim < 0:
            raise DecodeFailure(f"string tensor has unknown dimension {dim}")
        size *= dim
    strings: list[bytes] = tensor.string_val[:]  # a list of bytes, made by the slice
    if size == 0 or not strings:
        raise DecodeFailure(f"string tensor holds no element (shape size {size})")
    if len(strings) > size:
        raise DecodeFailure(f"string tensor has {len(strings)} strings for {size} elements")
    if len(strings) < size and size > MAX_FILLED:
        raise DecodeFailure(f"string tensor has {len(strings)} strings for {size} elements")
    strings.extend([strings[-1]] * (size - len(strings)))
    return strings
