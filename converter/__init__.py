"""tbconvert: TensorBoard event logs into a queryable run store.

The public API is small and imported lazily so that ``tbconvert --help`` starts fast:

- :func:`convert` converts a logdir into a store and returns a :class:`~converter.report.Summary`.
- :func:`open_store` opens a store for reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from converter.conversion import convert
    from converter.store.reader import open_store

__all__ = ["__version__", "convert", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "convert":
        from converter.conversion import convert

        return convert
    if name == "open_store":
        from converter.store.reader import open_store

        return open_store
    raise AttributeError(f"module 'converter' has no attribute {name!r}")
