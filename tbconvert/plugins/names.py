"""Plugin names, with no imports: the CLI and the filters need them without loading decoders."""

from __future__ import annotations

# Plugins with a decoder of their own (see ``tbconvert.plugins.registry.DECODERS``).
DECODED_PLUGINS = ("audio", "histograms", "hparams", "images", "scalars", "text")
# Names accepted by --plugins: the decoded plugins, and "tensors" for everything kept raw.
KNOWN_PLUGINS = (*DECODED_PLUGINS, "tensors")
