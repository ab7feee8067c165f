"""gpuscope against the number of ranks: each count's time per rank and peak memory against the fewest ranks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, load_benchmark

scaling = load_benchmark("bench_scaling")
measuring = load_benchmark("measuring")
MB = 1_000_000


def _measured(wall_s: float, peak_mb: float) -> Any:
    return measuring.Measured(wall_s=wall_s, cpu_s=wall_s * 1.5, load_avg=0.0, peak_bytes=int(peak_mb * MB),
                              tree_sampled_bytes=int(peak_mb * MB), largest_process_rss_bytes=int(peak_mb * MB),
                              processes=1, rc=0, result={"phases_s": {}})


def test_scaling_compares_each_count_with_the_fewest_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    def result(ranks: int, wall_s: float, peak_mb: float) -> Any:
        case = scaling.Case(name=f"{ranks}_ranks", path=Path("x"), fmt="gz", files=ranks, json_bytes=ranks * 60 * MB)
        return scaling.CaseResult(case=case, runs={"gpuscope": _measured(wall_s, peak_mb)})

    rows = scaling.print_scaling([result(8, 2.0, 300), result(64, 15.0, 330), result(256, 64.0, 360)])["scaling"]
    assert [r["ranks"] for r in rows] == [8, 64, 256]
    assert [r["s_per_rank"] for r in rows] == [0.25, 15.0 / 64, 0.25]
    assert [r["s_per_rank_x"] for r in rows] == [1.0, (15.0 / 64) / 0.25, 1.0]
    assert [r["peak_x"] for r in rows] == [1.0, 1.1, 1.2]
    assert "  256" in capsys.readouterr().out


def test_the_script_runs_with_its_sibling_modules() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scaling.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--ranks" in out and "--large-mb" in out
