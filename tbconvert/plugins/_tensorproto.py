"""TensorProto to NumPy, through tensorboard's own ``make_ndarray`` (imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tbconvert.plugins.base import DecodeFailure

if TYPE_CHECKING:
    # Imported where needed: a run that finds nothing new to read need not pay for NumPy.
    import numpy as np

# DataType enum values (tensorboard/compat/proto/types.proto) that decoders test for.
DT_FLOAT = 1
DT_DOUBLE = 2
DT_STRING = 7
DT_BFLOAT16 = 14

# Packed (tensor_content) dtypes read here directly, in make_ndarray's native byte order.
_PACKED = {DT_FLOAT: "float32", DT_DOUBLE: "float64"}

# DataType enum values to NumPy-style names.
_DTYPE_NAMES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    18: "complex128",
    19: "float16",
    22: "uint32",
    23: "uint64",
}


def shape_of(tensor: Any) -> list[int]:
    """A TensorProto's dimensions.

    Repeated fields are read by slicing throughout the plugins: ``list()`` or a ``for`` over
    one walks it index by index until an IndexError, which protobuf formats a message for
    (a tenth of a mixed logdir's decoding went to those errors).
    """
    return [dim.size for dim in tensor.tensor_shape.dim[:]]


def dtype_name(dtype: int) -> str:
    """A readable name for a TensorProto dtype enum value."""
    return _DTYPE_NAMES.get(dtype, f"dtype_{dtype}")


# A TensorProto may declare a shape and give one value to repeat across it; refuse to
# materialise more than this many elements from fewer values (a corrupt shape could ask for
# terabytes).
_MAX_FILL = 1 << 24


def tensor_to_array(tensor: Any) -> np.ndarray:
    """Decode a TensorProto into an array (any field, any dtype tensorboard knows).

    Raises:
        DecodeFailure: unknown dtype, inconsistent content, or a fill beyond reason.
    """
    import numpy as np

    shape = shape_of(tensor)
    elements = 1
    for size in shape:
        elements *= max(size, 0)
    content = tensor.tensor_content
    if not content and elements > _MAX_FILL:
        raise DecodeFailure(f"tensor declares {elements} elements without packed content")
    packed = _PACKED.get(tensor.dtype) if content else None
    if (
        packed is not None
        and min(shape, default=0) >= 0
        and len(content) % np.dtype(packed).itemsize == 0
    ):
        # What make_ndarray does for packed floats, without its per-call overhead (a third
        # of a histogram's decoding); anything else, a size mismatch too, is left to it.
        flat = np.frombuffer(content, dtype=packed)
        if flat.size == elements:
            array: np.ndarray = flat.reshape(shape).copy()
            return array
    # Imported only here: it brings TensorFlow's stub, absl and numpy.ma (35 ms).
    from tensorboard.util import tensor_util

    try:
        return np.asarray(tensor_util.make_ndarray(tensor))
    except (TypeError, ValueError, KeyError, MemoryError) as error:
        raise DecodeFailure(f"cannot decode {dtype_name(tensor.dtype)} tensor: {error}") from error
