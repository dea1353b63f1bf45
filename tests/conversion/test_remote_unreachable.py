"""An object store that cannot be reached fails in one line: the clients' own logging and
warnings (gcsfs logs each retry with its traceback, some 50 lines) stay out of it unless -v.

The endpoints are the emulators' options with a port no one listens on.  The clients retry
before they give up; gcsfs's waits between its attempts (half a minute in all, with no option
to shorten them) are left out (``tests/support/gcs_no_backoff.py``), not its attempts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.children import child_env
from tests.support.emulators import Emulator, _free_port
from tests.support.s3server import S3Server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def convert_in_a_process(url: str, options: dict[str, Any], store: Path) -> Any:
    pairs = [f"--storage-option={key}={value}" for key, value in options.items()]
    command = "tests.support.gcs_no_backoff" if url.startswith("gs://") else "tbconvert"
    return subprocess.run(
        [sys.executable, "-m", command, "tf", "--logdir", url, "--store", str(store), *pairs],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize("protocol", ["gs", "s3"])
def test_an_unreachable_endpoint_is_one_line(
    protocol: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: Emulator | S3Server = request.getfixturevalue({"gs": "gcs", "s3": "s3"}[protocol])
    closed = f"http://127.0.0.1:{_free_port()}"
    options = {**server.storage_options, "endpoint_url": closed}
    url = f"{protocol}://bucket/logs"
    result = convert_in_a_process(url, options, tmp_path / "runs.db")
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {url}: cannot list the logdir"), line
    assert not (tmp_path / "runs.db").exists()
