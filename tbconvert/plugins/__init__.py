"""Plugin decoders: one module per TensorBoard plugin (scalars, images, audio, histograms,
text, hparams) plus ``tensors``, which keeps everything else raw.

Each module has ``decode(value, metadata) -> Decoded``: the store table and the rows' payload
columns (see ``tbconvert.rows.PAYLOAD_COLUMNS``), or :class:`~tbconvert.plugins.base.DecodeFailure`.
``registry`` chooses the decoder of a value; ``names`` lists plugin names without importing any
decoder (the CLI needs them at start-up); ``_tensorproto`` turns TensorProtos into NumPy.
"""
