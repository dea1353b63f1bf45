"""The masked CRC-32C of TFRecord framing: the only definition of the mask.

TFRecord stores ``mask(crc32c(data))`` for a record's length field and for its payload, where
``mask`` rotates the CRC right by 15 bits and adds a constant, so that a CRC of data that
itself holds CRCs does not degenerate.  The per-record hot loop in ``records.py`` inlines
:func:`mask` for speed (one function call per record is measurable there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import google_crc32c

if TYPE_CHECKING:
    import numpy as np

MASK_DELTA = 0xA282EAD8
U32_MASK = 0xFFFFFFFF


def mask(crc: int) -> int:
    """The masked form of a CRC-32C value, as TFRecord stores it."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & U32_MASK


def masked_crc32c(data: bytes | memoryview) -> int:
    """The masked CRC-32C (Castagnoli) that TFRecord stores for ``data``."""
    # The C extension only takes bytes objects, so other buffers are copied.
    crc: int = google_crc32c.value(data if type(data) is bytes else bytes(data))
    return mask(crc)


def unmask_array(masked: np.ndarray) -> np.ndarray:
    """The CRC-32C values behind an array of masked ones (uint32)."""
    import numpy as np

    rotated = masked - np.uint32(MASK_DELTA)
    result: np.ndarray = (rotated << np.uint32(15)) | (rotated >> np.uint32(17))
    return result


def byte_view(data: np.ndarray, dtype: str) -> np.ndarray:
    """A uint8 array read as ``dtype`` at every byte offset (unaligned, no copy)."""
    import numpy as np

    width = np.dtype(dtype).itemsize
    view: np.ndarray = np.ndarray((len(data) - width + 1,), dtype=dtype, buffer=data, strides=(1,))
    return view
