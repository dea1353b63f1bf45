"""Plugin names, with no imports: the CLI and the filters need them without loading decoders."""

from __future__ import annotations

# Plugins with a decoder of their own (see ``tbconvert.plugins.registry.DECODERS``).
DECODED_PLUGINS = ("audio", "histograms", "hparams", "images", "scalars", "text")
# Names accepted by --plugins: the decoded plugins, and "tensors" for everything kept raw.
KNOWN_PLUGINS = (*DECODED_PLUGINS, "tensors")
# The tag the reader gives a run's SessionLog series (its plugin: ``session_log``); the
# resumed-run rule looks for it by that name.
SESSION_LOG_TAG = "__session_log__"
