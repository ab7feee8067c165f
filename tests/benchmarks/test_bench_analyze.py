"""gpuscope against Holistic Trace Analysis: the ratios of the two tools on one case, and a failed HTA run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, load_benchmark

bench = load_benchmark("bench_analyze")
MB = 1_000_000


def _measured(wall_s: float, cpu_s: float, peak_mb: float, phases: dict[str, float]) -> Any:
    return bench.Measured(wall_s=wall_s, cpu_s=cpu_s, load_avg=0.0, peak_bytes=int(peak_mb * MB),
                          tree_sampled_bytes=int(peak_mb * MB), largest_process_rss_bytes=int(peak_mb * MB),
                          processes=1, rc=0, result={"phases_s": phases})


def test_ratios_compare_the_tools_on_the_same_case() -> None:
    case = bench.Case(name="x", path=Path("x"), fmt="json", files=1, json_bytes=100 * MB)
    result = bench.CaseResult(case=case, runs={
        "decode": _measured(1.0, 1.0, 150, {"decode": 0.5}),
        "gpuscope": _measured(2.0, 1.5, 180, {}),
        "gpuscope_phases": _measured(2.0, 1.5, 180, {"import": 0.5, "load": 1.0, "report": 0.25}),
        "hta": _measured(30.0, 15.0, 600, {"import": 1.0, "load": 20.0, "temporal": 1.0}),
    })
    row = bench.Row.of(result)
    assert row.speedup == 15.0 and row.cpu_speedup == 10.0 and row.work_speedup == 21.0 / 1.25
    assert row.x_json(row.gpuscope_peak_mb) == 1.8 and row.x_json(row.hta_peak_mb) == 6.0
    assert row.mb_s(row.decode_s) == 200.0 and row.of_ceiling == 0.25
    summary = bench.summarize([row])
    assert summary["cases_compared"] == 1 and summary["speedup_total"] == 15.0


def test_a_failed_hta_run_leaves_its_figures_unknown() -> None:
    case = bench.Case(name="x", path=Path("x"), fmt="gz", files=2, json_bytes=10 * MB)
    hta = _measured(3.0, 3.0, 100, {"import": 1.0})
    hta.result["error"] = "load: ValueError: Trace files validation failed."
    row = bench.Row.of(bench.CaseResult(case=case, runs={"gpuscope": _measured(1.0, 1.0, 50, {}), "hta": hta}))
    assert row.hta_s is None and row.speedup is None and row.hta_peak_mb is None
    assert bench.summarize([row])["cases_compared"] == 0


def test_the_script_runs_with_its_sibling_modules() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_analyze.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--no-hta" in out and "--large-only" in out and "--json-out" in out
