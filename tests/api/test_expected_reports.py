"""Every bundled trace's report equals the one pinned in expected_reports.json.gz (written by make_expected_reports.py
before ranks were reduced in the reading workers, and written again since only where an analysis was meant to change,
as when kernels of equal time were put in the order their trace names them), apart from the run id, whose tail is
random; so does every
recorded run's, saved into a store and loaded back: the live runs (their ids are the recordings') and the fleet
demo (its run id random)."""

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


def test_every_bundled_trace_and_recorded_run_has_a_pinned_report() -> None:
    assert make.saved_run_cases(), "the recorded live runs are found"
    assert sorted(make.cases() + make.saved_run_cases()) == sorted(expected())


@pytest.mark.parametrize("case", sorted(set(expected()) - set(make.saved_run_cases())))
def test_the_report_is_the_pinned_one(case: str, gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert without_id(make.report_json(case)) == without_id(expected()[case])


def without_run_id(report: dict[str, Any]) -> dict[str, Any]:
    """A fleet report (and the saved one beside it) without the run id, random in part."""
    saved = {"saved": without_run_id(report["saved"])} if "saved" in report else {}
    return {**{k: v for k, v in report.items() if k != "run_id"}, **saved}


@pytest.mark.parametrize("case", make.saved_run_cases())
def test_a_recorded_run_loads_back_with_the_pinned_report(case: str, gpuscope_home: Path) -> None:
    report = make.saved_run_json(case)
    if case == make.FLEET_DEMO:
        assert without_run_id(report) == without_run_id(expected()[case])
        assert report["saved"] == {k: v for k, v in report.items() if k != "saved"}, "analysed again, the same"
    else:
        assert report == expected()[case]
