"""The plugin registry: which decoder reads a value, chosen per (file, tag).

A value's plugin follows TensorBoard's data server: a primitive oneof (``simple_value``,
``image``, ``histo``, ``audio``) decides by itself; otherwise the plugin name of the tag's
first metadata in the file decides (TF1 writers send metadata only once per tag).

A decoder takes the value and the tag's remembered metadata and returns a :class:`Decoded`:
the store table and the rows' payload columns (the key columns are added by the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from converter.plugins import audio, histograms, hparams, images, scalars, tensors, text
from converter.plugins.base import Decoded, DecodeFailure

# Oneof field of Summary.Value -> plugin that owns it regardless of metadata.
PRIMITIVE_PLUGINS = {
    "simple_value": "scalars",
    "image": "images",
    "histo": "histograms",
    "audio": "audio",
}


Decoder = Callable[[Any, Any], Decoded]

DECODERS: dict[str, Decoder] = {
    "scalars": scalars.decode,
    "images": images.decode,
    "audio": audio.decode,
    "histograms": histograms.decode,
    "text": text.decode,
    "hparams": hparams.decode,
}
# Everything else (pr_curves, custom_scalars, mesh, graph sub-plugins, unknown plugins, and
# values their own plugin cannot read) is kept raw by the generic tensor decoder.
FALLBACK: Decoder = tensors.decode

__all__ = ["DECODERS", "FALLBACK", "DecodeFailure", "Decoded", "Decoder", "plugin_for"]


def plugin_for(kind: str | None, metadata: Any) -> str:
    """The plugin of a value: its primitive kind, else the first metadata's plugin name."""
    primitive = PRIMITIVE_PLUGINS.get(kind or "")
    if primitive is not None:
        return primitive
    if metadata is not None and metadata.plugin_data.plugin_name:
        return str(metadata.plugin_data.plugin_name)
    return "tensor" if kind == "tensor" else "unknown"
