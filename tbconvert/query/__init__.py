"""The read API behind :func:`tbconvert.open_store`.

``store.Store`` is a facade that only calls down: ``lookups`` (runs, series, params and points
over one connection), ``inventory`` (what ``tbconvert runs`` and ``show`` list), ``tables``
(long-format rows, the hparams table, pandas frames) and ``results`` (the values it returns).
"""
