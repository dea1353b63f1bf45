"""``python -m converter``: the same CLI as the ``tbconvert`` console script."""

from converter.cli import cli

if __name__ == "__main__":
    cli(prog_name="tbconvert")
