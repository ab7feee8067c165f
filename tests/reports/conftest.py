"""What the HTML and PDF report tests share: the saved runs they report on, and one headless Chromium a module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gpuscope.reports.browser import Browser, BrowserError, find_browser
from tests.dashboards.browser import REQUIRE_ENV
from tests.reports.test_html_runs import Runs, build_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("report")
    return build_runs(folder / "home", folder)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Skips where no Chromium is installed, except under GPUSCOPE_REQUIRE_BROWSER=1 (CI), where that fails."""
    try:
        binary = find_browser()
    except BrowserError as exc:
        why = f"{exc} (GPUSCOPE_INSTALL_SYSTEM=1 scripts/test installs one)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why}; {REQUIRE_ENV}=1 makes a browser test that cannot run a failure", pytrace=False)
        pytest.skip(why)
    with Browser(binary) as chromium:
        yield chromium
