"""tbconvert: TensorBoard event logs into a queryable run store.

The public API is small and imported lazily so that ``tbconvert --help`` starts fast:

- :func:`convert` converts a logdir into a store and returns a
  :class:`~tbconvert.conversion.summary.Summary`; :func:`watch` repeats it.
- :func:`open_store` opens a store for reading (:class:`~tbconvert.query.store.Store`).

How the package is organised, in pipeline order (imports only go down this list, and
``tests/test_layers.py`` enforces it):

- ``errors``, ``filters``, ``rows``: the shared vocabulary: errors, what a user selects, and
  the row contract between decoders and the store.
- ``plugins/``: one decoder per TensorBoard plugin (``registry`` picks one per value).
- ``reading/``: bytes to rows, no database: ``discovery`` (logdir to runs and files) ->
  ``records`` / ``blocks`` (TFRecord framing, CRCs in ``crc``) -> ``events`` -> ``decoder``
  and ``fast.block_scalars`` -> ``chunks`` (one file into chunks; ``small_files``: many small ones
  at
  once, their records parsed together in ``fast.batch``).  This is what ``--jobs`` workers
  run.
- ``store/``: the run store: ``engine``, ``models``, ``migrate``/``admin`` (Alembic), ``files``
  (per-file state), ``writer`` with per-backend ``bulk`` inserts, ``reader`` and ``query``.
- ``conversion/``: ``plan`` -> ``workers`` -> ``job`` (apply chunks) -> ``summary``.
- ``export`` (and ``image_export``), ``hparams``, ``plot``, ``report`` (charts in
  ``svgchart``), ``datasette``, ``serve``: getting data out: files, the hparams comparison,
  plots, the offline HTML page, datasette.
- ``cli/``: the ``tbconvert`` command and all text rendering; nothing imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tbconvert.version import __version__

if TYPE_CHECKING:
    from tbconvert.conversion.pipeline import convert, watch
    from tbconvert.query.store import open_store

__all__ = ["__version__", "convert", "open_store", "watch"]


def __getattr__(name: str) -> Any:
    if name in ("convert", "watch"):
        from tbconvert.conversion import pipeline

        return getattr(pipeline, name)
    if name == "open_store":
        from tbconvert.query.store import open_store

        return open_store
    raise AttributeError(f"module 'tbconvert' has no attribute {name!r}")
