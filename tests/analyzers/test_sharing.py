"""One GPU, several processes, and MIG slices, from samples built in code: the target's own part, counted by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.analyzers.report import build_report
from gpuscope.analyzers.sharing import gpu_shares, tenant_parts
from gpuscope.api.analysis import options_for
from gpuscope.model import schema as S
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import Run, RunMeta

T0 = 1_800_000_000_000_000_000
TICK = 500_000_000
NAN = math.nan


def frame(rows: list[tuple[int, str, int, int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([r for r in rows if not math.isnan(r[5])], columns=list(S.SAMPLE_COLUMNS))


def shared_gpu_rows() -> list[tuple[int, str, int, int, str, float]]:
    """Four ticks of GPU 0 shared with one other process; the third tick's utilization answer was NOT_FOUND."""
    own = [0.2, 0.0, NAN, 0.4]
    others = [0.6, 0.8, NAN, 0.4]
    rows = []
    for i in range(4):
        ts = T0 + i * TICK
        rows += [(ts, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.8), (ts, S.NVML, 0, S.NO_PID, S.GPU_MEMORY_TOTAL_BYTES, 80e9),
                 (ts, S.NVML, 0, 42, S.PROC_GPU_MEMORY_BYTES, 10e9 + i * 1e9),
                 (ts, S.NVML, 0, 42, S.PROC_GPU_SM_UTIL, own[i]), (ts, S.NVML, 0, 42, S.PROC_GPU_MEM_UTIL, own[i]),
                 (ts, S.NVML, 0, S.NO_PID, S.GPU_OTHERS_SM_UTIL, others[i]),
                 (ts, S.NVML, 0, S.NO_PID, S.GPU_OTHER_PROCESSES, 1.0)]
    return rows


def test_the_targets_part_of_a_shared_gpu_by_hand() -> None:
    (share,) = gpu_shares(frame(shared_gpu_rows()), {0}, duration_s=2.0)
    # Per tick: 0.2 / 0.8, 0 / 0.8, half (nothing measured), 0.4 / 0.8.
    assert share.cost_part == pytest.approx((0.25 + 0.0 + 0.5 + 0.5) / 4)
    assert share.cost_basis == "mixed" and share.shared and share.other_processes_max == 1
    assert share.own_sm_mean == pytest.approx(0.2) and share.others_sm_mean == pytest.approx(0.6)
    assert share.gpu_busy_mean == pytest.approx(0.8) and share.own_idle_share == pytest.approx(1 / 3)
    assert share.own_memory_peak_bytes == 13e9 and share.memory_total_bytes == 80e9
    assert share.held_s == pytest.approx(2.0)


def test_alone_on_a_gpu_the_target_pays_the_whole_of_it() -> None:
    rows = [r for r in shared_gpu_rows() if r[4] not in (S.GPU_OTHERS_SM_UTIL,)]
    rows = [(ts, s, g, p, m, 0.0 if m == S.GPU_OTHER_PROCESSES else v) for ts, s, g, p, m, v in rows]
    (share,) = gpu_shares(frame(rows), {0}, duration_s=2.0)
    assert not share.shared and share.cost_part == 1.0 and share.cost_basis is None


def test_held_time_is_the_ticks_the_target_had_a_context() -> None:
    rows = [r for r in shared_gpu_rows() if not (r[3] == 42 and r[0] >= T0 + 2 * TICK)]
    (share,) = gpu_shares(frame(rows), {0}, duration_s=2.0)
    assert share.held_s == pytest.approx(1.0)  # 2 of the GPU's 4 ticks


@given(st.lists(st.floats(0, 1), min_size=1, max_size=6), st.booleans())
def test_the_parts_of_a_gpus_tenants_add_up_to_one(uses: list[float], known: bool) -> None:
    use = np.array(uses if known else [NAN] * len(uses))
    total = np.full(len(uses), use.sum())
    parts, measured = tenant_parts(use, total, np.full(len(uses), len(uses)))
    assert parts.sum() == pytest.approx(1.0)
    assert ((0 <= parts) & (parts <= 1)).all()
    assert measured.all() == (known and sum(uses) > 0)


def mig_run(tmp_path: object) -> Run:
    """An hour on the 1g.10gb instance of an H100, its busy share from DCGM's GR engine active (0.3, then 0.5)."""
    gpu = S.mig_gpu(0, 9)
    rows = [(T0 + i * TICK, S.DCGM, gpu, S.NO_PID, S.GPU_GR_ENGINE_ACTIVE, v) for i, v in enumerate((0.3, 0.5))]
    meta = RunMeta(id="mig", name="mig", kind="attach", status="complete", started_ns=T0, ended_ns=T0 + 3600 * 10**9,
                   gpus=(GpuInfo(index=gpu, name="NVIDIA H100 80GB HBM3", mig_profile="1g.10gb"),))
    return Run(meta=meta, samples=frame(rows))


def test_a_mig_slice_is_charged_its_compute_slices_and_busy_by_its_gr_engine(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUSCOPE_USD_PER_GPU_HOUR", raising=False)
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    run = mig_run(tmp_path)
    report = build_report(run, options_for(run.meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None))
    cost = report.cost
    assert cost is not None and cost.gpu_hours == pytest.approx(1.0)
    assert cost.gpu_share == pytest.approx(1 / 7) and cost.whole_usd_per_gpu_hour == 6.88
    assert cost.usd_per_gpu_hour == pytest.approx(6.88 / 7) and cost.total_usd == pytest.approx(6.88 / 7)
    assert cost.gpu_share_basis == "MIG 1g.10gb: 1 of the H100 SXM 80GB's 7 compute slices"
    (gpu,) = report.live.gpus if report.live is not None else ()
    assert gpu.busy_source == "gr_engine_active" and gpu.busy_mean == pytest.approx(0.4)
    assert report.stage_shares["gpu_compute"] == pytest.approx(0.4)
    assert "mig_slice" not in {r.code for r in report.recommendations}, "already a slice"
    assert report.run.gpus[0].mig_profile == "1g.10gb"
    # --usd-per-gpu-hour prices the whole GPU; the slice pays its share of it.
    again = build_report(run, options_for(run.meta, usd_per_gpu_hour=7.0, job_hours=None, job_steps=None))
    assert again.cost is not None and again.cost.total_usd == pytest.approx(1.0)


def test_a_slice_whose_share_cannot_be_told_has_no_cost(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    run = mig_run(tmp_path)
    odd = Run(meta=RunMeta(**{**run.meta.__dict__, "gpus": (GpuInfo(index=1009, name="NVIDIA L4",
                                                                    mig_profile="1g.5gb"),)}), samples=run.samples)
    report = build_report(odd, options_for(odd.meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None))
    assert report.cost is not None and report.cost.total_usd is None and report.cost.usd_per_gpu_hour is None
    assert report.cost.note is not None and "MIG instance (1g.5gb)" in report.cost.note
