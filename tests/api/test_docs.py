"""Every `>>>` example in docs/api.md runs and prints what the page says (from the repository root)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_every_example_in_the_api_page_holds(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, report=True,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20
    assert result.failed == 0
