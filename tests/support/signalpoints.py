"""Run the command line and send it a signal at a point its code reaches, never after a sleep.

Run as ``python -m tests.support.signalpoints SIGNAL POINT tbconvert-arguments...``.  POINT
is ``MODULE`` (the signal arrives as MODULE's import ends, still inside the import) or
``MODULE:FUNCTION`` or ``MODULE:CLASS.METHOD`` (as it is first called; MODULE is imported when
the command imports it).  The
process signals itself, and Python runs the handler at its next instruction, so the signal
lands at the same point of the command on any machine, however loaded.  The command then runs
as ``python -m tbconvert`` does: from the package's ``__main__``.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import signal
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class _AtImport(importlib.abc.MetaPathFinder):
    """Runs ``then(module)`` once ``name`` is imported, inside the import that loads it."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        assert spec is not None and spec.loader is not None, fullname
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            self.then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def arm(signum: int, point: str) -> None:
    """Send ``signum`` to this process when the command reaches ``point``."""
    module_name, _, function_name = point.partition(":")

    def send(*_: Any) -> None:
        os.kill(os.getpid(), signum)

    def patch(module: ModuleType) -> None:
        *path, name = function_name.split(".")
        owner: Any = functools.reduce(getattr, path, module)
        original = getattr(owner, name)

        @functools.wraps(original)
        def signalled(*args: Any, **kwargs: Any) -> Any:
            setattr(owner, name, original)  # once: a second signal means "stop at once"
            send()
            return original(*args, **kwargs)

        setattr(owner, name, signalled)

    sys.meta_path.insert(0, _AtImport(module_name, patch if function_name else send))


def main(arguments: list[str]) -> None:
    signum = int(signal.Signals[arguments[0]])
    arm(signum, arguments[1])
    sys.argv = ["tbconvert", *arguments[2:]]
    runpy.run_module("tbconvert", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
