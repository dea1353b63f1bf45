"""SQLite point inserts, many rows a statement (issue #14).

``SqliteBulk.insert_points`` binds up to a hundred rows a statement and the rest in one
more: whatever the number of rows and whichever of them the store already holds, the
table must end up holding every row once, the stored ones unchanged, and the count returned
must be the rows that were new.  The expected table is worked out here from the rows, as a
set, and compared with what SQLite holds.
"""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from tbconvert.rows import PACKED_ROW, FileRows, RowBatch
from tbconvert.store import migrate
from tbconvert.writing.sqlite import SqliteBulk
from tbconvert.writing.statements import Insert, Statements

# (series_id, step, record_offset): a point's key in these tests (value index 0).
_Key = tuple[int, int, int]
_keys = st.tuples(st.integers(1, 3), st.integers(0, 120), st.integers(0, 2))
_FILES = (7, 8)


def _store() -> sqlite3.Connection:
    database = sqlite3.connect(":memory:", isolation_level=None)
    statements = migrate.snapshot_statements(migrate.HEAD_REVISION)
    assert statements is not None
    for statement in statements:
        database.execute(statement)
    return database


def _row(key: _Key, file_id: int, value: float) -> tuple[int, int, int, int, int, float, float]:
    series, step, offset = key
    return (series, step, file_id, offset, 0, 1.7e9 + step, value)


def _stored(database: sqlite3.Connection) -> set[tuple[object, ...]]:
    return set(database.execute("SELECT * FROM scalars").fetchall())


def _bulk() -> SqliteBulk:
    bulk = SqliteBulk.__new__(SqliteBulk)  # no engine: insert_points needs only the cursor
    bulk._path = None
    return bulk


def _packed(keys: list[_Key], cut: int, file_id: int) -> FileRows:
    """Rows of ``file_id``: those before ``cut`` as tuples, the rest packed after them."""
    tuples = [_row(key, file_id, 1.0) for key in keys[:cut]]
    packed = b"".join(PACKED_ROW.pack(s, p, o, 1.7e9 + p, 1.0) for s, p, o in keys[cut:])
    merged = FileRows.merge(tuples, [(len(tuples), packed)] if packed else [])
    return FileRows(merged.parts(), len(merged), file_id)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(_keys, unique=True, max_size=330),
    held=st.sets(_keys, max_size=40),
    cut=st.integers(0, 330),
    shape=st.sampled_from(["tuples", "packed", "batch"]),
)
def test_every_row_is_stored_once_and_only_new_ones_are_counted(
    keys: list[_Key], held: set[_Key], cut: int, shape: str
) -> None:
    database = _store()
    # Rows the store holds already, with another value: an insert must leave them as they are.
    half = len(keys) // 2
    files = {key: _FILES[0] if index < half else _FILES[1] for index, key in enumerate(keys)}
    if shape == "packed":
        files = dict.fromkeys(keys, _FILES[0])
    stored_before = {_row(key, files.get(key, _FILES[0]), -1.0) for key in held}
    database.executemany("INSERT INTO scalars VALUES (?, ?, ?, ?, ?, ?, ?)", stored_before)

    if shape == "tuples":
        rows: object = FileRows.of([_row(key, files[key], 1.0) for key in keys])
    elif shape == "packed":
        rows = _packed(keys, cut, _FILES[0])
    else:
        local = [(0, step, 0, offset, 0, 1.7e9 + step, 1.0) for _, step, offset in keys[:half]]
        # Local series number 0 of the first file's tuples is mapped to each key's series.
        parts: list[object] = [
            FileRows.of([row]).with_store_ids([series], _FILES[0])
            for row, (series, _, _) in zip(local, keys[:half], strict=True)
        ]
        parts.append(_packed(keys[half:], min(cut, len(keys) - half) // 2, _FILES[1]))
        rows = RowBatch(parts)  # type: ignore[arg-type]

    inserted = _bulk().insert_points(database, "scalars", rows)  # type: ignore[arg-type]

    fresh = {_row(key, files[key], 1.0) for key in keys if key not in held}
    assert _stored(database) == stored_before | fresh
    assert inserted == len(fresh)


def test_a_chunk_of_the_statement_s_size_and_one_row_more() -> None:
    """The edges of the many-rows statement: exactly its rows, then one left over."""
    for count in (99, 100, 101, 200, 201):
        database = _store()
        keys = [(1, step, 0) for step in range(count)]
        rows = [_row(key, _FILES[0], float(key[1])) for key in keys]
        assert _bulk().insert_points(database, "scalars", FileRows.of(rows)) == count
        assert _stored(database) == set(rows)


def test_inserts_on_sqlite_go_many_rows_a_statement_with_what_follows_them() -> None:
    """``Statements.insert``: every row, in order, with its ``ON CONFLICT`` clause applied
    (an upsert of the same key keeps the last row's values), as one execution per row would,
    whether the rows are mappings by column or tuples in the columns' order."""
    database = _store()
    statements = Statements(lambda: database, pyformat=False)
    upsert = Insert(
        "contexts", ("id", "name"), " ON CONFLICT (id) DO UPDATE SET name = excluded.name"
    )
    assert str(upsert) == (
        "INSERT INTO contexts (id, name) VALUES (:id, :name) "
        "ON CONFLICT (id) DO UPDATE SET name = excluded.name"
    )
    rows = [{"name": f"context {n}", "id": n % 150} for n in range(260)]
    statements.insert(upsert, rows)
    expected = {n % 150: f"context {n}" for n in range(260)}  # the later row of an id wins
    assert dict(database.execute("SELECT id, name FROM contexts")) == expected

    # The same rows as tuples, and no statement a row: two of a hundred rows, one of the
    # sixty left.
    steps: list[str] = []
    database.execute("DELETE FROM contexts")
    database.set_trace_callback(steps.append)
    statements.insert(upsert, [(row["id"], row["name"]) for row in rows])
    database.set_trace_callback(None)
    assert dict(database.execute("SELECT id, name FROM contexts")) == expected
    assert len(steps) == 3

    statements.many("UPDATE contexts SET name = :name WHERE id = :id", [{"id": 3, "name": "x"}])
    assert database.execute("SELECT name FROM contexts WHERE id = 3").fetchone() == ("x",)


def test_inserts_reach_a_server_as_positional_parameters() -> None:
    """On psycopg rows go as tuples to ``%s`` marks, mappings taken in the columns' order."""
    sent: list[tuple[str, list[object]]] = []

    class Cursor:
        def executemany(self, sql: str, params: list[object]) -> None:
            sent.append((sql, list(params)))

        def close(self) -> None:
            pass

    class Connection:
        def cursor(self) -> Cursor:
            return Cursor()

    statements = Statements(Connection, pyformat=True)
    insert = Insert("contexts", ("id", "name"), " ON CONFLICT DO NOTHING")
    statements.insert(insert, [(1, "a")])
    statements.insert(insert, [{"name": "b", "id": 2}])
    sql = "INSERT INTO contexts (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    assert sent == [(sql, [(1, "a")]), (sql, [(2, "b")])]


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.tuples(_keys, st.sampled_from(_FILES)), unique=True, max_size=200))
def test_packed_rows_reach_sqlite_in_the_order_of_the_key(keys: list[tuple[_Key, int]]) -> None:
    """One file's packed rows and a group's come out as Python sorts their keys (series,
    step, file, offset): the order SQLite inserts fastest, whatever order they were read in."""
    one_file = [key for key, file_id in keys if file_id == _FILES[0]]
    rows = list(_packed(one_file, 0, _FILES[0]).packed_rows())
    assert [(row[0], row[1], row[2]) for row in rows] == sorted(one_file)

    batch = RowBatch([_packed([key], 0, file_id) for key, file_id in keys])
    got = [(row[0], row[1], row[2], row[3]) for row in batch.packed_rows()]
    assert got == sorted((s, p, file_id, o) for (s, p, o), file_id in keys)
    # Whole rows (a server's COPY takes them): every row of the batch, in the same order.
    assert batch.packed_table().tolist() == sorted(batch)
    whole_of_one = _packed(one_file, 0, _FILES[0]).packed_table().tolist()
    assert whole_of_one == sorted(_packed(one_file, 0, _FILES[0]))
