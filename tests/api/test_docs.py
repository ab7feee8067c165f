"""Every `>>>` example in docs/api.md and in the API's docstrings runs and prints what it says (from the
repository root)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import gpuscope.api
from tests.conftest import ROOT


def test_every_example_in_the_api_page_holds(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False, report=True,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20
    assert result.failed == 0
    package = doctest.testmod(gpuscope.api, report=True)
    assert package.attempted >= 1 and package.failed == 0
