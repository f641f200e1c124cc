"""Debian's chromium, headless and offline, driven by Selenium: how this project's tests
and benchmark load the review pages, and a start for users' own automation of them
(the controls carry ``data-testid`` attributes). Selenium comes with the ``test`` extra.

``--no-sandbox`` is there because CI runs as root, where Chromium's sandbox does not
start; the browser loads only the review's own pages on loopback. Drop it (``FLAGS``)
to point this launcher at anything else.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ortf_ros.extras import optional_module

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
"""Where Debian's ``chromium`` and ``chromium-driver`` put them (scripts/setup-env.sh installs both)."""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--window-size=1400,1000",
)
"""Headless, and nothing that would reach the network on its own (no outside network is needed)."""


def installed() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


@contextlib.contextmanager
def headless_chromium(capabilities: dict[str, Any] | None = None) -> Iterator[Any]:
    """A Selenium Chrome driver on a fresh profile, removed with the browser at the end."""
    webdriver = optional_module("selenium.webdriver", "driving chromium needs Selenium", "test")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="ortf-review-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
