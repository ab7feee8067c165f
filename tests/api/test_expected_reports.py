"""Every bundled trace's report equals the one pinned in expected_reports.json.gz (written by make_expected_reports.py
before ranks were reduced in the reading workers), apart from the run id, whose tail is random."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.api import make_expected_reports as make
from tests.conftest import ROOT

EXPECTED = Path(__file__).with_name("expected_reports.json.gz")


@cache
def expected() -> dict[str, Any]:
    reports: dict[str, Any] = json.loads(gzip.decompress(EXPECTED.read_bytes()))
    return reports


def without_id(report: dict[str, Any]) -> dict[str, Any]:
    return {**report, "run": {k: v for k, v in report["run"].items() if k != "id"}}


def test_every_bundled_trace_has_a_pinned_report() -> None:
    assert sorted(make.cases()) == sorted(expected())


@pytest.mark.parametrize("case", sorted(expected()))
def test_the_report_is_the_pinned_one(case: str, gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert without_id(make.report_json(case)) == without_id(expected()[case])
