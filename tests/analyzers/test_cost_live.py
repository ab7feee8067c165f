"""A live run's cost through the whole report: samples -> live summary -> diagnosis -> cost."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model import schema
from gpuscope.model.cost import JobSpec
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import Run, RunMeta
from gpuscope.pricing import resolve_price

S = 1_000_000_000
TICKS = 61  # one sample a second for a minute


def gpu_rows(gpu: int, util: float, watts: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for t in range(TICKS):
        for metric, value in ((schema.GPU_UTIL, util), (schema.GPU_POWER_W, watts),
                              (schema.GPU_ENERGY_J, 1e6 + watts * t),
                              (schema.GPU_MEMORY_USED_BYTES, 6 * 10**9), (schema.GPU_MEMORY_TOTAL_BYTES, 24 * 10**9)):
            rows.append({"ts_ns": t * S, "source": schema.NVML, "gpu": gpu, "pid": schema.NO_PID,
                         "metric": metric, "value": float(value)})
    return rows


def test_a_live_run_gets_cost_waste_and_energy(tmp_path: Path) -> None:
    frame = pd.DataFrame(gpu_rows(0, 0.9, 200.0) + gpu_rows(1, 0.3, 100.0))
    meta = RunMeta(id="live", name="live", kind="attach", status="complete", started_ns=0, ended_ns=60 * S,
                   gpus=(GpuInfo(index=0, name="NVIDIA A10G"), GpuInfo(index=1, name="NVIDIA A10G")))
    price = resolve_price("NVIDIA A10G", home=tmp_path, env={})
    options = AnalysisOptions(price=price, job=JobSpec(job_hours=10.0, grid_kg_co2_per_kwh=0.5, grid_source="t"))
    report = build_report(Run(meta=meta, samples=frame), options)
    cost = report.cost
    assert cost is not None and cost.gpu_count == 2
    assert cost.gpu_hours == pytest.approx(2 * 60 / 3600)
    assert cost.total_usd == pytest.approx(cost.gpu_hours * 1.006)
    assert cost.waste_basis == "stage_shares"
    # Mean utilization 0.6: 40% of the GPU time ran no kernel, and the waste is split as the verdict's stages.
    assert cost.wasted_usd == pytest.approx(0.4 * cost.total_usd)
    stalls = sum(v or 0.0 for k, v in report.stage_shares.items() if k != "gpu_compute")
    assert cost.waste_by_cause_usd.unattributed == pytest.approx((0.4 - stalls) * cost.total_usd)
    assert cost.projected_usd == pytest.approx(10.0 * 2 * 1.006)
    # 200 W and 100 W for 60 s, from the energy counter.
    assert cost.energy_kwh == pytest.approx((200 + 100) * 60 / 3.6e6)
    assert cost.co2_kg == pytest.approx(cost.energy_kwh * 0.5)


def test_a_mostly_idle_live_run_is_offered_a_cheaper_gpu(tmp_path: Path) -> None:
    frame = pd.DataFrame(gpu_rows(0, 0.2, 60.0))
    meta = RunMeta(id="idle", name="idle", kind="run", status="complete", started_ns=0, ended_ns=60 * S,
                   gpus=(GpuInfo(index=0, name="NVIDIA A10G"),))
    price = resolve_price("NVIDIA A10G", home=tmp_path, env={})
    report = build_report(Run(meta=meta, samples=frame), AnalysisOptions(price=price,
                                                                         capabilities=gpu_capabilities(tmp_path)))
    (right,) = [r for r in report.recommendations if r.code == "right_size"]
    # Without a trace the job is held to what its A10G supports (bf16, fp16, FlashAttention 2): the T4 (0.526)
    # has no bf16, the L4 (0.80) has them all.
    assert right.title == "Try a cheaper GPU: L4 at $0.80/GPU-h"
    assert right.est_saving_usd == pytest.approx((1.006 - 0.80) * 60 / 3600)
