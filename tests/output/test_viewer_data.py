"""The viewer's data (``output/viewer/data.py``) against pandas over the store's views: a
thinned chart keeps every bucket's exact min and max and every NaN; a range that fits comes
whole; the runs table carries every run, its params and its series' last values.
"""

from __future__ import annotations

import json
import math

import pytest
from tensorboardX import SummaryWriter

from tbconvert import convert, open_store
from tbconvert.output.viewer import data
from tests.support.snapshots import StoreFactory, query_rows

pandas = pytest.importorskip("pandas")

STEPS = 20_000
SPIKE, NAN_STEP = 12_345, 777
BUCKETS = 200


def value_at(step: int) -> float:
    if step == SPIKE:
        return 1e6
    if step == NAN_STEP:
        return math.nan
    return math.sin(step / 500) + (step % 7) / 100


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    root = tmp_path_factory.mktemp("viewer-data")
    for name, lr in (("long", 0.1), ("short", 0.2)):
        with SummaryWriter(str(root / "logs" / name), flush_secs=3600) as writer:
            for step in range(STEPS if name == "long" else 50):
                writer.add_scalar("loss", value_at(step), step, walltime=1e9 + step)
            writer.add_hparams({"lr": lr, "name": f"<{name}>"}, {})
    path = make_store(root)
    assert convert(root / "logs", path, progress=False).exit_code == 0
    return path


def points_of(store: str, run: str, low: int, high: int) -> pandas.DataFrame:
    rows = query_rows(
        store,
        "SELECT step, value FROM v_scalars WHERE run_path = ? AND tag = 'loss' "
        "AND step >= ? AND step <= ?",
        run,
        low,
        high,
    )
    return pandas.DataFrame(rows, columns=["step", "value"]).astype({"value": float})


def line_of(store: str, run: str, **range_: float) -> dict:
    with open_store(store) as opened:
        run_id = {row["run_path"]: row["run_id"] for row in opened.runs()}[run]
        answer = data.chart(opened, "loss", [run_id], "step", buckets=BUCKETS, **range_)
    (line,) = answer["lines"]
    return line


def test_a_thinned_line_keeps_every_bucket_s_min_max_and_nan(store: str) -> None:
    line = line_of(store, "long")
    every = points_of(store, "long", 0, STEPS)
    assert line["thinned"] and line["points"] == len(every)
    assert len(line["x"]) <= 4 * BUCKETS
    # Each bucket of the documented rule keeps its extremes.
    every["bucket"] = every["step"] * BUCKETS // STEPS
    drawn = pandas.DataFrame({"step": line["x"], "value": line["y"]}).astype({"value": float})
    drawn["bucket"] = drawn["step"] * BUCKETS // STEPS
    want = every.groupby("bucket")["value"].agg(["min", "max"])
    got = drawn.groupby("bucket")["value"].agg(["min", "max"])
    pandas.testing.assert_frame_equal(got, want)
    assert SPIKE in line["x"] and max(v for v in line["y"] if v is not None) == 1e6
    assert line["nan"] == [NAN_STEP]
    # Every point drawn is a point of the series.
    known = dict(zip(every["step"], every["value"], strict=True))
    for step, value in zip(line["x"], line["y"], strict=True):
        assert (value is None and math.isnan(known[step])) or known[step] == value


def test_a_range_that_fits_comes_whole(store: str) -> None:
    line = line_of(store, "long", low=12_300, high=12_400)
    every = points_of(store, "long", 12_300, 12_400)
    assert not line["thinned"]
    assert line["x"] == every["step"].tolist()
    assert line["y"] == every["value"].tolist()


def test_a_chart_is_plain_json_on_both_backends(store: str) -> None:
    """The app encodes answers with orjson, which refuses the Decimal a PostgreSQL ``sum``
    gives: every count must come back as an int."""
    with open_store(store) as opened:
        run_ids = [row["run_id"] for row in opened.runs()]
        for range_ in ({}, {"low": 12_300, "high": 12_400}):
            answer = data.chart(opened, "loss", run_ids, "step", buckets=BUCKETS, **range_)
            json.loads(json.dumps(answer))
            assert all(type(line["points"]) is int for line in answer["lines"])


def test_the_runs_table(store: str) -> None:
    with open_store(store) as opened:
        found = data.overview(opened)
    runs = {entry["run"]: entry for entry in found["runs"]}
    assert set(runs) == {"long", "short"}
    assert runs["short"]["params"] == {"lr": 0.2, "name": "<short>"}
    assert runs["short"]["metrics"]["loss"]["last"] == pytest.approx(value_at(49))
    assert runs["long"]["metrics"]["loss"]["max"] == 1e6
    assert found["tags"] == ["loss"] and found["params"] == ["lr", "name"]


def test_bad_requests_are_usage_errors(store: str) -> None:
    from tbconvert.errors import UsageError

    with open_store(store) as opened, pytest.raises(UsageError):
        data.chart(opened, "loss", [1], "epoch")


def test_the_viewer_cannot_write(store: str) -> None:
    with open_store(store) as opened:
        data.make_read_only(opened)
        with pytest.raises(Exception, match=r"(?i)read.?only"), opened.connect() as conn:
            conn.exec_driver_sql("DELETE FROM runs")
    assert query_rows(store, "SELECT count(*) FROM runs") == [(2,)]


def test_serving_off_loopback_warns(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tbconvert.output import serve

    started = []
    monkeypatch.setattr("uvicorn.run", lambda app, host, port, **_: started.append((host, port)))
    for host, warned in (("127.0.0.1", False), ("::1", False), ("localhost", False),
                         ("0.0.0.0", True), ("192.168.1.5", True)):  # fmt: skip
        lines: list[str] = []
        with open_store(store) as opened:
            serve.serve(opened, host, 8123, announce=lines.append)
        assert lines[-1].startswith("Serving") and "http" in lines[-1]
        assert (len(lines) == 2 and lines[0].startswith("Warning: listening on")) is warned
    assert started[-1] == ("192.168.1.5", 8123)
