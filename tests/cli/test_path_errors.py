"""A path of the wrong kind (a logdir that is a file, an output that is a directory) is a
failure: one line naming the path, exit 1 (SPEC §2), not click's usage error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tbconvert.cli import cli
from tests.support.eventfiles import write_tbx_run


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.db")
    write_tbx_run(tmp_path / "logs", "run_a")
    result = CliRunner().invoke(cli, ["tf", "--logdir", str(tmp_path / "logs"), "--store", path])
    assert result.exit_code == 0, result.stderr
    return path


def one_line_failure(arguments: list[str], path: Path) -> str:
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and str(path.name) in line and "Usage" not in line
    return line


def test_a_logdir_that_is_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "events.out.tfevents.1.host"
    a_file.write_bytes(b"")
    line = one_line_failure(
        ["tf", "--logdir", str(a_file), "--store", str(tmp_path / "s.db")], a_file
    )
    assert "not a directory" in line
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["plot", "--tag", "*", "-o"],
        ["report", "-o"],
        ["export", "scalars", "-o"],
        ["export", "params", "-o"],
        ["datasette-metadata", "-o"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_an_output_file_that_is_a_directory(store: str, tmp_path: Path, command: list[str]) -> None:
    directory = tmp_path / "out.csv"
    directory.mkdir()
    line = one_line_failure([*command, str(directory), "--store", store], directory)
    assert "is a directory" in line
    assert list(directory.iterdir()) == [] and not list(tmp_path.glob(".tbconvert-*"))


def test_an_image_directory_that_is_a_file(store: str, tmp_path: Path) -> None:
    a_file = tmp_path / "images"
    a_file.write_text("mine")
    line = one_line_failure(["export", "images", "-o", str(a_file), "--store", store], a_file)
    assert "is a file" in line and a_file.read_text() == "mine"
