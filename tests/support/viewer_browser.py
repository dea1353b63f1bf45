"""The viewer in a real browser: Debian's headless chromium driven by Selenium through its
``chromium-driver`` (``.ci/run`` installs both), and ``tbconvert serve`` in a subprocess.

Tests wait for DOM conditions (``document.body.dataset.ready``, a panel's ``data-state``),
never for time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import FLAGS, chromium

WAIT = 60


def chromedriver() -> str:
    """The driver's path; skipped without one, unless ``TBCONVERT_REQUIRE_CHROMIUM`` is set."""
    found = shutil.which("chromedriver")
    if found:
        return found
    message = "chromedriver is not installed (apt-get install chromium-driver)"
    if os.environ.get("TBCONVERT_REQUIRE_CHROMIUM"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def browser(width: int = 1400, height: int = 1200) -> Iterator[Any]:
    """A headless chromium with a fresh profile, closed on exit."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary = chromium()
    driver_path = chromedriver()
    with tempfile.TemporaryDirectory() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
        try:
            yield driver
        finally:
            driver.quit()


def wait_until(driver: Any, condition: Callable[[Any], Any], seconds: float = WAIT) -> Any:
    """Wait until ``condition(driver)`` is true (the DOM is polled, nothing slept on)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=0.05).until(condition)


def wait_ready(driver: Any) -> None:
    """Wait until every chart of the page is drawn; fail on the page's error message."""
    wait_until(
        driver,
        lambda d: d.execute_script("return document.body.dataset.ready") in ("true", "error"),
    )
    ready = driver.execute_script("return document.body.dataset.ready")
    message = driver.execute_script("return document.getElementById('message').textContent")
    assert ready == "true", message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def served(store: str, *extra: str) -> Iterator[str]:
    """``tbconvert serve`` over ``store`` on a free port; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tbconvert", "serve", "--store", store, "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with urllib.request.urlopen(f"{base}/", timeout=10):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(process.stderr.read() if process.stderr else "") from None
                time.sleep(0.1)  # polling the port until the server listens, not a timing
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def screenshot(driver: Any, path: Path) -> Path:
    """Save what the browser shows (for a person to look at)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
