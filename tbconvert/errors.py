"""Typed errors raised by the library; only ``tbconvert.cli`` turns them into exit codes."""

from __future__ import annotations

import importlib
from types import ModuleType


def install_hint(extra: str) -> str:
    """How to install the optional extra ``extra``: the one form every message gives (SPEC §2).

    tbconvert is installed from a checkout (it is on no package index), so the command is the
    one that works there; naming the extra also tells a user of another installer what to add.
    """
    return f"install the {extra} extra: pip install '.[{extra}]' in a tbconvert checkout"


class ConverterError(Exception):
    """Base class: a message that names the path (and byte offset) plus a hint with the fix."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset
        self.hint = hint

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}: "
            if self.offset is not None:
                where = f"{self.path}: at byte {self.offset}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class LogdirError(ConverterError):
    """The logdir is missing or cannot be walked."""


class StoreError(ConverterError):
    """The store cannot be opened, created or written."""


class StoreVersionError(StoreError):
    """The store's schema revision is unknown to (newer than) this converter."""


class UsageError(ConverterError):
    """Arguments that cannot work together; the CLI maps this to exit code 2."""


class MissingDependency(ConverterError, ImportError):
    """An optional dependency is not installed; the hint names the extra that brings it."""


def import_extra(module: str, extra: str, needed_for: str) -> ModuleType:
    """Import ``module`` of the optional extra ``extra``, or fail in one line naming the extra.

    Args:
        module: The module to import (``matplotlib.figure``).
        extra: The extra that installs it (``plot``).
        needed_for: What needs it, the message's subject (``plotting``).

    Raises:
        MissingDependency: the module cannot be imported.
    """
    try:
        # The package first, as an import statement does: importing a submodule already
        # loaded would not notice that its package cannot be imported.
        importlib.import_module(module.split(".")[0])
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingDependency(
            f"{needed_for} needs {module.split('.')[0]}, which is not installed",
            hint=install_hint(extra),
        ) from error


class PushError(ConverterError):
    """Another tracker (MLflow) cannot be reached, or refuses what a push sends."""
