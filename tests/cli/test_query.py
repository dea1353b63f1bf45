"""``tbconvert query`` and ``--format md`` on the commands that print tables, on SQLite and
PostgreSQL: output checked against the database driver (sqlite3, psycopg), against what the
sweep logged, and, for Markdown, by parsing the table back."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tbconvert.cli import cli
from tests.support.snapshots import StoreFactory, is_server, query_rows, view_rows
from tests.support.sweep import SWEEP, build_store

SCALARS = (
    "SELECT run_path, tag, step, value FROM v_scalars "
    "WHERE run_path LIKE 'sweep/%' ORDER BY run_path, tag, step"
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("query_cli"), make_store)


def _query(store: str, *arguments: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["query", *arguments, "--store", store], input=stdin)


def parse_markdown(text: str) -> tuple[list[str], list[list[str]]]:
    """A GitHub Markdown table back into its header and cells: a backslash escapes the next
    character, an unescaped pipe separates cells, ``<br>`` is a line break."""
    lines = text.strip("\n").split("\n")
    table = []
    for line in lines:
        assert line.startswith("|") and line.endswith("|"), line
        cells, cell, characters = [], "", iter(line.strip()[1:-1])
        for character in characters:
            if character == "\\":
                cell += next(characters)
            elif character == "|":
                cells.append(cell)
                cell = ""
            else:
                cell += character
        cells.append(cell)
        table.append([c.strip().replace("<br>", "\n") for c in cells])
    header, rule, *rows = table
    assert all(set(cell) <= set("-:") and len(cell) >= 3 for cell in rule)
    return header, rows


# ------------------------------------------------------------------------ query formats


def test_json_equals_the_driver(store: str) -> None:
    result = _query(store, SCALARS, "--format", "json")
    assert result.exit_code == 0, result.stderr
    expected = query_rows(store, SCALARS)
    found = json.loads(result.stdout)
    assert [list(row.values()) for row in found] == [
        [None if isinstance(v, float) and math.isnan(v) else v for v in row] for row in expected
    ]
    assert list(found[0]) == ["run_path", "tag", "step", "value"]
    assert result.stderr.strip() == f"{len(expected)} rows"


def test_jsonl_and_csv_equal_the_driver(store: str) -> None:
    expected = query_rows(store, SCALARS)
    lines = _query(store, SCALARS, "--format", "jsonl").stdout.splitlines()
    assert [tuple(json.loads(line).values()) for line in lines] == expected
    reader = csv.reader(io.StringIO(_query(store, SCALARS, "--format", "csv").stdout))
    header, *rows = list(reader)
    assert header == ["run_path", "tag", "step", "value"] and len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row[:3] == [want[0], want[1], str(want[2])]
        # NULL (a logged NaN) is an empty cell, as tbconvert export writes it.
        assert row[3] == "" if want[3] is None else float(row[3]) == want[3]


def test_table_and_markdown_show_every_value_exactly(store: str) -> None:
    expected = query_rows(store, SCALARS)
    for fmt in ("md", "table"):
        result = _query(store, SCALARS, "--format", fmt)
        assert result.exit_code == 0, result.stderr
        if fmt == "md":
            header, rows = parse_markdown(result.stdout)
        else:
            header, *rows = [line.split() for line in result.stdout.splitlines()]
        assert header == ["run_path", "tag", "step", "value"]
        assert len(rows) == len(expected)
        for row, want in zip(rows, expected, strict=True):
            assert row[:3] == [want[0], want[1], str(want[2])]
            assert row[3] == "NULL" if want[3] is None else float(row[3]) == want[3]


def test_markdown_escapes_pipes_backslashes_and_line_breaks(store: str) -> None:
    values = {"a": "x | y", "b": "one\ntwo\r\nthree", "c": "back\\slash|\\", "d": "`*_[]`"}
    sql = "SELECT :a AS a, :b AS b, :c AS c, :d AS d, NULL AS e"
    params = [f"--param={name}={value}" for name, value in values.items()]
    result = _query(store, sql, "--format", "md", *params)
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 3
    header, rows = parse_markdown(result.stdout)
    expected = [values["a"], values["b"].replace("\r\n", "\n"), values["c"], values["d"], "NULL"]
    assert header == ["a", "b", "c", "d", "e"] and rows == [expected]
    # The aligned table keeps one line per row too: a line break reads as \n.
    table = _query(store, sql, *params).stdout.splitlines()
    assert len(table) == 2 and "one\\ntwo" in table[1]


def test_blobs_are_sizes_in_tables_and_base64_in_json(store: str) -> None:
    sql = "SELECT id, data FROM blobs ORDER BY id"
    expected = [(row[0], bytes(row[1])) for row in query_rows(store, sql)]
    assert expected
    _, rows = parse_markdown(_query(store, sql, "--format", "md").stdout)
    assert rows == [[str(id_), f"<{len(data)} bytes>"] for id_, data in expected]
    found = json.loads(_query(store, sql, "--format", "json").stdout)
    assert [(row["id"], base64.b64decode(row["data"])) for row in found] == expected


def test_max_rows_and_parameters(store: str) -> None:
    sql = "SELECT run_path FROM v_runs WHERE run_path LIKE :prefix ORDER BY run_path"
    expected = [row[0] for row in query_rows(store, sql.replace(":prefix", "?"), "sweep/%")]
    assert len(expected) == 3
    for fmt in ("csv", "table"):
        result = _query(store, sql, "--param", "prefix=sweep/%", "--max-rows", "2", "--format", fmt)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines()[1:] == expected[:2]
        assert "2 rows; more not shown (--max-rows 2)" in result.stderr


def test_statement_from_stdin_and_from_a_file(store: str, tmp_path: Path) -> None:
    sql = "SELECT count(*) AS runs FROM v_runs"
    (tmp_path / "count.sql").write_text(sql + ";\n", encoding="utf-8")
    expected = [{"runs": query_rows(store, sql)[0][0]}]
    from_stdin = _query(store, "-", "--format", "json", stdin=sql)
    from_file = _query(store, f"@{tmp_path / 'count.sql'}", "--format", "json", "-q")
    assert json.loads(from_stdin.stdout) == expected == json.loads(from_file.stdout)
    assert from_file.stderr == ""
    missing = _query(store, f"@{tmp_path / 'none.sql'}")
    assert missing.exit_code == 1
    assert missing.stderr.strip().splitlines() == [
        f"Error: {tmp_path / 'none.sql'}: cannot read the SQL statement (No such file or directory)"
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM runs",
        "UPDATE runs SET name = 'x'",
        "DROP TABLE scalars",
        "CREATE TABLE notes (body TEXT)",
        "INSERT INTO contexts (name) VALUES ('x')",
        "SELECT 1; DELETE FROM runs",
    ],
)
def test_writes_are_refused_with_exit_2(store: str, sql: str) -> None:
    before = view_rows(store)
    result = _query(store, sql)
    assert result.exit_code == 2 and result.stdout == ""
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    named = "several statements" if ";" in sql else sql.split()[0]
    assert f"{named} refused: tbconvert query runs" in error
    assert view_rows(store) == before


def test_data_modifying_with_is_refused_by_the_connection(store: str) -> None:
    sql = (
        "WITH gone AS (DELETE FROM runs RETURNING id) SELECT * FROM gone"
        if is_server(store)
        else "WITH gone AS (SELECT 1) DELETE FROM runs"
    )
    before = view_rows(store)
    result = _query(store, sql)
    assert result.exit_code == 2 and "DELETE" in result.stderr and "refused" in result.stderr
    assert view_rows(store) == before


def test_a_database_error_exits_1_on_one_line(store: str) -> None:
    result = _query(store, "SELECT * FROM no_such_table")
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "no_such_table" in result.stderr


def test_bad_param_is_a_usage_error(store: str) -> None:
    result = _query(store, "SELECT :x", "--param", "x")
    assert result.exit_code == 2 and "NAME=VALUE" in result.stderr


def test_help_shows_an_example() -> None:
    result = CliRunner().invoke(cli, ["query", "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout and "tbconvert query" in result.stdout
    assert "[table|csv|json|jsonl|md]" in result.stdout


# -------------------------------------------------------------- --format md elsewhere


def test_runs_as_markdown(store: str) -> None:
    result = CliRunner().invoke(cli, ["runs", "--store", store, "--format", "md"])
    assert result.exit_code == 0, result.stderr
    header, rows = parse_markdown(result.stdout)
    assert header[:2] == ["id", "run"]
    expected = query_rows(store, "SELECT run_id, run_path FROM v_runs ORDER BY logdir, run_path")
    assert [(int(row[0]), row[1]) for row in rows] == expected
    conflict = CliRunner().invoke(cli, ["runs", "--store", store, "--format", "md", "--json"])
    assert conflict.exit_code == 2


def test_hparams_as_markdown(store: str) -> None:
    arguments = ["hparams", "--store", store, "--metric", "accuracy", "--format", "md"]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 0, result.stderr
    header, rows = parse_markdown(result.stdout)
    assert header == ["run_id", "run_path", "context", "batch_size", "lr", "optimizer", "accuracy"]
    found = {row[1]: row for row in rows}
    assert sorted(found) == [f"sweep/{run}" for run in sorted(SWEEP)]
    for run, (lr, optimizer, final, _) in SWEEP.items():
        row = found[f"sweep/{run}"]
        assert float(row[4]) == lr and row[5] == optimizer
        assert float(row[6]) == pytest.approx(final, rel=1e-6)  # float32, 6 digits shown


def test_show_as_markdown(store: str) -> None:
    result = CliRunner().invoke(cli, ["show", "sweep/lr_0.1", "--store", store, "--format", "md"])
    assert result.exit_code == 0, result.stderr
    sections = result.stdout.split("### ")
    scalars = next(s for s in sections if s.startswith("scalars"))
    header, rows = parse_markdown(scalars.split("\n", 2)[2])
    assert header[:3] == ["context", "tag", "points"]
    sql = (
        "SELECT context, tag, count(*) FROM v_scalars WHERE run_path = 'sweep/lr_0.1' "
        "GROUP BY context, tag ORDER BY context, tag"
    )
    assert sorted((r[0].strip("'"), r[1], int(r[2])) for r in rows) == query_rows(store, sql)
