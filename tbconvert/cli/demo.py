"""Print one example query of a store and its result as an aligned table (used by ``make demo``).

    python -m tbconvert.cli.demo STORE

Only the standard library's ``sqlite3`` is used, against the public views (design §6), the way
any SQL client would: the store is opened read-only and never created.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from tbconvert.cli.tables import render_table

QUERY = (
    "SELECT run_path, context, tag, step, value\n"
    "FROM v_last_scalars\n"
    "ORDER BY run_path, context, tag"
)
USAGE = "usage: python -m tbconvert.cli.demo STORE"
EXIT_FAILURE = 1
EXIT_USAGE = 2


def run_query(store: str | Path, query: str = QUERY) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run ``query`` on the SQLite store, opened read-only.

    Returns:
        The column names and the rows.

    Raises:
        sqlite3.Error: the file is missing, is not SQLite, or has no such view.
    """
    uri = Path(store).resolve().as_uri() + "?mode=ro"
    with sqlite3.connect(uri, uri=True) as conn:
        cursor = conn.execute(query)
        columns = [description[0] for description in cursor.description]
        return columns, cursor.fetchall()


def render_result(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The rows as an aligned table (NULL is a NaN value in the store), then their count."""
    table = render_table(columns, rows, null="NULL", rule=True)
    return f"{table}\n({len(rows)} row{'' if len(rows) == 1 else 's'})"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the example query and its result on stdout; errors go to stderr in one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return EXIT_USAGE
    store = args[0]
    if not Path(store).is_file():
        print(
            f"error: {store}: no such store file; create it with "
            f"`tbconvert tf --logdir DIR --store {store}`",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    try:
        columns, rows = run_query(store)
    except sqlite3.Error as error:
        print(
            f"error: {store}: cannot query v_last_scalars ({error}); is it a tbconvert store?",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(QUERY + ";")
    print()
    print(render_result(columns, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
