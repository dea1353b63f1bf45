"""The read commands' choices are defined once (``output/choices.py``) and cost the command
line's start-up nothing: importing it leaves NumPy, SQLAlchemy, pandas and matplotlib out."""

from __future__ import annotations

import subprocess
import sys

import click

from tbconvert.cli import cli
from tbconvert.output import choices


def test_the_command_line_imports_no_heavy_library_for_its_choices() -> None:
    code = (
        "import sys, tbconvert.cli\n"
        "print(sorted(name for name in ('numpy', 'sqlalchemy', 'pandas', 'matplotlib') "
        "if name in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_resumed_has_one_default_in_every_command() -> None:
    commands = {name: cli.commands[name] for name in ("plot", "report", "export")}
    for name, command in commands.items():
        (option,) = [param for param in command.params if param.name == "resumed"]
        assert isinstance(option.type, click.Choice), name
        assert tuple(option.type.choices) == choices.RESUMED, name
        assert option.default == choices.RESUMED_DEFAULT == "current", name
