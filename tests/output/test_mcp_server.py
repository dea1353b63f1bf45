"""``tbconvert mcp`` driven by the MCP SDK's own client: in process on a store converted from
real event files (both backends), and as a real ``tbconvert mcp`` subprocess over stdio on a
series of a million points.  Every answer is checked against SQL or pandas over the views."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pandas as pd
import pytest

import tbconvert
from tbconvert.output import mcp_tools
from tbconvert.output.mcp_server import build_server
from tests.support.big_series import build_series_store, curve
from tests.support.snapshots import StoreFactory, connect, rows
from tests.support.sweep import STEPS, SWEEP, build_store

pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"list_runs", "describe_run", "get_series", "compare_runs", "hparams_table", "query"}
Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("mcp"), make_store)


def frame(store: str, sql: str) -> pd.DataFrame:
    with closing(connect(store)) as conn:
        cursor = conn.execute(sql)
        names = [column[0] for column in cursor.description]
        return pd.DataFrame([tuple(row) for row in cursor.fetchall()], columns=names)


def number(value: Any) -> float:
    """A value of an answer as a float (NaN and the infinities come as strings)."""
    return float(value) if isinstance(value, str) else value


def in_process(store: str, script: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        with tbconvert.open_store(store) as opened:
            async with Client(build_server(opened)) as client:
                await script(client)

    anyio.run(main)


async def answer(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_the_client_lists_every_tool_as_read_only(store: str) -> None:
    async def script(client: Client) -> None:
        listed = (await client.list_tools()).tools
        assert {tool.name for tool in listed} == TOOLS
        for tool in listed:
            assert tool.annotations is not None and tool.annotations.read_only_hint, tool.name
            assert tool.description and (
                "At most" in tool.description or "max_points" in tool.description
            )

    in_process(store, script)


def test_list_runs_is_v_runs_and_where_selects_as_pandas_does(store: str) -> None:
    runs = frame(store, "SELECT run_id, run_path FROM v_runs")
    scalars = frame(store, "SELECT run_id, tag, value FROM v_scalars_current WHERE context = ''")
    accuracy = scalars[scalars.tag == "accuracy"].groupby("run_id").value.max()
    sweep = runs[runs.run_path.str.startswith("sweep/")]
    expected = set(sweep[sweep.run_id.isin(accuracy[accuracy > 0.5].index)].run_path)

    async def script(client: Client) -> None:
        everything = await answer(client, "list_runs", {})
        assert sorted(r["run"] for r in everything["runs"]) == sorted(runs.run_path)
        assert everything["count"] == len(runs) and not everything["truncated"]
        chosen = await answer(
            client, "list_runs", {"where": "max(accuracy) > 0.5", "run": "sweep/*"}
        )
        assert {r["run"] for r in chosen["runs"]} == expected and expected
        best = await answer(client, "list_runs", {"run": "sweep/*", "top": 1,
                                                   "by": "max(accuracy)"})  # fmt: skip
        assert [r["run"] for r in best["runs"]] == ["sweep/lr_0.1"]
        assert best["runs"][0]["params"]

    in_process(store, script)


def test_describe_run_lists_the_runs_series_as_v_series_does(store: str) -> None:
    series = frame(store, "SELECT tag, points FROM v_series WHERE run_path = 'sweep/lr_1.0'")

    async def script(client: Client) -> None:
        described = await answer(client, "describe_run", {"run": "sweep/lr_1.0"})
        assert described["run"]["run_path"] == "sweep/lr_1.0"
        assert described["series_count"] == len(series) and not described["truncated"]
        assert sorted((s["tag"], s["points"]) for s in described["series"]) == sorted(
            zip(series.tag, series.points, strict=True)
        )
        failed = await client.call_tool("describe_run", {"run": "sweep/lr_9"})
        assert failed.is_error and "no run 'sweep/lr_9'" in failed.content[0].text

    in_process(store, script)


def test_get_series_gives_every_point_with_nan_as_a_string(store: str) -> None:
    points = frame(
        store,
        "SELECT step, value FROM v_scalars_current WHERE run_path = 'sweep/lr_1.0' "
        "AND tag = 'loss' ORDER BY step",
    )

    async def script(client: Client) -> None:
        series = await answer(client, "get_series", {"run": "sweep/lr_1.0", "tag": "loss"})
        assert series["exact"] and series["total_points"] == STEPS == len(points)
        got = [(step, number(value)) for step, _, value in series["points"]]
        want = [
            (s, math.nan if pd.isna(v) else v)
            for s, v in zip(points.step, points.value, strict=True)
        ]
        assert [s for s, _ in got] == [s for s, _ in want]
        assert all(math.isnan(a) if math.isnan(b) else a == b
                   for (_, a), (_, b) in zip(got, want, strict=True))  # fmt: skip
        assert series["nan_points"] == int(points.value.isna().sum()) > 0
        thin = await answer(client, "get_series", {"run": "sweep/lr_1.0", "tag": "loss",
                                                   "max_points": 5})  # fmt: skip
        assert not thin["exact"] and len(thin["points"]) <= 5 and "thinned" in thin["note"]
        bad = await client.call_tool("get_series", {"run": "sweep/lr_1.0", "tag": "loss",
                                                    "max_points": 2})  # fmt: skip
        assert bad.is_error and "max_points must be" in bad.content[0].text

    in_process(store, script)


def test_compare_runs_agrees_with_pandas_over_the_current_points(store: str) -> None:
    scalars = frame(
        store,
        "SELECT run_path, context, tag, step, value FROM v_scalars_current "
        "WHERE run_path LIKE 'sweep/%' ORDER BY run_path, context, tag, step",
    )
    grouped = scalars.groupby(["run_path", "context", "tag"]).value
    oracle = pd.DataFrame({"points": grouped.size(), "last": grouped.last(),
                           "min": grouped.min(), "max": grouped.max()})  # fmt: skip
    last = (
        scalars.groupby(["run_path", "context", "tag"])
        .tail(1)
        .set_index(["run_path", "context", "tag"])
        .value
    )  # the last point, NaN included (pandas' last() skips NaN)
    oracle["last"] = last

    async def script(client: Client) -> None:
        compared = await answer(client, "compare_runs", {"runs": ["sweep/*"]})
        assert compared["runs"] == sorted(SWEEP and [f"sweep/{run}" for run in SWEEP])
        assert len(compared["rows"]) == len(oracle) and not compared["truncated"]
        for run, context, tag, points, last_value, low, high in compared["rows"]:
            want = oracle.loc[(run, context, tag)]
            assert points == want.points
            for got, expected in ((last_value, want["last"]), (low, want["min"]),
                                  (high, want["max"])):  # fmt: skip
                assert (
                    (got is None or math.isnan(number(got)))
                    if pd.isna(expected)
                    else (number(got) == expected)
                )

    in_process(store, script)


def test_hparams_table_has_a_row_per_session_and_the_params(store: str) -> None:
    params = frame(store, "SELECT run_path, key, value FROM v_params WHERE run_path LIKE 'sweep/%'")

    async def script(client: Client) -> None:
        table = await answer(
            client, "hparams_table", {"where": 'run % "sweep/*"', "metrics": ["accuracy"]}
        )
        columns = table["columns"]
        assert {"lr", "optimizer", "accuracy"} <= set(columns)
        assert len(table["rows"]) == params.run_path.nunique() == len(SWEEP)
        lr = {row[columns.index("lr")] for row in table["rows"]}
        assert lr == {lr for lr, *_ in SWEEP.values()}

    in_process(store, script)


def test_query_reads_caps_its_rows_and_refuses_writes(store: str) -> None:
    count = rows_of(store, "SELECT count(*) FROM v_scalars")[0][0]

    async def script(client: Client) -> None:
        counted = await answer(client, "query", {"sql": "SELECT count(*) AS n FROM v_scalars"})
        assert counted == {"columns": ["n"], "rows": [[count]], "truncated": False}
        capped = await answer(client, "query", {"sql": "SELECT * FROM v_scalars", "max_rows": 3})
        assert len(capped["rows"]) == 3 and capped["truncated"] and "max_rows" in capped["note"]
        for sql in ("DELETE FROM runs", "UPDATE runs SET name = 'x'", "SELECT 1; DELETE FROM runs"):
            refused = await client.call_tool("query", {"sql": sql})
            assert refused.is_error and "refused" in refused.content[0].text, sql

    in_process(store, script)
    assert rows_of(store, "SELECT count(*) FROM v_scalars")[0][0] == count
    assert rows_of(store, "SELECT count(*) FROM v_runs")[0][0] > 0


def rows_of(store: str, sql: str) -> list[tuple[Any, ...]]:
    with closing(connect(store)) as conn:
        return rows(conn, sql)


def test_answers_are_capped_and_say_so() -> None:
    long = "x" * (mcp_tools.MAX_TEXT + 5)
    answer = mcp_tools.plain({"rows": [[math.nan, math.inf, -math.inf, b"abc", long]]})
    assert answer["rows"] == [["NaN", "Infinity", "-Infinity", {"bytes": 3}, answer["rows"][0][4]]]
    assert answer["rows"][0][4].startswith("x" * mcp_tools.MAX_TEXT)
    assert answer["cut_texts"] == 1 and answer["truncated"]


def test_a_million_point_series_over_stdio_keeps_its_min_max_and_nan(tmp_path: Path) -> None:
    """A real ``tbconvert mcp`` process; the answer's extremes are the series' own, by SQL."""
    store = str(tmp_path / "long.db")
    build_series_store(store, *curve(1_000_000))
    low, high, nan = rows_of(
        store, "SELECT min(value), max(value), count(*) - count(value) FROM scalars"
    )[0]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "tbconvert", "mcp", "--store", store],
        env=environment,
    )  # fmt: skip

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=600) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            return await answer(client, "get_series", {"run": "long", "tag": "loss",
                                                        "max_points": 400})  # fmt: skip

    series = anyio.run(main)
    values = [number(value) for _, _, value, _ in series["points"]]
    assert not series["exact"] and len(values) <= 400
    assert series["total_points"] == 1_000_000 and series["nan_points"] == nan > 0
    finite = [value for value in values if not math.isnan(value)]
    assert (min(finite), max(finite)) == (low, high) == (-math.inf, math.inf)
    assert any(math.isnan(value) for value in values)
    assert 50.0 in values  # the finite spike, as its bucket's highest value
