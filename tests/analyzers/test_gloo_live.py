"""The done-when checks on a fresh recording of the real 4-rank gloo job (sample_traces/gloo_4rank/record.py), not
the one shipped: four torch processes take about 30 s a mode on a small machine, so this runs only with
GPUSCOPE_TEST_DISTRIBUTED=1 (the shipped recordings are checked in test_across_real.py and tests/cli/test_hang.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuscope
from tests.cli.helpers import gpuscope as gpuscope_cli
from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.skipif(os.environ.get("GPUSCOPE_TEST_DISTRIBUTED") != "1",
                                reason="records a 4-process torch.distributed job: GPUSCOPE_TEST_DISTRIBUTED=1")


def _record(mode: str, out: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SAMPLES / "gloo_4rank" / "record.py"), mode, str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_a_fresh_delayed_job_and_its_control(tmp_path: Path) -> None:
    """On a host with fewer cores than ranks, a rank the scheduler starves is a real straggler too (a few ms per
    step, as time outside profiled ops): the control is held to having none that stands out like the delayed rank."""
    delayed = gpuscope.analyze(_record("delayed", tmp_path / "delayed"))
    assert delayed.stragglers[0].rank == 2 and delayed.stragglers[0].wait_caused_us >= 40_000
    control = gpuscope.analyze(_record("balanced", tmp_path / "balanced"))
    assert all(s.wait_caused_us < 40_000 for s in control.stragglers)


def test_a_fresh_hang(tmp_path: Path) -> None:
    out = _record("hang", tmp_path / "hang")
    for form in ("json", "pickle"):
        result = gpuscope_cli("hang", str(out / form), "--json", home=tmp_path)
        report = json.loads(result.stdout)
        assert report["missing_ranks"] == [1] and report["hung_collective"]["op"] == "all_reduce"
        assert report["hung_collective"]["seq"] == 6


def test_a_fresh_job_late_once_a_step(tmp_path: Path) -> None:
    """Rank 1 sleeps 300 ms before the first of four all_reduces a step: named first, by the wait it causes."""
    report = gpuscope.analyze(_record("late_once", tmp_path / "late_once"))
    assert report.stragglers[0].rank == 1 and report.stragglers[0].wait_caused_us >= 150_000
