"""The false-alarm measurement runs on the real recordings and stays under its target at the default settings."""

from __future__ import annotations

from types import ModuleType

from gpuscope.gate.config import GateConfig
from tests.conftest import load_benchmark


def _benchmark() -> ModuleType:
    return load_benchmark("gate_false_alarms")


def test_random_halves_of_one_job_rarely_fail_and_a_slowdown_is_caught() -> None:
    bench = _benchmark()
    report = bench.analysed("cpu_mlp_aa/run_a")
    steady = sum(not s.warmup for s in report.ranks[0].per_step)
    config = GateConfig()
    same = bench.run_case(report, "run_a", "halves", bench.halves, steady // 2, 200, 7, config)
    slower = bench.run_case(report, "run_a", "power", bench.halves, 20, 100, 7, config, factor=1.5)
    assert same.draws == 200 and same.rate <= 0.02
    assert slower.rate >= 0.9
