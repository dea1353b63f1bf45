"""The commit-msg hook that `make` installs: subjects of at most 72 characters, a blank line
before the body."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / ".githooks" / "commit-msg"


def check(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run(["sh", str(HOOK), str(path)], capture_output=True, text=True)


@pytest.mark.parametrize(
    "message",
    [
        "Fix the torn-tail offset\n",
        "x" * 72 + "\n\nA body of any length " + "y" * 200 + "\n\nRefs #35\n",
        "# a comment git strips\nShort subject\n\nBody.\n",
        "é" * 72 + "\n",  # characters, not bytes
    ],
)
def test_the_hook_takes_a_short_subject(tmp_path: Path, message: str) -> None:
    assert check(tmp_path, message).returncode == 0


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("x" * 73 + "\n", "the subject is 73 characters"),
        ("Subject\nbody right under it\n", "leave a blank line"),
    ],
)
def test_the_hook_refuses_a_long_subject_or_a_body_run_into_it(
    tmp_path: Path, message: str, said: str
) -> None:
    result = check(tmp_path, message)
    assert result.returncode == 1
    assert said in result.stderr


def test_make_installs_the_hook() -> None:
    makefile = (HOOK.parents[1] / "Makefile").read_text(encoding="utf-8")
    assert "git config core.hooksPath .githooks" in makefile
