"""A browser test that cannot run skips on a developer's machine and fails in CI (GPUSCOPE_REQUIRE_BROWSER=1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.dashboards.browser import REQUIRE_ENV, chromium_or_skip


def test_a_missing_driver_skips_the_test_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    browser = tmp_path / "chromium"
    browser.touch()
    with pytest.raises(pytest.skip.Exception, match="^chromedriver not found"):
        chromium_or_skip(str(browser), str(tmp_path / "chromedriver"))


def test_where_required_a_missing_browser_fails_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="chromium and chromedriver not found.*GPUSCOPE_REQUIRE_BROWSER=1"):
        chromium_or_skip(str(tmp_path / "chromium"), str(tmp_path / "chromedriver"))


def test_ci_requires_the_browser_and_scripts_test_installs_its_driver() -> None:
    assert f"export {REQUIRE_ENV}=1" in (ROOT / ".ci" / "run").read_text()
    script = (ROOT / "scripts" / "test").read_text()
    assert "! command -v chromedriver" in script and "apt-get install -y -qq chromium chromium-driver" in script
