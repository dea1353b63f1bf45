"""``python -m tbconvert`` and the ``tbconvert`` console script: the command line.

Ctrl-C and SIGTERM end the command with one line and exit 130 / 143 from its first moment
(SPEC §2): the signal handlers are in place before the command line is imported (a tenth of a
second), which is why the entry point lives here and not in ``tbconvert.cli``.
"""

import sys

from tbconvert.conversion import stopping


def main() -> None:
    """Run the command line; a signal while it is imported ends it as one at any later point."""
    stopping.stop_at_once()
    try:
        from tbconvert.cli import main as run_command_line
    except stopping.Stopped as stop:
        sys.stderr.write(f"{stop}\n")
        sys.exit(stop.exit_code)
    run_command_line()


if __name__ == "__main__":
    main()
