"""``tbconvert export``: formats by extension, --wide, hparams, and images as files.

Expected rows come from the database driver on the public views (``query_rows``) or from
what the sweep logged (``tests/support/sweep.py``), never from the export code.  Images are
checked byte for byte against ``v_images``, and hostile tags and run directories must stay
inside ``-o DIR``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from PIL import Image
from tensorboardX import SummaryWriter

import tbconvert
from tbconvert.cli import cli
from tbconvert.errors import MissingDependency
from tbconvert.output import export
from tests.support.snapshots import StoreFactory, query_rows
from tests.support.sweep import SWEEP, build_store


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, make_store: StoreFactory) -> str:
    return build_store(tmp_path_factory.mktemp("formats"), make_store)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def scalar_rows(store_path: str, tag: str) -> list[dict[str, object]]:
    columns = export.COLUMNS["scalars"]
    found = query_rows(
        store_path,
        f"SELECT {', '.join(columns)} FROM v_scalars WHERE tag = ? "
        "ORDER BY run_path, context, step, wall_time",
        tag,
    )
    return [dict(zip(columns, row, strict=True)) for row in found]


def same(left: object, right: object) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return left == right or (math.isnan(left) and math.isnan(right))
    return left == right


def test_json_is_one_array_with_the_views_rows(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "loss.json"
    result = invoke(
        "export", "scalars", "--store", store_path, "--tag", "loss", "--resumed", "all",
        "-o", str(target),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(target.read_text())
    assert isinstance(rows, list)
    expected = scalar_rows(store_path, "loss")
    key = ("run_path", "context", "step", "wall_time")
    assert sorted(rows, key=lambda r: tuple(r[k] for k in key)) == expected


def test_json_of_nothing_is_an_empty_array(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "none.json"
    invoke("export", "scalars", "--store", store_path, "--tag", "nothing", "-o", str(target))
    assert json.loads(target.read_text()) == []


def test_parquet_holds_the_views_rows(store_path: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    target = tmp_path / "loss.parquet"
    result = invoke(
        "export", "scalars", "--store", store_path, "--tag", "loss", "--resumed", "all",
        "-o", str(target),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = pq.read_table(target)
    assert table.column_names == list(export.COLUMNS["scalars"])
    assert str(table.schema.field("step").type) == "int64"
    got = sorted(table.to_pylist(), key=lambda r: (r["run_path"], r["context"], r["step"]))
    expected = scalar_rows(store_path, "loss")
    assert len(got) == len(expected)
    for row, want in zip(got, expected, strict=True):
        # The view's NULL value is a NaN point: Parquet holds it as NaN.
        want = {**want, "value": math.nan if want["value"] is None else want["value"]}
        assert all(same(row[k], want[k]) for k in want), (row, want)


def test_parquet_without_pyarrow_names_the_extra(store_path: str, tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with tbconvert.open_store(store_path) as store, pytest.raises(MissingDependency) as error:
        export.export(store, "scalars", str(tmp_path / "x.parquet"))
    assert "pip install '.[parquet]'" in str(error.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["out.xlsx", "out", "out.csv.gz"])
def test_unknown_extension_is_a_usage_error_naming_the_choices(
    store_path: str, tmp_path: Path, name: str
) -> None:
    result = invoke("export", "scalars", "--store", store_path, "-o", str(tmp_path / name))
    assert result.exit_code == 2
    assert all(ext in result.stderr for ext in (".csv", ".json", ".jsonl", ".parquet"))
    assert list(tmp_path.iterdir()) == []


def test_format_option_overrides_the_extension(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "loss.txt"
    result = invoke(
        "export", "scalars", "--store", store_path, "--tag", "loss", "--format", "jsonl",
        "--resumed", "all", "-o", str(target),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(target.read_text().splitlines()) == len(scalar_rows(store_path, "loss"))


def test_wide_is_a_step_by_series_table(store_path: str) -> None:
    result = invoke(
        "export", "scalars", "--store", store_path, "--run", "sweep/*", "--tag", "loss", "--wide"
    )
    assert result.exit_code == 0, result.output
    table = list(csv.reader(io.StringIO(result.stdout)))
    runs = sorted(SWEEP)
    assert table[0] == ["step", *(f"sweep/{run}//loss" for run in runs)]
    expected: dict[int, dict[str, object]] = {}
    for row in scalar_rows(store_path, "loss"):
        if str(row["run_path"]).startswith("sweep/"):
            value = "NaN" if row["value"] is None else repr(row["value"])  # NULL: a NaN point
            expected.setdefault(int(row["step"]), {})[str(row["run_path"])] = value
    assert [int(line[0]) for line in table[1:]] == sorted(expected)
    for line in table[1:]:
        values = expected[int(line[0])]
        for run, cell in zip(runs, line[1:], strict=True):
            # An empty cell: the run logged nothing at that step.
            assert cell == values.get(f"sweep/{run}", ""), (line[0], run)


def test_wide_is_for_scalars_only(store_path: str) -> None:
    assert invoke("export", "texts", "--store", store_path, "--wide").exit_code == 2


def test_export_hparams(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "sweep.csv"
    result = invoke(
        "export", "hparams", "--store", store_path, "--metric", "accuracy", "-o", str(target)
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [row["run_path"] for row in rows] == [f"sweep/{run}" for run in sorted(SWEEP)]
    for row in rows:
        lr, optimizer, final, _ = SWEEP[row["run_path"].split("/")[1]]
        assert (float(row["lr"]), row["optimizer"]) == (lr, optimizer)
        assert float(row["accuracy"]) == pytest.approx(final, rel=1e-6)


def test_export_images_writes_the_logged_bytes(store_path: str, tmp_path: Path) -> None:
    target = tmp_path / "images"
    result = invoke("export", "images", "--store", store_path, "-o", str(target))
    assert result.exit_code == 0, result.output
    blobs = sorted(bytes(row[0]) for row in query_rows(store_path, "SELECT data FROM v_images"))
    files = sorted(target.iterdir())
    assert f"{len(blobs)} images written" in result.stderr
    assert sorted(path.read_bytes() for path in files) == blobs
    assert all(path.suffix == ".png" for path in files)
    assert any(path.name.startswith("sweep_lr_0.1-_-samples-step2-0-") for path in files)


def hostile_logdir(root: Path) -> Path:
    """A run directory and tags that look like paths, markup, or each other once cleaned."""
    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
    run = root / '"><img src=x onerror=alert(1)>'
    with SummaryWriter(str(run), flush_secs=3600) as writer:
        for index, tag in enumerate(["../../escaped", "/etc/evil", "a/b", "a_b", ".hidden"]):
            pixels[0, 0, 0] = index
            writer.add_image(tag, pixels, 0, dataformats="HWC")
    return root


def test_export_images_never_leaves_the_directory(tmp_path: Path) -> None:
    logdir = hostile_logdir(tmp_path / "logs")
    store = str(tmp_path / "s.db")
    tbconvert.convert(logdir, store, progress=False)
    target = tmp_path / "out" / "images"
    result = invoke("export", "images", "--store", store, "-o", str(target))
    assert result.exit_code == 0, result.output
    written = sorted(os.listdir(target))
    assert len(written) == 5
    assert all(not name.startswith(".") and "/" not in name for name in written)
    # Nothing anywhere else: the only files under tmp_path are the logs, the store, the images.
    outside = [
        p for p in tmp_path.rglob("*") if p.is_file() and target not in p.parents
    ]  # fmt: skip
    assert all(p.parent.parent == logdir or p.name.startswith("s.db") for p in outside), outside
    assert not Path("/etc/evil").exists()
    pixels = sorted(Image.open(target / name).getpixel((0, 0))[0] for name in written)
    assert pixels == [0, 1, 2, 3, 4]  # five different files, none overwritten


def test_export_images_to_stdout_is_a_usage_error(store_path: str) -> None:
    assert invoke("export", "images", "--store", store_path).exit_code == 2
