"""The README's "Looking at runs" commands, run as written against the demo store.

The store is built as ``make demo`` builds it: ``sample_logdirs/make_demo.py`` writes the
demo sweep, and it and ``sample_logdirs/`` are converted into ``demo.db``.  Each ``tbconvert``
line of the section's shell block then runs in bash, with the installed ``tbconvert`` first on
the PATH; ``serve`` (which runs until stopped) is checked in ``tests/output/test_serve.py``.  What
the commands write is checked against what the generator logged.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import tbconvert

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEMO_RUNS = ["demo/lr_0.001", "demo/lr_0.01", "demo/lr_0.1"]


def commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Looking at runs\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("tbconvert ")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("readme")
    subprocess.run(
        [sys.executable, str(ROOT / "sample_logdirs" / "make_demo.py"), str(base / "demo_logs")],
        check=True,
        capture_output=True,
    )
    for logdir in (base / "demo_logs", ROOT / "sample_logdirs"):
        assert tbconvert.convert(logdir, base / "demo.db", progress=False).exit_code == 0
    return base


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    return subprocess.run(
        ["bash", "-c", f"set -e\n{command}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1"},
    )


def test_every_command_is_documented_and_checked() -> None:
    names = [line.split()[1] for line in commands()]
    assert names == [
        "runs", "show", "hparams", "hparams", "export", "export", "export", "plot", "report",
        "serve",
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(len(commands()) - 1))  # all but serve
def test_readme_command_runs(workdir: Path, index: int) -> None:
    command = commands()[index]
    result = run(command, workdir)
    assert result.returncode == 0, (command, result.stderr)
    CHECKS[index](result.stdout, workdir)


def check_runs(stdout: str, workdir: Path) -> None:
    lines = stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "run", "source"]  # two logdirs: sources shown
    assert all(any(f" {run} " in line for line in lines) for run in DEMO_RUNS)


def check_show(stdout: str, workdir: Path) -> None:
    assert "run      demo/lr_0.1" in stdout and "trend" in stdout
    loss = next(line for line in stdout.splitlines() if re.match(r"\s+''\s+loss\s", line))
    assert "NaN" in loss and loss.rstrip()[-1] in "▁▂▃▄▅▆▇█"


def check_hparams_table(stdout: str, workdir: Path) -> None:
    rows = [line.split() for line in stdout.splitlines()]
    # The demo logs accuracy in the run directory and in its validation context.
    assert stdout.splitlines()[0].rstrip().endswith("accuracy  accuracy (validation)")
    # The higher the learning rate, the faster the demo's accuracy grows.
    assert [row[1] for row in rows[1:]] == list(reversed(DEMO_RUNS))


def check_hparams_csv(stdout: str, workdir: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert [row["run_path"] for row in rows] == DEMO_RUNS
    assert all(
        0.1 < float(row[name]) < 2.2 for row in rows for name in ("loss", "loss (validation)")
    )


def check_wide(stdout: str, workdir: Path) -> None:
    table = list(csv.reader((workdir / "loss.csv").open()))
    assert table[0][0] == "step" and "demo/lr_0.1//loss" in table[0]
    assert "demo/lr_0.1/validation/loss" in table[0]
    assert [int(row[0]) for row in table[1:]] == list(range(100))


def check_parquet(stdout: str, workdir: Path) -> None:
    import pyarrow.parquet as pq

    rows = pq.read_table(workdir / "sweep.parquet").to_pylist()
    assert [row["run_path"] for row in rows] == DEMO_RUNS
    assert [row["lr"] for row in rows] == [0.001, 0.01, 0.1]


def check_images(stdout: str, workdir: Path) -> None:
    files = sorted((workdir / "images").iterdir())
    assert len(files) == 9  # 3 runs x steps 0, 50, 99
    assert {Image.open(path).size for path in files} == {(32, 32)}


def check_plot(stdout: str, workdir: Path) -> None:
    assert Image.open(workdir / "curves.png").format == "PNG"


def check_report(stdout: str, workdir: Path) -> None:
    page = (workdir / "report.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 3  # accuracy, learning_rate, loss
    assert page.count("data:image/png;base64,") == 3
    assert "diverged at step 70" in page


CHECKS = [
    check_runs,
    check_show,
    check_hparams_table,
    check_hparams_csv,
    check_wide,
    check_parquet,
    check_images,
    check_plot,
    check_report,
]


def test_a_check_per_command() -> None:
    assert len(CHECKS) == len(commands()) - 1
    assert json.dumps(commands()[-1]).count("serve") == 1


def outputs() -> list[str]:
    """What the README's commands write: their ``-o`` values."""
    return [line.split(" -o ", 1)[1].split()[0] for line in commands() if " -o " in line]


def test_what_the_commands_write_in_the_checkout_is_ignored_and_cleaned() -> None:
    assert len(outputs()) == 5
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    cleaned = subprocess.run(
        ["make", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for output in outputs():
        ignored = subprocess.run(["git", "check-ignore", "-q", output], cwd=ROOT)
        assert ignored.returncode == 0, f"{output} is not git-ignored"
        assert output.rstrip("/") in cleaned, f"make clean leaves {output}"


def test_the_quick_start_query_tells_every_series_apart(workdir: Path) -> None:
    """Each row of the Quick start's query names its series (train and validation rows of one
    tag differ in a column other than step and value)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    [query] = re.findall(r'^sqlite3 runs\.db "(.+)"$', section, flags=re.MULTILINE)
    with sqlite3.connect(workdir / "demo.db") as connection:
        cursor = connection.execute(query)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    assert names[-2:] == ["step", "value"] and "context" in names
    series = [row[:-2] for row in rows]
    assert len(series) == len(set(series)) > 0
    assert any(row[names.index("context")] == "validation" for row in rows)
