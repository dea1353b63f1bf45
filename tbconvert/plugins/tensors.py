"""The generic decoder: any value kept raw as dtype, shape and bytes (design §5).

Used for pr_curves, custom_scalars, mesh, graph sub-plugins, unknown plugins, and values their
own plugin could not read, so a later version can interpret them.  Numeric tensors keep their
little-endian element bytes (C order); a one-element string tensor keeps the string's bytes;
any other string tensor keeps the serialized TensorProto (dtype ``string_tensorproto``), and
so does a tensor NumPy cannot represent (dtype ``tensorproto``).
"""

from __future__ import annotations

import json
from typing import Any

from tbconvert.plugins._tensorproto import DT_STRING, dtype_name, shape_of, tensor_to_array
from tbconvert.plugins.base import Decoded, DecodeFailure, blob

TABLE = "tensors"


def decode(value: Any, metadata: Any) -> Decoded:
    """Keep a tensor value as (dtype, shape JSON, bytes)."""
    kind = value.WhichOneof("value")
    if kind == "tensor":
        return _tensor(value.tensor)
    if kind is None:
        # Metadata-only values (hparams written by torch/tensorboardX) carry their data in
        # the metadata: keep it whole.
        if metadata is None:
            raise DecodeFailure("a value with neither data nor metadata")
        return raw_bytes(metadata.SerializeToString(), "summary_metadata")
    # A primitive that its own plugin could not read: keep the serialized oneof message.
    field = getattr(value, kind)
    data = field.SerializeToString() if hasattr(field, "SerializeToString") else repr(field)
    return raw_bytes(data if isinstance(data, bytes) else data.encode(), f"{kind}_proto")


def raw_bytes(data: bytes, dtype: str) -> Decoded:
    """A row holding opaque bytes (graph defs, run metadata, serialized protos)."""
    blobs: dict[str, bytes] = {}
    sha = blob(data, blobs)
    return Decoded(TABLE, [(dtype, "[]", sha)], dtype, blobs)


def _tensor(tensor: Any) -> Decoded:
    shape = shape_of(tensor)
    dtype = dtype_name(tensor.dtype)
    if tensor.dtype == DT_STRING:
        if len(tensor.string_val) == 1 and _elements(shape) == 1:
            data = bytes(tensor.string_val[0])
        else:
            data, dtype = tensor.SerializeToString(), "string_tensorproto"
    elif tensor.tensor_content:
        data = bytes(tensor.tensor_content)
    else:
        try:
            array = tensor_to_array(tensor)
        except DecodeFailure:
            # NumPy cannot hold it (uint32/uint64 vals, bfloat16, ...): keep the proto itself.
            data, dtype = tensor.SerializeToString(), "tensorproto"
        else:
            data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    blobs: dict[str, bytes] = {}
    sha = blob(data, blobs)
    return Decoded(TABLE, [(dtype, json.dumps(shape), sha)], dtype, blobs)


def _elements(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
