"""What ``series_summaries`` keeps for the selection language (#49): the finite sum and the
count of values for ``mean``, the first steps of the extremes for ``argmin``/``argmax``, and
``maybe_resumed``, the flag that sends a series to its current points.

Their exactness after any history is checked with the rest of the summary wherever stores are
compared (``snapshots.assert_summaries_exact``: a recount from the points).  Here: the NumPy
aggregation against plain Python, the flag's soundness against ``v_scalars_current`` over
generated histories converted in several passes, and a selection that reads no point.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from contextlib import closing
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import event
from tensorboard.compat.proto.event_pb2 import Event, SessionLog

from tbconvert import convert, open_store
from tbconvert.rows import FileRows
from tbconvert.writing import series_summaries
from tests.support.eventfiles import append_events, simple_value, summary_event, write_events
from tests.support.snapshots import StoreFactory, assert_summaries_exact, connect, rows
from tests.writing.test_series_summary import scalar_rows


def _plain(generated: list[tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """Per series: finite sum, values not NaN, first steps of the extremes, the flag."""
    by_series: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in generated:
        by_series[row[0]].append(row)
    result = {}
    for series, group in by_series.items():
        values = [(r[6], r[1]) for r in group if not math.isnan(r[6])]
        finite = [v for v, _ in values if math.isfinite(v)]
        low = min((v for v, _ in values), default=None)
        high = max((v for v, _ in values), default=None)
        in_order = [r[1] for r in sorted(group, key=lambda r: (r[3], r[4]))]
        result[series] = (
            _float_sum(finite) if finite else None,
            len(values),
            min((s for v, s in values if v == low), default=None),
            min((s for v, s in values if v == high), default=None),
            any(later < earlier for earlier, later in pairwise(in_order)),
        )
    return result


def _float_sum(values: list[float]) -> float:
    """The sum rounded once to a float; beyond the float range, what adding in floats gives
    (an infinity: a mean over such values is infinite, as docs/cli.md says)."""
    try:
        return math.fsum(values)
    except OverflowError:
        return sum(values)


@settings(max_examples=200, deadline=None)
@given(scalar_rows())
@example(
    [(1, 0, 7, 1, 0, None, 8.988465674311579e307), (1, 0, 7, 2, 0, None, 8.98846567431158e307)]
)
def test_the_new_aggregates_of_a_chunk_equal_a_plain_count(
    generated: list[tuple[Any, ...]],
) -> None:
    got = {
        s.series_id: (s.value_sum, s.value_count, s.argmin_step, s.argmax_step, s.maybe_resumed)
        for s in series_summaries._aggregate("scalars", FileRows.of(generated, 7))
    }
    expected = _plain(generated)
    assert got.keys() == expected.keys()
    for series, (total, *rest) in got.items():
        assert rest == list(expected[series][1:])
        other = expected[series][0]
        assert total == other or math.isclose(total, other, rel_tol=1e-9, abs_tol=1e-300), (
            total,
            other,
        )


def _events(records: list[tuple[str, int]], number: int) -> list[Event]:
    events = []
    for index, (what, step) in enumerate(records):
        wall = 10.0 * number + index
        if what == "start":
            status = SessionLog(status=SessionLog.START)
            events.append(Event(step=step, wall_time=wall, session_log=status))
        else:
            events.append(summary_event(step, wall, [simple_value(what, float(index % 3))]))
    return events


_RECORDS = st.lists(
    st.one_of(
        st.tuples(st.just("loss"), st.integers(0, 9)),
        st.tuples(st.just("acc"), st.integers(0, 9)),
        st.tuples(st.just("start"), st.integers(0, 9)),
    ),
    max_size=10,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.tuples(_RECORDS, _RECORDS), min_size=1, max_size=3),
    without_starts=st.booleans(),
)
def test_a_series_whose_current_points_differ_is_flagged(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[list[tuple[str, int]], list[tuple[str, int]]]],
    without_starts: bool,
) -> None:
    """Over histories converted in two passes (each file appended to between them): a series
    whose ``v_scalars_current`` differs from ``v_scalars`` has ``maybe_resumed``, or a
    SessionLog in its run and context (the selection reads both as "maybe resumed")."""
    root = tmp_path_factory.mktemp("history")
    store = str(root / "store.db")
    for part in (0, 1):
        for number, halves in enumerate(files):
            records = [r for r in halves[part] if not (without_starts and r[0] == "start")]
            path = root / "logs" / "run" / f"events.out.tfevents.{number}.host"
            if part == 0:
                write_events(path, [], version_wall_time=1.0)
            append_events(path, _events(records, number))
        convert(root / "logs", store, progress=False)
    assert_summaries_exact(store)
    with closing(connect(store)) as conn:
        every = rows(conn, "SELECT tag, step, wall_time FROM v_scalars ORDER BY 1, 2, 3")
        now = rows(conn, "SELECT tag, step, wall_time FROM v_scalars_current ORDER BY 1, 2, 3")
        flagged = dict(
            rows(
                conn,
                "SELECT s.name, m.maybe_resumed FROM series_summaries AS m "
                "JOIN series AS s ON s.id = m.series_id WHERE m.point_table = 'scalars'",
            )
        )
        logged = rows(conn, "SELECT count(*) FROM series WHERE plugin = 'session_log'")[0][0]
    for tag, resumed in flagged.items():
        differs = [r for r in every if r[0] == tag] != [r for r in now if r[0] == tag]
        assert resumed or not differs or logged, (tag, every, now)


def test_every_aggregate_reads_summaries_not_points(
    tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory
) -> None:
    root = tmp_path_factory.mktemp("plain")
    for run in ("a", "b"):
        values = [0.5, 0.25, 0.75, 0.25] if run == "a" else [1.0, 2.0, 3.0]
        events = [
            summary_event(s, 1.0 + s, [simple_value("loss", v)]) for s, v in enumerate(values)
        ]
        write_events(root / "logs" / run / "events.out.tfevents.1.host", events)
    store = make_store(root)
    convert(root / "logs", store, progress=False)
    statements: list[str] = []
    opened = open_store(store)

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(opened.engine, "before_cursor_execute", seen)
    try:
        chosen = {
            where: [r["run_path"] for r in opened.select_runs(where=where)]
            for where in (
                "mean(loss) < 1",
                "argmin(loss) == 1",
                "argmax(loss) == 2",
                "min(loss) < 1",
            )
        }
    finally:
        event.remove(opened.engine, "before_cursor_execute", seen)
        opened.close()
    assert chosen == {
        "mean(loss) < 1": ["a"],
        "argmin(loss) == 1": ["a"],
        "argmax(loss) == 2": ["a", "b"],
        "min(loss) < 1": ["a"],
    }
    points = [s for s in statements if re.search(r"\b(FROM|JOIN) scalars\b", s)]
    assert not points, points
