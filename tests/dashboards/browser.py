"""Headless Chromium (Debian's package) driven by selenium: no browser download, no network."""

from __future__ import annotations

import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")


def chromium(binary: str, driver: str) -> tuple[webdriver.Chrome, tempfile.TemporaryDirectory[str]]:
    """A fresh browser with its own profile folder; console messages are kept for the tests to read."""
    profile = tempfile.TemporaryDirectory(prefix="gpuscope-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={Path(profile.name)}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver)), profile
