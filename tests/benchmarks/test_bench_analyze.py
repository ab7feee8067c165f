"""The benchmark's measuring: memory of a whole process tree, exit status, the decode ceiling's byte count, ratios."""

from __future__ import annotations

import gzip
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT, SAMPLES, load_benchmark

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and wait4() rusage")


def _bench() -> ModuleType:
    return load_benchmark("bench_analyze")


bench = _bench()
MB = 1_000_000


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_peak_memory_adds_up_a_parent_and_its_forked_worker() -> None:
    # Parent and worker each fill 150 MB of their own after the fork and hold it together for a while:
    # the tree held about 300 MB although no single process passed about 170 MB. (The largest process's
    # ru_maxrss is not checked here: Linux starts a child's at its parent's peak, and the parent is pytest.)
    m = bench.measure(_python("""
        import os, time
        pid = os.fork()
        block = b"x" * 150_000_000
        time.sleep(1.5)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """))
    assert m.rc == 0 and m.processes == 2
    assert m.tree_sampled_bytes > 280 * MB
    assert m.peak_bytes == max(m.tree_sampled_bytes, m.largest_process_rss_bytes)


def test_a_failing_child_is_reported_with_its_last_error_line() -> None:
    m = bench.measure(_python("import sys; print('first', file=sys.stderr); sys.exit('no such trace')"))
    assert m.rc == 1 and m.error == "no such trace" and m.result is None


def test_decode_child_counts_uncompressed_json(tmp_path: Path) -> None:
    rank0 = next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz"))
    (tmp_path / "rank0.json").write_bytes(gzip.decompress(rank0.read_bytes()))
    out = bench.child_decode(tmp_path)
    assert out["json_bytes"] == (tmp_path / "rank0.json").stat().st_size
    m = bench.measure([sys.executable, str(ROOT / "benchmarks" / "bench_analyze.py"), "_child", "decode", str(rank0)])
    assert m.rc == 0 and m.result["json_bytes"] == out["json_bytes"]


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


def test_scaling_compares_each_count_with_the_fewest_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    def result(ranks: int, wall_s: float, peak_mb: float) -> Any:
        case = bench.Case(name=f"{ranks}_ranks", path=Path("x"), fmt="gz", files=ranks, json_bytes=ranks * 60 * MB)
        return bench.CaseResult(case=case, runs={"gpuscope": _measured(wall_s, wall_s * 1.5, peak_mb, {})})

    rows = bench.print_scaling([result(8, 2.0, 300), result(64, 15.0, 330), result(256, 64.0, 360)])["scaling"]
    assert [r["ranks"] for r in rows] == [8, 64, 256]
    assert [r["s_per_rank"] for r in rows] == [0.25, 15.0 / 64, 0.25]
    assert [r["s_per_rank_x"] for r in rows] == [1.0, (15.0 / 64) / 0.25, 1.0]
    assert [r["peak_x"] for r in rows] == [1.0, 1.1, 1.2]
    assert "  256" in capsys.readouterr().out
