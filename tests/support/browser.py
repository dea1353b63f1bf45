"""A real browser for the report's layout: Debian's headless chromium (``.ci/run`` installs it).

The page under test has no script, by design; :func:`measure` loads a copy of it with one
script appended that measures the laid-out page and writes the figures into the DOM, which
chromium's ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome")
# Headless, and nothing fetched behind the page's back (updates, sync, first-run pages).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium() -> str:
    """The browser's path; the test is skipped without one, unless
    ``TBCONVERT_REQUIRE_CHROMIUM`` is set (CI), where its absence fails."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    message = "chromium is not installed (apt-get install chromium)"
    if os.environ.get("TBCONVERT_REQUIRE_CHROMIUM"):
        pytest.fail(message)
    pytest.skip(message)


def measure(page: Path, script: str, width: int, height: int = 1000) -> Any:
    """Load ``page`` in a window of ``width`` x ``height`` pixels, with ``script`` (an
    expression) appended; returns the JSON value of the expression once the page is laid out."""
    html = page.read_text(encoding="utf-8")
    probe = (
        '<pre id="measured"></pre><script>document.getElementById("measured").textContent = '
        f"JSON.stringify({script});</script>"
    )
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "page.html"
        copy.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
        done = subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={Path(scratch) / 'profile'}",
                f"--window-size={width},{height}",
                "--dump-dom",
                copy.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"chromium printed no measure (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
