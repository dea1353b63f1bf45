"""The SQL cookbook and Python API examples of docs/, run against a real converted store.

The SQL blocks (docs/cookbook.md) and Python blocks (docs/python-api.md) are EXTRACTED from
the docs, so they cannot go stale: every ``### heading`` of the cookbook needs a check here,
and every check a heading.
Every recipe and example runs unchanged on a SQLite and on a PostgreSQL store and must give
the same answers.  The datasette metadata is loaded by datasette itself, and its canned
queries are run (SQLite only: datasette serves SQLite files).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tbconvert import convert
from tbconvert.output.datasette import QUERIES, database_name, metadata
from tests.support.snapshots import StoreFactory, connect, is_server
from tests.support.sweep import STEPS, SWEEP, build_store, sweep_pixels

DOCS = Path(__file__).resolve().parents[2] / "docs"
# Each section the examples are read from, and the page that holds it.
PAGES = {"SQL cookbook": DOCS / "cookbook.md", "Python API": DOCS / "python-api.md"}
Rows = list[dict[str, Any]]


def section(name: str) -> str:
    """The text of one ``## name`` section of its page in docs/."""
    text = PAGES[name].read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"{PAGES[name].name} has no '## {name}' section"
    return match.group(1)


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def cookbook() -> dict[str, str]:
    """``### heading`` -> the one SQL statement under it."""
    recipes = {}
    for part in re.split(r"^### ", section("SQL cookbook"), flags=re.M)[1:]:
        heading, body = part.split("\n", 1)
        blocks = code_blocks(body, "sql")
        assert len(blocks) == 1, f"{heading!r}: one ```sql block per recipe"
        recipes[heading.strip()] = blocks[0]
    return recipes


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("cookbook"), make_store)


def run_sql(store: str, sql: str) -> Rows:
    """The rows of one statement as dicts, read-only, as psql, DBeaver or sqlite3 run it."""
    with closing(connect(store)) as conn:
        cursor = conn.execute(sql)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# run_1's second event file, the job resumed from the step-150 checkpoint, was started at this
# wall time (its name: events.out.tfevents.1795003600.sample-host; sample_logdirs/README.md).
RUN_1_RESUMED_AT = 1_795_003_600.0


def check_curve(rows: Rows, store: str) -> None:
    assert len(rows) == 350 and list(rows[0]) == ["step", "wall_time", "value"]
    steps = [row["step"] for row in rows]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == 299
    assert sum(1 for step in steps if step == 170) == 2
    assert rows[0]["value"] > rows[-1]["value"]  # a decaying loss
    # Steps 150..199 twice, each time first as first written, then as resumed: one order on
    # every backend (ties of a sort are in no defined order on PostgreSQL).
    for step in range(150, 200):
        passes = [row["wall_time"] >= RUN_1_RESUMED_AT for row in rows if row["step"] == step]
        assert passes == [False, True], step


def check_last_values(rows: Rows, store: str) -> None:
    (series,) = run_sql(store, "SELECT count(*) AS n FROM series WHERE plugin = 'scalars'")
    assert len(rows) == series["n"]
    last = {(r["run_path"], r["context"], r["tag"]): r for r in rows}
    assert last[("run_1", "", "loss")]["step"] == 299
    assert last[("sweep/lr_1.0", "", "loss")]["value"] is None
    assert last[("group_1/run_2", "", "learning_rate")]["step"] == 2380


def check_series_overview(rows: Rows, store: str) -> None:
    # One row per series that has points, each equal to what the point views hold.
    (series,) = run_sql(store, "SELECT count(*) AS n FROM series")
    assert len(rows) == series["n"]
    got = {(r["run_path"], r["context"], r["tag"], r["plugin"]): r for r in rows}
    loss = got[("run_1", "", "loss", "scalars")]
    assert (loss["points"], loss["first_step"], loss["last_step"]) == (350, 0, 299)
    assert got[("sweep/lr_1.0", "", "loss", "scalars")]["last_value"] is None  # went NaN
    for view in ("v_scalars", "v_images", "v_texts"):
        counted = run_sql(
            store,
            f"SELECT run_path, context, tag, count(*) AS n, min(step) AS first, "
            f"max(step) AS last FROM {view} GROUP BY run_path, context, tag",
        )
        for row in counted:
            (match,) = [
                r
                for key, r in got.items()
                if key[:3] == (row["run_path"], row["context"], row["tag"])
            ]
            assert (match["points"], match["first_step"], match["last_step"]) == (
                row["n"],
                row["first"],
                row["last"],
            )
    for last in run_sql(store, "SELECT run_path, context, tag, value FROM v_last_scalars"):
        key = (last["run_path"], last["context"], last["tag"], "scalars")
        assert got[key]["last_value"] == last["value"]


def check_params_pivot(rows: Rows, store: str) -> None:
    assert [row["run_path"] for row in rows] == ["sweep/lr_0.1", "sweep/lr_0.01", "sweep/lr_1.0"]
    for row in rows:
        assert row["context"] == ""  # the sweep logs accuracy in the run directory itself
        lr, optimizer, final, _ = SWEEP[row["run_path"].split("/")[1]]
        assert (row["lr"], row["optimizer"], row["batch_size"]) == (lr, optimizer, 32.0)
        assert row["final_accuracy"] == pytest.approx(final)


def check_nan(rows: Rows, store: str) -> None:
    assert rows == [
        {
            "run_path": "sweep/lr_1.0",
            "context": "",
            "tag": "loss",
            "first_nan_step": 6,
            "nan_points": STEPS - 6,
        }
    ]


def check_images(rows: Rows, store: str) -> None:
    assert [row["run_path"] for row in rows] == [f"sweep/{run}" for run in sorted(SWEEP)]
    for row in rows:
        height, width, _ = sweep_pixels(row["run_path"].split("/")[1], 2).shape
        assert (row["format"], row["width"], row["height"], row["idx"]) == ("PNG", width, height, 0)
        assert row["bytes"] > 50


def check_search(rows: Rows, store: str) -> None:
    assert [(r["run_path"], r["tag"], r["value"]) for r in rows] == [
        ("sweep/lr_1.0", "notes/text_summary", "Diverged at step 6")
    ]


CHECKS: dict[str, Callable[[Rows, str], None]] = {
    "Learning curve of a tag": check_curve,
    "Last value of every series": check_last_values,
    "Every series at a glance": check_series_overview,
    "Final metric of every run next to its hyper-parameters": check_params_pivot,
    "Runs whose loss went NaN": check_nan,
    "Images of a tag at a step": check_images,
    "Search the texts": check_search,
}


def test_every_recipe_has_a_check_and_every_check_a_recipe() -> None:
    assert sorted(cookbook()) == sorted(CHECKS)


@pytest.mark.parametrize("heading", sorted(CHECKS))
def test_recipe(heading: str, store_path: str) -> None:
    sql = cookbook()[heading]
    assert "v_" in sql, "recipes use the public views"
    CHECKS[heading](run_sql(store_path, sql), store_path)


def test_final_metric_recipe_gives_a_row_per_context(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    # A sweep whose accuracy is only in add_scalars' contexts, and a run that logged none.
    from tensorboardX import SummaryWriter

    written = {"ctx/lr_0.1": (0.1, "adam", 0.75, 0.5), "ctx/lr_0.5": (0.5, "sgd", 0.25, 0.125)}
    for run, (lr, optimizer, train, val) in written.items():
        with SummaryWriter(str(tmp_path / "logs" / run), flush_secs=3600) as writer:
            writer.add_scalars("accuracy", {"train": 0.0, "val": 0.0}, 0, walltime=1.0)
            writer.add_scalars("accuracy", {"train": train, "val": val}, 1, walltime=2.0)
            writer.add_hparams({"lr": lr, "optimizer": optimizer, "batch_size": 8}, {})
    with SummaryWriter(str(tmp_path / "logs" / "ctx/none"), flush_secs=3600) as writer:
        writer.add_hparams({"lr": 1.0, "optimizer": "sgd", "batch_size": 8}, {})
    store = make_store(tmp_path, "contexts")
    assert convert(tmp_path / "logs", store, progress=False).exit_code == 0
    rows = run_sql(store, cookbook()["Final metric of every run next to its hyper-parameters"])
    got = [tuple(row.values()) for row in rows]
    expected = [
        (run, context, lr, optimizer, 8.0, value)
        for run, (lr, optimizer, train, val) in written.items()
        for context, value in (("train", train), ("val", val))
    ]
    expected.sort(key=lambda row: (-row[-1], row[0], row[1]))
    assert got == [*expected, ("ctx/none", None, 1.0, "sgd", 8.0, None)]


def test_python_api_examples_run(store_path: str, tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("pandas")
    blocks = code_blocks(section("Python API"), "python")
    assert len(blocks) == 3
    if is_server(store_path):  # the example's store is "runs.db": point it at the server
        opening = 'tbconvert.open_store("runs.db")'
        assert opening in blocks[0]
        blocks[0] = blocks[0].replace(opening, f"tbconvert.open_store({store_path!r})")
        workdir = tmp_path
    else:  # build_store wrote runs.db there
        workdir = Path(store_path).parent
    monkeypatch.chdir(workdir)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(PAGES["Python API"]), "exec"), namespace)  # our own docs
    assert namespace["hparams"] == {"batch_size": 32.0, "lr": 0.1, "optimizer": "adam"}
    assert len(namespace["steps"]) == 350 and namespace["train_loss"].size == 25
    assert namespace["best"].iloc[0]["run_path"] == "sweep/lr_0.1"
    assert sorted(namespace["curves"].columns) == [f"sweep/{run}" for run in sorted(SWEEP)]
    saved = sorted(p.name for p in workdir.glob("sweep_*.png"))
    assert saved == [f"sweep_{run}-step2.png" for run in sorted(SWEEP)]
    whole, zoom = namespace["whole"], namespace["zoom"]
    logged = namespace["store"].scalars(run="sweep/lr_0.1", tag="loss")
    assert whole.exact and [p.step for p in whole.points] == sorted(logged["step"])
    assert (zoom.lo, zoom.hi) == (1000, 2000) and zoom.total == 0  # the run logged fewer steps
    namespace["store"].close()


# --------------------------------------------------------------------------- datasette


def datasette_get(store: str, document: dict[str, Any], *paths: str) -> list[Any]:
    """GET each path from an in-process datasette serving the store with the metadata."""
    from datasette.app import Datasette

    async def fetch() -> list[Any]:
        app = Datasette([str(store)], metadata=document)
        await app.invoke_startup()
        responses = [await app.client.get(path) for path in paths]
        for path, response in zip(paths, responses, strict=True):
            assert response.status_code == 200, (path, response.text[:500])
        return [
            response.json() if ".json" in path else response.text
            for path, response in zip(paths, responses, strict=True)
        ]

    return asyncio.run(fetch())


# SQLite-only: datasette serves SQLite files.
@pytest.mark.parametrize("make_store", ["sqlite"], indirect=True)
def test_datasette_loads_the_metadata(store_path: str) -> None:
    pytest.importorskip("datasette")
    name = database_name(store_path)
    document = json.loads(json.dumps(metadata(name)))  # what the command writes
    served, runs_page, runs_json, last = datasette_get(
        store_path,
        document,
        "/-/metadata.json",
        f"/{name}/v_runs",
        f"/{name}/v_runs.json?_shape=objects&_extra=facet_results",
        f"/{name}/v_last_scalars.json?_extra=facet_results&_shape=objects",
    )
    # Datasette adds keys of its own (and to the dict it is given): compare what we wrote.
    written = metadata(name)["databases"][name]
    served_database = served["databases"][name]
    for kind in ("tables", "queries"):
        assert set(served_database[kind]) == set(written[kind])
        for key, entry in written[kind].items():
            assert {k: served_database[kind][key][k] for k in entry} == entry
    assert "One row per run" in runs_page and "relative to its logdir" in runs_page
    facets = runs_json["facet_results"]
    assert set(facets) == {"group_path", "logdir"}
    assert {item["value"] for item in facets["group_path"]["results"]} >= {"group_1", "sweep"}
    assert "tag" in last["facet_results"]


# SQLite-only: datasette serves SQLite files.
@pytest.mark.parametrize("make_store", ["sqlite"], indirect=True)
def test_datasette_hides_internal_tables_and_labels_runs(store_path: str) -> None:
    pytest.importorskip("datasette")
    name = database_name(store_path)
    (database,) = datasette_get(store_path, metadata(name), f"/{name}.json")
    hidden = {table["name"] for table in database["tables"] if table["hidden"]}
    assert hidden == {"blobs", "tbconvert_alembic_version"}
    (series,) = datasette_get(
        store_path, metadata(name), f"/{name}/series.json?_shape=objects&_labels=on&_size=1"
    )
    run = series["rows"][0]["run_id"]  # a label, not a bare id
    (expected,) = run_sql(store_path, f"SELECT run_path FROM runs WHERE id = {run['value']}")
    assert run["label"] == expected["run_path"]


def check_final_with_params(rows: Rows, store: str) -> None:
    # One row per (run, param) of every run with an accuracy series: the sweep's runs, best
    # final accuracy first, keys in order; each run's params come from its one session.
    expected = [
        (f"sweep/{run}", "", final, key, value)
        for run, (lr, optimizer, final, _) in sorted(SWEEP.items(), key=lambda item: -item[1][2])
        for key, value in sorted(
            {"batch_size": "32.0", "lr": str(lr), "optimizer": optimizer}.items()
        )
    ]
    got = [(r["run_path"], r["context"], r["final_value"], r["key"], r["value"]) for r in rows]
    assert [row[:3] + row[3:] for row in got] == [
        (run, context, pytest.approx(final), key, value)
        for run, context, final, key, value in expected
    ]
    for run in {row["run_path"] for row in rows}:
        sessions = {row["session"] for row in rows if row["run_path"] == run}
        assert len(sessions) == 1 and sessions.pop(), run


def check_canned_images(rows: Rows, store: str) -> None:
    # The sweep logged ``samples`` at step 2 in each run: one PNG each, pixels as logged.
    from io import BytesIO

    import numpy as np
    from PIL import Image

    assert [row["run_path"] for row in rows] == [f"sweep/{run}" for run in sorted(SWEEP)]
    for row in rows:
        pixels = sweep_pixels(row["run_path"].split("/")[1], 2)
        height, width, _ = pixels.shape
        assert (row["context"], row["idx"], row["format"]) == ("", 0, "PNG")
        assert (row["width"], row["height"]) == (width, height)
        data = row["data"]
        raw = data if isinstance(data, bytes) else __import__("base64").b64decode(data["encoded"])
        assert np.array_equal(np.asarray(Image.open(BytesIO(raw)).convert("RGB")), pixels)


# Each canned query runs with these arguments and must give exactly the rows its check names
# (the cookbook's own checks where the query is the recipe's).
CANNED: dict[str, tuple[str, Callable[[Rows, str], None]]] = {
    "learning_curve": ("run_path=run_1&context=&tag=loss", check_curve),
    "last_values": ("", check_last_values),
    "series_overview": ("", check_series_overview),
    "final_metric_with_params": ("tag=accuracy", check_final_with_params),
    "nan_series": ("", check_nan),
    "images_at_step": ("tag=samples&step=2", check_canned_images),
    "search_texts": ("words=DIVERGED", check_search),
}


# SQLite-only: datasette serves SQLite files.
@pytest.mark.parametrize("make_store", ["sqlite"], indirect=True)
def test_datasette_canned_queries(store_path: str) -> None:
    pytest.importorskip("datasette")
    assert sorted(CANNED) == sorted(QUERIES)
    name = database_name(store_path)
    paths = [
        f"/{name}/{query}.json?_shape=objects&{arguments}"
        for query, (arguments, _) in CANNED.items()
    ]
    results = datasette_get(store_path, metadata(name), *paths)
    for (_, check), result in zip(CANNED.values(), results, strict=True):
        check(result["rows"], store_path)
