"""Headless Chromium (Debian's package) driven by selenium: no browser download, no network.

Without Chromium or its driver the browser tests skip, except where ``GPUSCOPE_REQUIRE_BROWSER=1`` (CI sets it):
there they fail, so a browser test never stops running unnoticed."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REQUIRE_ENV = "GPUSCOPE_REQUIRE_BROWSER"
WAIT_S = 120
"""The most a browser test waits for a page to draw what it checks: generous, since a page that draws in a second
on a quiet machine can take tens of seconds on two cores busy with the rest of the suite; only a failure waits it
out."""


def chromium_or_skip(binary: str = CHROMIUM, driver: str = CHROMEDRIVER) -> None:
    """Skip the calling test when Chromium or chromedriver is missing; fail it where GPUSCOPE_REQUIRE_BROWSER=1."""
    missing = [name for name, path in (("chromium", binary), ("chromedriver", driver)) if not Path(path).exists()]
    if not missing:
        return
    why = (f"{' and '.join(missing)} not found: the browser tests need Debian's chromium and chromium-driver "
           "packages (GPUSCOPE_INSTALL_SYSTEM=1 scripts/test installs them)")
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why}; {REQUIRE_ENV}=1 makes a browser test that cannot run a failure", pytrace=False)
    pytest.skip(why)


def chromium(binary: str, driver: str) -> tuple[webdriver.Chrome, tempfile.TemporaryDirectory[str]]:
    """A fresh browser with its own profile folder; console messages are kept for the tests to read. Skips (or,
    where required, fails) the test when there is no browser to start."""
    chromium_or_skip(binary, driver)
    profile = tempfile.TemporaryDirectory(prefix="gpuscope-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={Path(profile.name)}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver)), profile


def module_browser() -> Iterator[webdriver.Chrome]:
    """The body of a module-scoped ``browser`` fixture: a fresh browser, quit and its profile removed after the
    module's tests."""
    driver, profile = chromium(CHROMIUM, CHROMEDRIVER)
    yield driver
    driver.quit()
    profile.cleanup()
