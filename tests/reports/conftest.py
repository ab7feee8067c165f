"""What the HTML and PDF report tests share: the saved runs they report on, and one headless Chromium a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuscope.reports.browser import Browser, find_browser
from tests.reports.test_html_runs import Runs, build_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("report")
    return build_runs(folder / "home", folder)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser(find_browser()) as chromium:
        yield chromium
