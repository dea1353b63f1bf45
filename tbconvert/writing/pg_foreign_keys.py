"""The point tables' foreign keys on PostgreSQL, checked once per chunk rather than per row.

PostgreSQL checks a foreign key with a trigger per inserted row: three index probes and
three row locks a point, which held a COPY to 0.30x SQLite's rate (0.94x with the keys
dropped; issue #14).  Every parent a point refers to (its series, its event file, its blob)
is made by the converter itself, in the transaction that inserts the point, so the writer can
do the same check for a whole chunk in one statement:

* it locks the chunk's distinct parents ``FOR KEY SHARE``, the lock the triggers take, so
  no other transaction can delete them or change their ids until this one ends;
* only if every one of them exists does it switch the triggers off
  (``session_replication_role = replica``, transaction-local) for the point insert alone,
  and on again after it.

The keys stay declared: every other client, and every other statement of the converter
(series, files, summaries, deletes), is checked by the server as before.  A chunk with a
missing parent is inserted with the triggers on, so the server reports the violation as it
always did.  Switching triggers off needs a superuser or, from PostgreSQL 15,
``GRANT SET ON PARAMETER session_replication_role TO <role>``; without it the server checks
each row, and the conversion's summary says how to grant it (:func:`per_row_notice`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from tbconvert.rows import POINT_COLUMNS, InsertRows, Row, packed_columns

# SET ON PARAMETER exists from PostgreSQL 15; before it only a superuser may set the role.
_GRANTABLE_FROM = 150_000


def may_check_per_chunk(dbapi: Any) -> tuple[bool, str]:
    """Whether this connection's role may switch the key triggers off, and the role's name.
    Leaves the connection outside any transaction."""
    grantable = dbapi.info.server_version >= _GRANTABLE_FROM
    granted = "has_parameter_privilege('session_replication_role', 'SET')" if grantable else "false"
    try:
        with dbapi.cursor() as cursor:
            cursor.execute(
                f"SELECT current_setting('is_superuser') = 'on' OR {granted}, current_user"
            )
            allowed, role = cursor.fetchone()
    finally:
        dbapi.rollback()
    return bool(allowed), str(role)


def lock_parents(cursor: Any, table: str, rows: InsertRows) -> bool:
    """Lock the distinct parents of ``rows`` as the key triggers would and, when every one of
    them exists, switch the triggers off until :func:`checks_back_on`; returns whether it did."""
    conditions = []
    parameters: dict[str, Any] = {}
    for column, parent in _parents(table):
        ids = sorted(_distinct(table, rows, column))
        parameters[column] = ids
        parameters[f"{column}_count"] = len(ids)
        conditions.append(
            f"(SELECT count(*) FROM (SELECT FROM {parent} WHERE id = ANY(%({column})s) "
            f"FOR KEY SHARE) AS locked) = %({column}_count)s"
        )
    cursor.execute(
        "SELECT set_config('session_replication_role', 'replica', true) WHERE "
        + " AND ".join(conditions),
        parameters,
    )
    return cursor.fetchone() is not None


def checks_back_on(cursor: Any) -> None:
    """Switch the key triggers on again for the rest of the transaction."""
    cursor.execute("SELECT set_config('session_replication_role', 'origin', true)")


def per_row_notice(role: str, points: int) -> str:
    """What the summary says when the server checked the keys of ``points`` points one by one."""
    return (
        f"PostgreSQL checked the foreign keys of {points} points row by row, about 3x slower: "
        f"'GRANT SET ON PARAMETER session_replication_role TO {role}' (PostgreSQL 15+, as an "
        "admin) lets tbconvert check them once per chunk (docs/cli.md, 'Sharing a store')"
    )


# The parent table of each point table column that is a foreign key
# (tests/writing/test_server_keys.py
# checks them against the models, which a conversion need not import).
PARENTS = {"series_id": "series", "file_id": "event_files", "blob_id": "blobs"}


@functools.cache
def _parents(table: str) -> tuple[tuple[str, str], ...]:
    """(column, parent table) of each foreign key of a point table, by column name."""
    return tuple(
        sorted((column, PARENTS[column]) for column in POINT_COLUMNS[table] if column in PARENTS)
    )


def _distinct(table: str, rows: InsertRows, column: str) -> set[int]:
    position = POINT_COLUMNS[table].index(column)
    found: set[int] = set()
    for file in rows.files():
        if column == "file_id":
            found.add(int(file.file_id))
        elif file.packed_count():
            found |= _distinct_in(file.general_rows(), position)
            for part in file.parts():
                if isinstance(part, bytes):
                    found.update(int(value) for value in set(packed_columns(part)[0].tolist()))
        else:
            found |= _distinct_in(file, position)
    return found


def _distinct_in(rows: Iterable[Row], position: int) -> set[int]:
    return {int(row[position]) for row in rows}
