"""The ``tbconvert`` command line: parse, call the library, render.  Nothing else lives here.

``main`` holds the group and the options commands share; the commands are in ``convert``
(tf), ``inspect`` (runs, show, export, datasette-metadata) and ``db``, and all text rendering
in ``render``.  Library modules are imported inside commands, so ``--help`` starts fast.
"""

from __future__ import annotations

# Importing the command modules registers them on the group.
from converter.cli import convert, db, inspect
from converter.cli.main import cli

__all__ = ["cli", "convert", "db", "inspect"]
