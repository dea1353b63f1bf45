"""Scalars: ``simple_value`` (TF1, torch, tensorboardX) and one-element tensors (TF2, torch
``new_style``), whatever their dtype or field: ``tensor_content``, ``float_val``,
``double_val``, integer and half fields; rank 0 or shape ``[1]``.  Values become float64:
float32 widens exactly, float64 (DT_DOUBLE) is kept, NaN and infinities are kept as such.
"""

from __future__ import annotations

import struct
from typing import Any

from tbconvert.plugins._tensorproto import (
    DT_BFLOAT16,
    DT_DOUBLE,
    DT_FLOAT,
    dtype_name,
    tensor_to_array,
)
from tbconvert.plugins.base import Decoded, DecodeFailure

TABLE = "scalars"
_FLOAT32 = struct.Struct("<f")
_FLOAT64 = struct.Struct("<d")


def decode(value: Any, _metadata: Any) -> Decoded:
    """Decode one scalar value into a ``(value,)`` row of the scalars table."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return Decoded(TABLE, [(value.simple_value,)], "float32")
    if kind != "tensor":
        raise DecodeFailure(f"a scalar must be a number, got {kind or 'no value'}")
    return Decoded(TABLE, [(tensor_scalar(value.tensor),)], dtype_name(value.tensor.dtype))


def tensor_scalar(tensor: Any) -> float:
    """The single number of a one-element tensor, as a Python float."""
    # The two encodings TF2 and torch actually write, without the cost of numpy.
    content = tensor.tensor_content
    if tensor.dtype == DT_FLOAT:
        if len(content) == 4:
            return float(_FLOAT32.unpack(content)[0])
        if not content and len(tensor.float_val) == 1 and _rank_le_one(tensor):
            return float(tensor.float_val[0])
    elif tensor.dtype == DT_DOUBLE and len(content) == 8:
        return float(_FLOAT64.unpack(content)[0])
    elif tensor.dtype == DT_BFLOAT16:
        # NumPy has no bfloat16: it is the upper half of a float32.
        if len(content) == 2:
            return float(_FLOAT32.unpack(b"\x00\x00" + content)[0])
        if not content and len(tensor.half_val) == 1:
            return float(_FLOAT32.unpack(struct.pack("<I", tensor.half_val[0] << 16))[0])
    array = tensor_to_array(tensor)
    if array.size != 1:
        raise DecodeFailure(f"a scalar tensor must hold one element, got shape {array.shape}")
    return float(array.reshape(-1)[0])


def _rank_le_one(tensor: Any) -> bool:
    dims = tensor.tensor_shape.dim
    return len(dims) == 0 or (len(dims) == 1 and dims[0].size == 1)
