"""The plugin registry: which decoder reads a value, chosen per (file, tag).

A value's plugin follows TensorBoard's data server: a primitive oneof (``simple_value``,
``image``, ``histo``, ``audio``) decides by itself; otherwise the plugin name of the tag's
first metadata in the file decides (TF1 writers send metadata only once per tag).

A decoder takes the value and the tag's remembered metadata and returns a :class:`Decoded`:
the store table and the rows' payload columns (the key columns are added by the caller).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tbconvert.plugins import tensors
from tbconvert.plugins.base import Decoded, DecodeFailure
from tbconvert.plugins.names import DECODED_PLUGINS

# Oneof field of Summary.Value -> plugin that owns it regardless of metadata.
PRIMITIVE_PLUGINS = {
    "simple_value": "scalars",
    "image": "images",
    "histo": "histograms",
    "audio": "audio",
}


Decoder = Callable[[Any, Any], Decoded]


class LazyDecoders:
    """Plugin name -> its decoder, the plugin's module imported when first asked for: a
    logdir of scalars never loads Pillow or the audio and hparams protos (a tenth of a
    converter's start-up)."""

    def __init__(self, plugins: tuple[str, ...]) -> None:
        """Args: the plugins with a module ``tbconvert.plugins.<name>`` of their own."""
        self._plugins = frozenset(plugins)
        self._loaded: dict[str, Any] = {}

    def get(self, plugin: str) -> Decoder | None:
        """The plugin's decoder (its module's ``decode``), None for a plugin without one."""
        module = self._loaded.get(plugin)
        if module is None:
            if plugin not in self._plugins:
                return None
            module = self._loaded[plugin] = importlib.import_module(f"tbconvert.plugins.{plugin}")
        decode: Decoder = module.decode
        return decode


DECODERS = LazyDecoders(DECODED_PLUGINS)
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
