"""Small runs built in code: live samples, stack samples and reports with every field filled or empty."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuscope.model import schema as m
from gpuscope.model.cost import CostReport, WasteSplit
from gpuscope.model.diagnosis import Recommendation, Verdict
from gpuscope.model.live import GpuLive, LiveSummary
from gpuscope.model.rank import Communication, KernelStat, Memory, RankReport, StepBreakdown, StepRecord
from gpuscope.model.report import Report, RunSummary
from gpuscope.model.run import StackSamples
from gpuscope.model.schema import SampleRow, StackRow

T0_NS = 1_764_000_000_000_000_000
MAIN_PID, WORKER_PIDS = 4242, (4300, 4301)


def sample_rows(*, gpus: int = 2, seconds: int = 120, dcgm: bool = True, host: bool = True,
                t0_ns: int = T0_NS) -> list[SampleRow]:
    """1 Hz samples of ``gpus`` GPUs (util with a known spike to 1.0 at t=37 s) and the target's host tree."""
    rows: list[SampleRow] = []
    for t in range(seconds):
        ts = t0_ns + t * 1_000_000_000
        for g in range(gpus):
            util = 1.0 if t == 37 else 0.3 + 0.1 * (t % 5) / 5
            rows += [(ts, m.NVML, g, m.NO_PID, m.GPU_UTIL, util),
                     (ts, m.NVML, g, m.NO_PID, m.GPU_MEMORY_USED_BYTES, float(10 * 2**30 + t * 2**20)),
                     (ts, m.NVML, g, m.NO_PID, m.GPU_POWER_W, 150.0 + g)]
            if dcgm:
                rows.append((ts, m.DCGM, g, m.NO_PID, m.GPU_SM_ACTIVE, util * 0.8))
        if host:
            rows += [(ts, m.HOST, m.NO_GPU, MAIN_PID, m.PROC_CPU_CORES, 1.0),
                     (ts, m.HOST, m.NO_GPU, m.NO_PID, m.HOST_CPU, 0.5),
                     (ts, m.HOST, m.NO_GPU, m.NO_PID, m.HOST_IOWAIT, 0.1),
                     (ts, m.HOST, m.NO_GPU, MAIN_PID, m.PROC_READ_BYTES_PER_S, 2e6)]
            for pid in WORKER_PIDS:
                rows += [(ts, m.HOST, m.NO_GPU, pid, m.PROC_CPU_CORES, 0.9),
                         (ts, m.HOST, m.NO_GPU, pid, m.PROC_IS_WORKER, 1.0),
                         (ts, m.HOST, m.NO_GPU, pid, m.PROC_READ_BYTES_PER_S, 5e6)]
    return rows


def samples_frame(rows: list[SampleRow]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(m.SAMPLE_COLUMNS))
    return frame.astype({"ts_ns": "int64", "gpu": "int64", "pid": "int64", "value": "float64"})


STACKS: dict[int, tuple[str, ...]] = {
    1: ("<module> (train.py:1)", "train (train.py:40)", "__next__ (dataloader.py:630)", "wait (queue.py:180)"),
    2: ("<module> (train.py:1)", "train (train.py:40)", "forward (model.py:12)"),
    3: ("<module> (train.py:1)", "train (train.py:40)", "backward (tensor.py:500)"),
}


def stack_rows(*, t0_ns: int = T0_NS) -> list[StackRow]:
    """60% in the DataLoader wait, 30% forward, 10% backward."""
    ids = [1] * 6 + [2] * 3 + [3]
    return [(t0_ns + i * 10_000_000, MAIN_PID, MAIN_PID, "active", ids[i % 10]) for i in range(100)]


def stack_samples() -> StackSamples:
    frame = pd.DataFrame(stack_rows(), columns=["ts_ns", "pid", "tid", "state", "stack_id"])
    return StackSamples(samples=frame, stacks=dict(STACKS))


def rank(index: int = 0, *, steps: int = 3, kernel_us: float = 4000.0) -> RankReport:
    """A rank whose steps are 10 ms: ``kernel_us`` of kernels, 5 ms of DataLoader, the rest CPU."""
    breakdown = StepBreakdown(kernel=kernel_us, memcpy=200.0, dataloader=5000.0, cpu_exec=4800.0 - kernel_us)
    per_step = tuple(StepRecord(name=str(10 + i), start_us=i * 10_000.0, duration_us=10_000.0,
                                breakdown_us=breakdown, gpu_busy=0.42) for i in range(steps))
    kernels = (KernelStat(name="void sgemm<float, 128>(float*, int)", count=30, total_us=9000.0, mean_us=300.0,
                          share=0.75),
               KernelStat(name="ncclKernel_AllReduce_RING_LL_Sum_float", count=3, total_us=3000.0, mean_us=1000.0,
                          share=0.25, category="communication"))
    return RankReport(rank=index, window_us=10_000.0 * steps, steps=steps, step_time_us=10_000.0, gpu_busy=0.42,
                      step_breakdown_us=breakdown, temporal=None, idle_breakdown_us=None,
                      communication=Communication(total_us=0.0, exposed_us=0.0, overlap=None),
                      memory=Memory(peak_allocated_bytes=None, device_bytes=None), top_kernels=kernels,
                      per_step=per_step)


def full_report(run_id: str = "20261202-101010-abcdef", *, name: str = "resnet <b>bold</b>", ranks: int = 2,
                ) -> Report:
    """A report with a verdict, recommendations, cost and live summary all filled."""
    return Report(
        run=RunSummary(id=run_id, kind="trace", name=name, status="complete"),
        ranks=tuple(rank(i, kernel_us=4000.0 + 500 * i) for i in range(ranks)),
        verdict=Verdict(primary="data_loading", resource="io", confidence=0.8, summary="The GPU waits for data.",
                        evidence={"dataloader_share": 0.5}),
        recommendations=(Recommendation(code="more_workers", title="Use more DataLoader workers",
                                        detail="Set num_workers=8 <script>x</script>", est_step_saving=0.4,
                                        est_saving_usd=12.5),),
        cost=CostReport(gpu_hours=2.0, usd_per_gpu_hour=3.0, price_source="list price", total_usd=6.0,
                        wasted_usd=3.0, waste_by_cause_usd=WasteSplit(idle=1.0, data_loading=2.0),
                        per_step_usd=0.002),
        live=LiveSummary(duration_s=120.0, gpus=(GpuLive(gpu=0, samples=120, util_mean=0.35),)),
    )


def empty_report(run_id: str = "20261202-111111-000000") -> Report:
    """What a sampled run may hold before the analyzers fill anything: no ranks, no verdict, no cost."""
    return Report(run=RunSummary(id=run_id, kind="attach"), ranks=(), verdict=Verdict(primary=None,
                                                                                      resource="unknown"))


def series(values: np.ndarray, *, step_ns: int = 1_000_000_000) -> tuple[np.ndarray, np.ndarray]:
    return T0_NS + np.arange(len(values), dtype=np.int64) * step_ns, values.astype(np.float64)
