"""tbconvert: TensorBoard event logs into a queryable run store.

The public API is small and imported lazily so that ``tbconvert --help`` starts fast:

- :func:`convert` converts a logdir into a store and returns a
  :class:`~tbconvert.conversion.summary.Summary`; :func:`watch` repeats it.
- :func:`open_store` opens a store for reading (:class:`~tbconvert.query.store.Store`).

How the package is organised, in pipeline order (imports only go down, and
``tests/test_layers.py`` enforces it; docs/architecture.md has the whole map):

- ``errors``, ``filters``, ``rows``: the shared vocabulary: errors, what a user selects, and
  the row contract between decoders and the store.
- ``plugins/``: one decoder per TensorBoard plugin (``registry`` picks one per value).
- ``reading/``: bytes to rows, no database (what ``--jobs`` workers run); ``reading/fast/``
  gives the same rows faster.
- ``store/``: schema and connections, shared by both sides.
- ``writing/``: rows into the store through one writer, one bulk backend per database.
- ``conversion/``: plan -> decode -> apply -> summarise (``convert`` and ``watch``).
- ``query/``: the read API (``open_store``); ``output/``: files, charts, the report, datasette.
- ``cli/``: the ``tbconvert`` command, one module per command family; nothing imports it.

Comments cite the design rules of docs/design.md as "design §N".
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
