"""Images (design §5 images): TF1 / torch / tensorboardX ``Summary.Image`` values (one image per
value; torch grids and ``add_video`` GIFs included) and TF2 ``[w, h, img_1, ..., img_k]``
string tensors (k images per step, each row keeps its index).

The encoded bytes are stored unchanged and content-addressed, so an image logged at every
step is stored once.  Pillow reads format, width and height from the header only: pixels are
never decoded, so a decompression bomb costs nothing and is stored like any other image.
Bytes Pillow cannot identify are stored too, with format NULL and the writer's own width and
height: a corrupt image is data to keep, never a reason to fail.

The common PNG (a valid IHDR chunk, then the image data: what PIL, libpng and every
TensorBoard writer make) is read without Pillow, with the checks Pillow's reader makes of
those two chunks, so that Pillow (its import and its plugins' are most of what a few hundred
images cost) is loaded only for other images.
"""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from typing import Any

from tbconvert.plugins._tensorproto import DT_STRING, shape_of
from tbconvert.plugins.base import Decoded, DecodeFailure, blob

TABLE = "images"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_GIF_MAGICS = (b"GIF87a", b"GIF89a")
# Signature, then the IHDR chunk's length (13) and type.
_PNG_IHDR_START = _PNG_MAGIC + b"\x00\x00\x00\x0dIHDR"
# Width, height, bit depth, colour type, compression, filter, interlace, then the CRC.
_IHDR = struct.Struct(">IIBBBBBI")
# The (bit depth, colour type) pairs the PNG standard allows: those Pillow opens.
_PNG_DEPTHS = {
    (1, 0), (2, 0), (4, 0), (8, 0), (16, 0),
    (8, 2), (16, 2),
    (1, 3), (2, 3), (4, 3), (8, 3),
    (8, 4), (16, 4),
    (8, 6), (16, 6),
}  # fmt: skip

Header = tuple[str | None, int | None, int | None]  # (format, width, height)


def decode(value: Any, _metadata: Any) -> Decoded:
    """Decode one image value into ``(idx, blob_id, format, width, height)`` rows.

    Args:
        value: A ``Summary.Value`` whose oneof is ``image`` or a DT_STRING ``tensor``.
        _metadata: The value's metadata (unused: the encoding says everything).

    Returns:
        One row for a ``Summary.Image``; k rows (idx 0..k-1) for a TF2 tensor of k images.

    Raises:
        DecodeFailure: the value is neither a ``Summary.Image`` nor a rank-1 string tensor
            with the two size strings in front.
    """
    kind = value.WhichOneof("value")
    if kind == "image":
        return _summary_image(value.image)
    if kind == "tensor":
        return _image_tensor(value.tensor)
    raise DecodeFailure(f"an image must be a Summary.Image or a string tensor, got {kind}")


def image_header(data: bytes) -> Header:
    """Format, width and height of encoded image bytes, read from the header only.

    Never raises: bytes Pillow cannot identify give ``(None, None, None)``.  Images too large
    for Pillow's decompression-bomb limit are harmless here (nothing is decoded); PNG and GIF
    ones still get their format and size from their fixed header fields.
    """
    return _plain_png(data) or _pillow_header(data)


def _plain_png(data: bytes) -> Header | None:
    """The header of a PNG whose IHDR chunk is valid and followed by the image data, as
    Pillow reads it; None for any other bytes (Pillow's to judge)."""
    if not data.startswith(_PNG_IHDR_START) or data[37:41] != b"IDAT":
        return None
    width, height, depth, colour, _, filter_method, _, crc = _IHDR.unpack_from(data, 16)
    if (
        not width
        or not height
        or filter_method
        or (depth, colour) not in _PNG_DEPTHS
        or zlib.crc32(data[12:29]) != crc
    ):
        return None
    return "PNG", width, height


def _pillow_header(data: bytes) -> Header:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DecompressionBombWarning, truncated-file chatter
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                return image.format, int(width), int(height)
    except Image.DecompressionBombError:
        return _sniff(data)
    except Exception:
        return None, None, None


def string_elements(tensor: Any) -> list[bytes]:
    """The elements of a DT_STRING tensor, checked against its shape (C order).

    Raises:
        DecodeFailure: another dtype, or a shape that does not match the element count.
    """
    if tensor.dtype != DT_STRING:
        raise DecodeFailure(f"expected a string tensor, got dtype enum {tensor.dtype}")
    elements = [bytes(element) for element in tensor.string_val[:]]
    count = 1
    for size in shape_of(tensor):
        count *= size
    if count != len(elements):
        raise DecodeFailure(f"a string tensor of {count} elements holds {len(elements)}")
    return elements


def _summary_image(image: Any) -> Decoded:
    return image_rows(bytes(image.encoded_image_string), image.width, image.height)


def image_rows(data: bytes, writer_width: int, writer_height: int) -> Decoded:
    """The row of a ``Summary.Image`` of encoded ``data`` and the writer's width and height
    (its fields, 0 when not given), as :func:`decode` makes it."""
    image_format, width, height = image_header(data)
    if image_format is None:  # unreadable bytes: the writer's word, when it gave one
        width, height = writer_width or None, writer_height or None
    blobs: dict[str, bytes] = {}
    return Decoded(TABLE, [(0, blob(data, blobs), image_format, width, height)], None, blobs)


def _image_tensor(tensor: Any) -> Decoded:
    dims = shape_of(tensor)
    if len(dims) != 1:
        raise DecodeFailure(f"a TF2 image tensor has rank 1, got shape {dims}")
    elements = string_elements(tensor)
    if len(elements) < 2:
        raise DecodeFailure("a TF2 image tensor starts with its width and height")
    header_width, header_height = _ascii_int(elements[0]), _ascii_int(elements[1])
    blobs: dict[str, bytes] = {}
    rows = []
    for idx, data in enumerate(elements[2:]):
        image_format, width, height = image_header(data)
        if image_format is None:
            width, height = header_width, header_height
        rows.append((idx, blob(data, blobs), image_format, width, height))
    return Decoded(TABLE, rows, "string", blobs)


def _ascii_int(data: bytes) -> int | None:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


def _sniff(data: bytes) -> Header:
    """Format and size from the fixed header fields of PNG (IHDR) and GIF (screen size)."""
    if data.startswith(_PNG_MAGIC) and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "PNG", width, height
    if data[:6] in _GIF_MAGICS and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "GIF", width, height
    return None, None, None
