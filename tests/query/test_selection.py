"""Run selection (``--where``, ``--top N --by``, ``--column``) on SQLite and PostgreSQL,
against an oracle: Hypothesis draws expressions as trees of this module, renders them as text,
and evaluates them in pandas over ``v_runs``, ``v_params`` and ``v_scalars`` (or
``v_scalars_current``), read into DataFrames; the selection must give the same runs in the
same order.  Bad expressions must say which column is wrong."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

import tbconvert
from tbconvert import convert
from tbconvert.query.expression_sql import Compiler
from tbconvert.query.expressions import ExpressionError, parse_condition
from tbconvert.query.selection import RunSelection, select_runs
from tbconvert.query.store import Store
from tests.support.eventfiles import simple_value, summary_event, write_events
from tests.support.selection_store import build_selection_store
from tests.support.snapshots import StoreFactory


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_selection_store(tmp_path_factory.mktemp("selection"), make_store)


@pytest.fixture(scope="module")
def store(store_path: str) -> Iterator[Store]:
    with tbconvert.open_store(store_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def frames(store: Store) -> dict[str, pd.DataFrame]:
    with store.engine.connect() as conn:
        return {
            view: pd.read_sql_query(f"SELECT * FROM {view}", conn)
            for view in ("v_runs", "v_params", "v_scalars", "v_scalars_current")
        }


@pytest.fixture(scope="module")
def oracles(frames: dict[str, pd.DataFrame]) -> dict[str, Oracle]:
    return {resumed: Oracle(frames, resumed) for resumed in ("current", "all")}


# The oracle's own expressions: ("agg", fn, tag, context), ("param", key, subscripted),
# ("num", value), ("diff", a, b); conditions ("cmp", a, op, b), ("chain", lo, a, hi),
# ("text", source, op, literal), ("in", source, items, negated), ("glob", field, pattern),
# ("and"|"or", c1, c2), ("not", c).
FUNCTIONS = ("last", "min", "max", "mean", "count", "argmin", "argmax")
SERIES = [("loss", None), ("loss", ""), ("acc", "train"), ("acc", "val"), ("loss", "val")]
PARAMS = ("lr", "layers", "flag", "opt", "dropout")
NUMBERS = (-1, 0, 0.001, 0.01, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 8)
OPERATORS = ("==", "!=", "<", "<=", ">", ">=")
TEXTS = ("adam", "sgd", "rms", "a/r0", "b/r3", "a", "x")
GLOBS = ("a/*", "*1", "?/r?", "b/*", "[ab]/r[!0]", "*", "a", "*r[0-2]")

numbers = st.one_of(
    st.builds(lambda f, s: ("agg", f, *s), st.sampled_from(FUNCTIONS), st.sampled_from(SERIES)),
    st.builds(lambda k, s: ("param", k, s), st.sampled_from(PARAMS), st.booleans()),
)
values = st.one_of(numbers, st.builds(lambda a, b: ("diff", a, b), numbers, numbers))
comparisons = st.one_of(
    st.builds(
        lambda a, op, n: ("cmp", a, op, ("num", n)),
        values,
        st.sampled_from(OPERATORS),
        st.sampled_from(NUMBERS),
    ),
    st.builds(
        lambda lo, a, hi: ("chain", ("num", lo), a, ("num", hi)),
        st.sampled_from(NUMBERS),
        numbers,
        st.sampled_from(NUMBERS),
    ),
    st.builds(
        lambda s, op, t: ("text", s, op, t),
        st.sampled_from(["opt", "run", "group", "lr"]),
        st.sampled_from(OPERATORS),
        st.sampled_from(TEXTS),
    ),
    st.builds(
        lambda s, items, negated: ("in", s, tuple(items), negated),
        st.sampled_from(["opt", "run"]),
        st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3),
        st.booleans(),
    ),
    st.builds(
        lambda f, g: ("glob", f, g), st.sampled_from(["run", "group"]), st.sampled_from(GLOBS)
    ),
)
conditions = st.recursive(
    comparisons,
    lambda inner: st.one_of(
        st.builds(lambda a, b: ("and", a, b), inner, inner),
        st.builds(lambda a, b: ("or", a, b), inner, inner),
        st.builds(lambda a: ("not", a), inner),
    ),
    max_leaves=4,
)


def render(node: tuple[Any, ...]) -> str:
    kind = node[0]
    if kind == "agg":
        _, function, tag, context = node
        named = "" if context is None else f', context="{context}"'
        return f"{function}({tag}{named})"
    if kind == "param":
        return f'params["{node[1]}"]' if node[2] else node[1]
    if kind == "num":
        return repr(node[1])
    if kind == "diff":
        return f"({render(node[1])} - {render(node[2])})"
    if kind == "cmp":
        return f"{render(node[1])} {node[2]} {render(node[3])}"
    if kind == "chain":
        return f"{render(node[1])} < {render(node[2])} <= {render(node[3])}"
    if kind == "text":
        return f'{node[1]} {node[2]} "{node[3]}"'
    if kind == "in":
        items = ", ".join(f'"{item}"' for item in node[2])
        return f"{node[1]} {'not in' if node[3] else 'in'} [{items}]"
    if kind == "glob":
        return f'{node[1]} % "{node[2]}"'
    if kind == "not":
        return f"not ({render(node[1])})"
    return f"({render(node[1])}) {kind} ({render(node[2])})"


class Oracle:
    """The expressions of this module evaluated for one run over the views' DataFrames."""

    def __init__(self, frames: dict[str, pd.DataFrame], resumed: str) -> None:
        self.runs = frames["v_runs"].set_index("run_id")
        points = frames["v_scalars_current" if resumed == "current" else "v_scalars"]
        self.series = {
            key: group.sort_values("step", kind="stable")
            for key, group in points.groupby(["run_id", "tag", "context"])
        }
        self.params: dict[tuple[int, str], tuple[float | None, str | None]] = {}
        for row in frames["v_params"].sort_values("context", ascending=False).itertuples():
            number = None if pd.isna(row.value_num) else float(row.value_num)
            text = row.value if row.value_type == "string" else None
            self.params[row.run_id, row.key] = (number, text)  # the first context wins

    def aggregate(self, run_id: int, function: str, tag: str, context: str | None) -> Any:
        contexts = sorted(c for (run, name, c) in self.series if (run, name) == (run_id, tag))
        if context is None:
            context = "" if "" in contexts else contexts[0] if len(contexts) == 1 else None
        if context is None or context not in contexts:
            return None
        points = self.series[run_id, tag, context]
        values = points.value.dropna()
        if function == "count":
            return len(points)
        if function == "last":
            last = points.value.iloc[-1]
            return None if pd.isna(last) else last
        if values.empty:
            return None
        if function in ("min", "max", "mean"):
            return getattr(values, function)()
        extreme = values.min() if function == "argmin" else values.max()
        return int(points.step[points.value == extreme].min())

    def param(self, run_id: int, key: str) -> tuple[float | None, str | None]:
        return self.params.get((run_id, key), (None, None))

    def number(self, run_id: int, node: tuple[Any, ...]) -> float | None:
        kind = node[0]
        if kind == "agg":
            return self.aggregate(run_id, *node[1:])
        if kind == "param":
            return self.param(run_id, node[1])[0]
        if kind == "num":
            return float(node[1])
        left, right = self.number(run_id, node[1]), self.number(run_id, node[2])
        if left is None or right is None or math.isnan(float(left) - float(right)):
            return None
        return float(left) - float(right)

    def shown_value(self, run_id: int, node: tuple[Any, ...]) -> float | str | None:
        """A ``--by`` or ``--column`` value: a param that is text is its text."""
        if node[0] == "param":
            number, text = self.param(run_id, node[1])
            return number if number is not None else text
        return self.number(run_id, node)

    def text(self, run_id: int, source: str) -> str | None:
        if source in ("run", "group"):
            return str(self.runs.loc[run_id, "run_path" if source == "run" else "group_path"])
        return self.param(run_id, source)[1]

    def holds(self, run_id: int, node: tuple[Any, ...]) -> bool:
        kind = node[0]
        if kind == "and":
            return self.holds(run_id, node[1]) and self.holds(run_id, node[2])
        if kind == "or":
            return self.holds(run_id, node[1]) or self.holds(run_id, node[2])
        if kind == "not":
            return not self.holds(run_id, node[1])
        if kind == "chain":
            low, value, high = (self.number(run_id, part) for part in node[1:])
            return None not in (low, value, high) and low < value <= high  # type: ignore[operator]
        if kind == "cmp":
            return compare(self.number(run_id, node[1]), node[2], self.number(run_id, node[3]))
        value = self.text(run_id, node[1])
        if kind == "text":
            return compare(value, node[2], node[3])
        if kind == "in":
            return value is not None and (value in node[2]) != node[3]
        return value is not None and fnmatchcase(value, node[2])


def compare(left: Any, operator: str, right: Any) -> bool:
    if left is None or right is None:
        return False
    return bool(
        {
            "==": left == right,
            "!=": left != right,
            "<": left < right,
            "<=": left <= right,
            ">": left > right,
            ">=": left >= right,
        }[operator]
    )


def expected_runs(
    oracle: Oracle,
    where: tuple[Any, ...] | None,
    by: tuple[Any, ...] | None = None,
    ascending: bool = False,
    top: int | None = None,
) -> list[str]:
    runs = oracle.runs.reset_index().sort_values("run_path")
    chosen = [
        (row.run_path, None if by is None else oracle.shown_value(row.run_id, by))
        for row in runs.itertuples()
        if where is None or oracle.holds(row.run_id, where)
    ]
    if by is not None:
        numbers = [entry for entry in chosen if isinstance(entry[1], float | int)]
        texts = [entry for entry in chosen if isinstance(entry[1], str)]
        numbers.sort(key=lambda entry: entry[1], reverse=not ascending)
        texts.sort(key=lambda entry: entry[1], reverse=not ascending)
        chosen = numbers + texts + [entry for entry in chosen if entry[1] is None]
    paths = [path for path, _ in chosen]
    return paths if top is None else paths[:top]


@given(where=conditions, resumed=st.sampled_from(["current", "all"]))
def test_where_selects_the_runs_the_oracle_does(
    store: Store, oracles: dict[str, Oracle], where: tuple[Any, ...], resumed: str
) -> None:
    text = render(where)
    with store.connect() as conn:
        found = select_runs(conn, RunSelection(where=text, resumed=resumed))
    assert [row["run_path"] for row in found] == expected_runs(oracles[resumed], where), text


@given(
    where=st.none() | conditions,
    by=values,
    ascending=st.booleans(),
    top=st.none() | st.integers(0, 7),
    resumed=st.sampled_from(["current", "all"]),
)
def test_top_by_orders_as_the_oracle_does(
    store: Store,
    oracles: dict[str, Oracle],
    where: tuple[Any, ...] | None,
    by: tuple[Any, ...],
    ascending: bool,
    top: int | None,
    resumed: str,
) -> None:
    selection = RunSelection(
        where=None if where is None else render(where),
        by=("-" if ascending else "") + render(by),
        top=top,
        resumed=resumed,
    )
    with store.connect() as conn:
        found = select_runs(conn, selection)
    expected = expected_runs(oracles[resumed], where, by, ascending, top)
    assert [row["run_path"] for row in found] == expected, selection


@pytest.mark.parametrize("resumed", ["current", "all"])
def test_top_past_the_runs_with_a_value_goes_on_with_the_runs_without(
    store: Store, oracles: dict[str, Oracle], resumed: str
) -> None:
    """``--top N`` asks first for the runs that have the ``--by`` value; where fewer than N
    have it, the runs without it follow, as the oracle orders them."""
    oracle = oracles[resumed]
    by = ("agg", "min", "acc", "val")
    order = expected_runs(oracle, None, by, ascending=True)
    ids = {path: run_id for run_id, path in oracle.runs["run_path"].items()}
    valued = [path for path in order if oracle.shown_value(ids[path], by) is not None]
    assert 0 < len(valued) < len(order)  # the store has runs on both sides
    for top in (len(valued), len(valued) + 1, len(order)):
        selection = RunSelection(by="-" + render(by), top=top, resumed=resumed)
        with store.connect() as conn:
            found = select_runs(conn, selection)
        assert [row["run_path"] for row in found] == order[:top], top


@given(value=values, resumed=st.sampled_from(["current", "all"]))
def test_columns_hold_the_oracles_values(
    store: Store, oracles: dict[str, Oracle], value: tuple[Any, ...], resumed: str
) -> None:
    oracle = oracles[resumed]
    with store.connect() as conn:
        found = select_runs(conn, RunSelection(columns=[("v", render(value))], resumed=resumed))
    for row in found:
        expected = oracle.shown_value(row["run_id"], value)
        assert row["values"]["v"] == pytest.approx(expected), (row["run_path"], render(value))


def test_a_resumed_run_reads_its_last_attempt_by_default(store: Store) -> None:
    columns = [("low", "min(loss)"), ("n", "count(loss)"), ("at", "argmin(loss)")]
    with store.connect() as conn:
        current = select_runs(conn, RunSelection(run="b/r3", columns=columns))
        every = select_runs(conn, RunSelection(run="b/r3", columns=columns, resumed="all"))
    # The first attempt's 0.25 at step 3 was logged again by the second as 1.25.
    assert current[0]["values"] == {"low": 0.75, "n": 9, "at": 5}
    assert every[0]["values"] == {"low": 0.25, "n": 12, "at": 3}


def test_a_run_restarted_inside_its_file_reads_its_last_attempt(store: Store) -> None:
    columns = [("low", "min(loss)"), ("n", "count(loss)"), ("last", "last(loss)")]
    with store.connect() as conn:
        current = select_runs(conn, RunSelection(run="b/r6", columns=columns))
        every = select_runs(conn, RunSelection(run="b/r6", columns=columns, resumed="all"))
    assert current[0]["values"] == {"low": 1.0, "n": 3, "last": 1.5}
    assert every[0]["values"] == {"low": 0.25, "n": 5, "last": 1.5}


def test_a_series_beside_a_session_start_reads_its_last_attempt(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """A SessionLog START drops the points logged before it at or after its step, though the
    steps never go back (the summary's ``maybe_resumed`` is not set): ``current`` reads the
    rest, in its run and context only."""
    run = tmp_path / "logs" / "restarted"
    events = [
        summary_event(step, 10.0 + step, [simple_value("loss", value)])
        for step, value in ((0, 2.0), (1, 0.5), (2, 0.25))
    ]
    events.append(Event(step=1, wall_time=20.0, session_log=SessionLog(status=SessionLog.START)))
    events += [
        summary_event(step, 20.0 + step, [simple_value("loss", value)])
        for step, value in ((2, 1.75), (3, 1.25))
    ]
    write_events(run / "events.out.tfevents.1.host", events)
    write_events(
        run / "val" / "events.out.tfevents.1.host",
        [summary_event(step, 10.0 + step, [simple_value("loss", 0.25)]) for step in (0, 1)],
    )
    store = make_store(tmp_path)
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    columns = [("low", "min(loss)"), ("val", 'min(loss, context="val")'), ("n", "count(loss)")]
    with tbconvert.open_store(store) as opened, opened.connect() as conn:
        current = select_runs(conn, RunSelection(where="min(loss) > 1", columns=columns))
        every = select_runs(
            conn, RunSelection(where="min(loss) < 1", columns=columns, resumed="all")
        )
        top = select_runs(conn, RunSelection(top=1, by="-min(loss)", columns=columns))
    # Steps 1 and 2 before the START are dropped: 2.0, then 1.75 and 1.25 after it.
    assert [row["values"] for row in current] == [{"low": 1.25, "val": 0.25, "n": 3}]
    assert [row["values"] for row in every] == [{"low": 0.25, "val": 0.25, "n": 5}]
    assert [row["values"] for row in top] == [{"low": 1.25, "val": 0.25, "n": 3}]


def test_an_aggregate_reads_the_one_context_that_has_its_tag(store: Store) -> None:
    with store.connect() as conn:
        found = select_runs(
            conn, RunSelection(run=["a/r2", "b/r4", "b/r5"], columns=[("acc", "last(acc)")])
        )
    assert [row["values"]["acc"] for row in found] == [0.75, 1.0, 0.25]


def test_a_tag_in_several_contexts_needs_one_named(store: Store) -> None:
    with store.connect() as conn, pytest.raises(ExpressionError) as raised:
        select_runs(conn, RunSelection(where="max(acc) > 0.5"))
    assert str(raised.value).startswith(
        "--where: column 1: max(acc): run 'a/r0' logs 'acc' in contexts 'train', 'val'"
    )


def test_a_tag_no_series_has_is_an_error(store: Store) -> None:
    with store.connect() as conn, pytest.raises(ExpressionError) as raised:
        select_runs(conn, RunSelection(where="lr > 0", columns=[("x", "2 * min(los)")]))
    assert str(raised.value) == (
        "--column x: column 5: no scalar series 'los' in the store (did you mean loss?)"
    )


def test_params_compare_by_type(store: Store) -> None:
    cases = {
        "flag == True": ["a/r0", "a/r2", "b/r5"],  # a bool, or torch's 1.0
        'opt == "adam"': ["a/r0", "a/r2"],
        "opt > 1": [],  # text is not a number
        'layers == "2"': [],  # nor a number text
        "not dropout > 0": ["a/r0", "a/r1", "a/r2", "b/r3", "b/r4", "b/r5", "b/r6"],
    }
    with store.connect() as conn:
        for where, expected in cases.items():
            found = select_runs(conn, RunSelection(where=where))
            assert [row["run_path"] for row in found] == expected, where


@pytest.mark.parametrize(
    ("expression", "column", "message"),
    [
        ("mni(loss) < 1", 1, "unknown function 'mni'"),
        ("lr < 1 and mni(loss) < 1", 12, "unknown function 'mni'"),
        ("lr <", 5, "unexpected end of expression"),
        ("lr", 1, "expected a condition"),
        ("lr < 1 and lr", 12, "expected a condition"),
        ('min(loss, ctx="a") < 1', 11, "unknown argument 'ctx'"),
        ("min(loss, 2) < 1", 1, "min() takes one tag"),
        ("min(3) < 1", 5, "a tag is a name or a quoted string"),
        ("lr === 2", 6, "invalid syntax"),
        ("lr is None", 7, "unsupported comparison"),
        ("lr ** 2 > 1", 1, "unsupported operator"),
        ("opt in [1, 'a']", 8, "a list of both text and numbers"),
        ("opt in lr", 8, "'in' takes a list of literals"),
        ("run % lr", 7, "a glob is a quoted string"),
        ("params[1] > 0", 8, "a param's key is a quoted string"),
        ("x.y > 1", 1, "unsupported syntax"),
        ("__import__('os') > 1", 1, "unknown function '__import__'"),
        ("(lr < 1) < 2", 2, "expected a value, not a condition"),
        ("é < 1 and mni(x) < 2", 11, "unknown function 'mni'"),
    ],
)
def test_a_bad_expression_names_its_column(expression: str, column: int, message: str) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse_condition(expression)
    assert raised.value.column == column, str(raised.value)
    assert str(raised.value).startswith(f"--where: column {column}: {message}")


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("run < 3", "--where: column 1: compares text with a number"),
        ('run % "a*" and min(loss) % "x"', "--where: column 16: a glob matches text"),
        ("run in [1, 2]", "--where: column 1: a list of numbers for a value that is text"),
        ("run + 1 > 2", "--where: column 1: arithmetic on text"),
    ],
)
def test_a_type_error_names_its_column(store: Store, where: str, message: str) -> None:
    with store.connect() as conn, pytest.raises(ExpressionError) as raised:
        select_runs(conn, RunSelection(where=where))
    assert str(raised.value).startswith(message)


def test_by_with_a_minus_points_past_it(store: Store) -> None:
    with store.connect() as conn, pytest.raises(ExpressionError) as raised:
        select_runs(conn, RunSelection(by="-mni(loss)"))
    assert str(raised.value).startswith("--by: column 2: unknown function 'mni'")


def test_the_store_selects_runs(store: Store) -> None:
    found = store.select_runs(
        'opt in ["adam", "sgd"]', run="a/*", by="-lr", top=2, columns=[("best", "min(loss)")]
    )
    assert [(row["run_path"], row["values"]["best"]) for row in found] == [
        ("a/r0", 0.25),
        ("a/r1", 1.0),
    ]


@given(
    pattern=st.text("ab/%_\\*?[]!-", max_size=6),
    names=st.lists(st.text("ab/%_\\[]!-*?", max_size=5), min_size=1, max_size=6),
)
def test_a_glob_matches_what_fnmatch_matches(store: Store, pattern: str, names: list[str]) -> None:
    """The SQL of ``%`` (``GLOB``, ``LIKE`` or a regular expression) against Python's own
    ``fnmatchcase``, with the characters each of them treats specially."""
    with store.connect() as conn:
        compiler = Compiler(conn.dialect.name)
        rows = " UNION ALL ".join(
            f"SELECT {index} AS n, CAST(:name{index} AS TEXT) AS name"
            for index in range(len(names))
        )
        sql = f"SELECT n FROM ({rows}) AS t WHERE name {compiler.glob(pattern)} ORDER BY n"
        bound = {f"name{index}": name for index, name in enumerate(names)} | compiler.parameters
        found = [row[0] for row in conn.execute(text(sql), bound)]
    assert found == [i for i, name in enumerate(names) if fnmatchcase(name, pattern)], pattern
