"""Labelled diagnosis cases: the real samples, small RankTraces built in code, and live summaries.

``CASES`` is the labelled set that benchmarks/evaluate_verdicts.py prints a confusion table of; the
tests below keep every case called right. Built traces use ``TraceBuilder``, which writes the
columnar events directly (µs in, ns stored), one runtime launch per GPU event, joined by correlation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpuscope.analyzers.diagnosis.verdict import Diagnosis, diagnose
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.diagnosis import Resource, Stage
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
from gpuscope.model.run import Run, RunMeta
from gpuscope.model.trace import Events, Kind, MemoryEvents, RankTrace

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
GIB = 2**30
V100 = GpuInfo(index=0, name="Tesla V100-SXM2-16GB", memory_bytes=16 * GIB, sm_count=80, compute_capability="7.0")


@dataclass
class TraceBuilder:
    """Events of one rank, added in µs; ``build()`` gives the RankTrace the reader would."""

    rank: int = 0
    gpu: GpuInfo = V100
    rows: list[tuple[int, int, int, int, int, int, int, int]] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)
    memory: list[tuple[int, int]] = field(default_factory=list)
    _corr: int = 0

    def _add(self, kind: Kind, name: str, ts_us: float, dur_us: float, *, tid: int = 1, stream: int = -1,
             corr: int = -1) -> None:
        nid = self.names.setdefault(name, len(self.names))
        self.rows.append((round(ts_us * 1000), round(dur_us * 1000), int(kind), nid, tid, stream, corr,
                          self.gpu.index if stream >= 0 else -1))

    def host(self, name: str, ts_us: float, dur_us: float, *, kind: Kind = Kind.CPU_OP, tid: int = 1) -> None:
        self._add(kind, name, ts_us, dur_us, tid=tid)

    def step(self, n: int, ts_us: float, dur_us: float) -> None:
        self._add(Kind.STEP, f"ProfilerStep#{n}", ts_us, dur_us)

    def gpu_event(self, name: str, launch_us: float, start_us: float, dur_us: float, *, kind: Kind = Kind.KERNEL,
                  runtime: str = "cudaLaunchKernel", launch_dur_us: float = 4.0) -> None:
        """A kernel (or memcpy) and the runtime call that launched it."""
        self._corr += 1
        self._add(Kind.RUNTIME, runtime, launch_us, launch_dur_us, corr=self._corr)
        self._add(kind, name, start_us, dur_us, tid=7, stream=7, corr=self._corr)

    def runtime(self, name: str, ts_us: float, dur_us: float) -> None:
        self._add(Kind.RUNTIME, name, ts_us, dur_us)

    def allocated(self, ts_us: float, total_bytes: int) -> None:
        self.memory.append((round(ts_us * 1000), total_bytes))

    def build(self) -> RankTrace:
        rows = sorted(self.rows)
        col: list[tuple[int, ...]] = list(zip(*rows)) if rows else [()] * 8
        n = len(rows)
        events = Events(
            ts_ns=np.array(col[0], np.int64), dur_ns=np.array(col[1], np.int64), kind=np.array(col[2], np.uint8),
            name_id=np.array(col[3], np.int32), tid=np.array(col[4], np.int64), stream=np.array(col[5], np.int32),
            correlation=np.array(col[6], np.int64), device=np.array(col[7], np.int32),
            external_id=np.full(n, -1, np.int64), bytes=np.zeros(n, np.int64),
            blocks_per_sm=np.full(n, np.nan, np.float32), warps_per_sm=np.full(n, np.nan, np.float32))
        mem = sorted(self.memory)
        memory = MemoryEvents(
            ts_ns=np.array([m[0] for m in mem], np.int64), bytes=np.zeros(len(mem), np.int64),
            total_allocated_bytes=np.array([m[1] for m in mem], np.int64), device_type=np.ones(len(mem), np.int32),
            device_id=np.full(len(mem), self.gpu.index, np.int32))
        names = tuple(sorted(self.names, key=lambda k: self.names[k]))
        return RankTrace(rank=self.rank, source=f"built:rank{self.rank}", events=events, memory=memory, names=names,
                         gpus=(self.gpu,), world_size=None, backend=None)


def trace_run(*traces: RankTrace, name: str = "built") -> Run:
    gpus = tuple({g.index: g for t in traces for g in t.gpus}.values())
    return Run(meta=RunMeta(id=name, name=name, kind="trace", status="complete", started_ns=0, gpus=gpus),
               traces=traces)


def diagnose_run(run: Run, live: LiveSummary | None = None) -> Diagnosis:
    return diagnose(run, [analyze_rank(t) for t in run.traces], live)


# -- built traces ----------------------------------------------------------------------------------

def host_overhead_trace(steps: int = 4, launches: int = 400) -> RankTrace:
    """Hundreds of 2 µs kernels, each launched by a 20 µs op: the GPU runs one and waits for the next."""
    b = TraceBuilder()
    t = 0.0
    for i in range(steps):
        start = t
        for _ in range(launches):
            b.host("aten::add", t, 20.0)
            b.gpu_event("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", t + 12, t + 17, 2.0)
            t += 22.0
        b.step(i, start, t - start)
    return b.build()


def memory_trace(steps: int = 4) -> RankTrace:
    """Each step copies its batch from pageable memory (4 ms) before 5 ms of kernels; peak memory 95%."""
    b = TraceBuilder()
    for i in range(steps):
        t = i * 10_000.0
        b.step(i, t, 10_000.0)
        b.host("aten::to", t + 100, 4_200)
        b.gpu_event("Memcpy HtoD (Pageable -> Device)", t + 150, t + 200, 4_000, kind=Kind.MEMCPY,
                    runtime="cudaMemcpyAsync", launch_dur_us=4_050)
        for k in range(5):
            b.host("aten::relu", t + 4_300 + k * 10, 8)
            b.gpu_event("void at::native::vectorized_elementwise_kernel<4, relu>", t + 4_302 + k * 10,
                        t + 4_400 + k * 1_000, 990)
        b.allocated(t + 5_000, int(0.95 * 16 * GIB))
        b.host("autograd::engine::evaluate_function: ReluBackward0", t + 9_000, 50)  # a training step
    return b.build()


def gpu_compute_trace(steps: int = 4) -> RankTrace:
    """The host launches a step's kernels early; they run back to back for 95% of the step."""
    b = TraceBuilder()
    for i in range(steps):
        t = i * 10_000.0
        b.step(i, t, 10_000.0)
        for k in range(19):
            b.host("aten::mm", t + k * 20, 15)
            b.gpu_event("volta_h884gemm_128x128_ldg8_nn", t + k * 20 + 2, t + 200 + k * 500, 499)
        b.allocated(t + 500, 6 * GIB)
    return b.build()


def idle_trace() -> RankTrace:
    """One short burst of work, then the GPU sits allocated and unused for 3 s."""
    b = TraceBuilder()
    b.step(0, 0.0, 3_100_000.0)
    for k in range(10):
        b.host("aten::mm", k * 20.0, 15)
        b.gpu_event("volta_h884gemm_128x128_ldg8_nn", k * 20 + 2, 100 + k * 1_000, 990)
    return b.build()


def straggler_traces() -> tuple[RankTrace, RankTrace]:
    """Rank 1 computes on the host for 6 ms before the all-reduce; rank 0 sits in the NCCL kernel meanwhile."""
    out = []
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, gpu=GpuInfo(index=rank, name=V100.name, memory_bytes=V100.memory_bytes,
                                                compute_capability="7.0"))
        for i in range(3):
            t = i * 10_000.0
            b.step(i, t, 10_000.0)
            b.host("aten::mm", t + 10, 15)
            b.gpu_event("volta_h884gemm_128x128_ldg8_nn", t + 12, t + 30, 1_500)
            late = 6_000.0 if rank == 1 else 0.0
            if rank == 1:
                b.host("embedding_lookup", t + 1_600, late)
            b.host("nccl:all_reduce", t + 1_600 + late, 20)
            b.gpu_event("ncclKernel_AllReduce_RING_LL_Sum_float", t + 1_605 + late, t + 1_650 + late,
                        8_000 - late)
        out.append(b.build())
    return out[0], out[1]


# -- live summaries --------------------------------------------------------------------------------

def live_run(name: str) -> Run:
    return Run(meta=RunMeta(id=name, name=name, kind="run", status="complete", started_ns=0, ended_ns=60 * 10**9,
                            gpus=(V100,)))


def live(util: float, *, stacks: StackLive | None = None, host: HostLive | None = None, idle: float | None = None,
         dram: float | None = None, sm: float | None = None, used_bytes: int | None = None) -> LiveSummary:
    gpu = GpuLive(gpu=0, samples=60, util_mean=util, idle_share=idle, dram_active_mean=dram, sm_active_mean=sm,
                  memory_used_peak_bytes=used_bytes, memory_total_bytes=16 * GIB if used_bytes else None)
    return LiveSummary(duration_s=60.0, gpus=(gpu,), host=host, stacks=stacks, sources=("nvml", "host", "stacks"))


LOADER_IO = live(0.3, idle=0.5, stacks=StackLive(samples=600, main_dataloader_wait=0.7, main_launch=0.2,
                                                 main_python=0.1, workers_io=0.8, workers_on_cpu=0.15),
                 host=HostLive(main_cpu_mean=0.3, workers=4, workers_cpu_mean=0.6, iowait_mean=0.35))
LOADER_CPU = live(0.4, idle=0.3, stacks=StackLive(samples=600, main_dataloader_wait=0.6, main_launch=0.3,
                                                  main_python=0.1, workers_on_cpu=0.9, workers_io=0.05),
                  host=HostLive(main_cpu_mean=0.4, workers=4, workers_cpu_mean=3.9, iowait_mean=0.01, cpu_count=8))
LIVE_IDLE = live(0.01, idle=0.97)
LIVE_MEMORY = live(0.95, dram=0.85, sm=0.2)
LIVE_COMPUTE = live(0.97, dram=0.3, sm=0.85, stacks=StackLive(samples=600, main_sync=0.8, main_launch=0.2))
LIVE_HOST = live(0.35, stacks=StackLive(samples=600, main_launch=0.5, main_python=0.3, main_sync=0.1,
                                        main_idle=0.1))
LIVE_NCCL = live(0.7, stacks=StackLive(samples=600, main_nccl_wait=0.5, main_launch=0.4, main_python=0.1))


# -- the labelled set -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    stage: Stage
    resource: Resource | None
    """None where the resource is not part of the label."""
    diagnosis: Callable[[], Diagnosis]


@cache
def _sample(name: str, ranks: tuple[int, ...] | None = None) -> Diagnosis:
    """A sample's diagnosis; ``ranks`` keeps only those ranks (a smaller job cut from a real one)."""
    from gpuscope.traces import load
    traces = sorted(load(SAMPLES / name).traces, key=lambda t: t.rank)
    return diagnose_run(trace_run(*(t for t in traces if ranks is None or t.rank in ranks), name=name))


CASES: tuple[Case, ...] = (
    Case("resnet50_dataloader_bound", "data_loading", "unknown", lambda: _sample("resnet50_dataloader_bound")),
    Case("resnet50_old_schema", "data_loading", "unknown", lambda: _sample("resnet50_old_schema")),
    Case("resnet50_workers4", "host_overhead", "cpu", lambda: _sample("resnet50_workers4")),
    Case("dlrm_8rank", "communication", "nccl", lambda: _sample("dlrm_8rank")),
    Case("dlrm_8rank:ranks0-3", "communication", "nccl", lambda: _sample("dlrm_8rank", (0, 1, 2, 3))),
    Case("built:host_overhead", "host_overhead", "cpu", lambda: diagnose_run(trace_run(host_overhead_trace()))),
    Case("built:memory", "memory", "memory", lambda: diagnose_run(trace_run(memory_trace()))),
    Case("built:gpu_compute", "gpu_compute", "gpu", lambda: diagnose_run(trace_run(gpu_compute_trace()))),
    Case("built:idle", "idle", None, lambda: diagnose_run(trace_run(idle_trace()))),
    Case("built:straggler", "communication", "nccl", lambda: diagnose_run(trace_run(*straggler_traces()))),
    Case("live:loader_io", "data_loading", "io", lambda: diagnose(live_run("io"), [], LOADER_IO)),
    Case("live:loader_cpu", "data_loading", "cpu", lambda: diagnose(live_run("cpu"), [], LOADER_CPU)),
    Case("live:idle", "idle", None, lambda: diagnose(live_run("idle"), [], LIVE_IDLE)),
    Case("live:dram_bound", "memory", "memory", lambda: diagnose(live_run("dram"), [], LIVE_MEMORY)),
    Case("live:gpu_compute", "gpu_compute", "gpu", lambda: diagnose(live_run("busy"), [], LIVE_COMPUTE)),
    Case("live:host_overhead", "host_overhead", "cpu", lambda: diagnose(live_run("host"), [], LIVE_HOST)),
    Case("live:nccl", "communication", "nccl", lambda: diagnose(live_run("nccl"), [], LIVE_NCCL)),
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_labelled_case_is_called_right(case: Case) -> None:
    v = case.diagnosis().verdict
    assert v.primary == case.stage, v.summary
    if case.resource is not None:
        assert v.resource == case.resource
    assert 0.0 < v.confidence <= 1.0
    assert v.summary and v.summary.endswith(".")


def test_a_live_run_that_recorded_a_trace_takes_the_stage_shares_from_the_trace() -> None:
    """Recorded on an H200: `gpuscope run` of a ResNet-50 job with num_workers=0 whose own loop measured 85% of its
    wall time waiting for batches. Its live samples span the whole run (imports, model build, cuDNN autotuning),
    so the main thread's stack samples mostly sit in launches; the profiled steps show the loader. The verdict
    follows the trace's shares, and live evidence stays in the report."""
    import json

    import msgspec

    from gpuscope.model.live import LiveSummary
    from gpuscope.traces import load
    from tests.conftest import SAMPLES
    saved = json.loads((SAMPLES / "h200" / "live" / "run_loader0.report.json").read_text())
    live = msgspec.convert(saved["live"], LiveSummary)
    assert live.stacks is not None and (live.stacks.main_launch or 0) > 0.5  # what misled the old merge
    traces = sorted(load(SAMPLES / "h200" / "resnet50_workers0").traces, key=lambda t: t.rank)
    d = diagnose_run(trace_run(*traces), live)
    assert d.verdict.primary == "data_loading"
    m = json.loads((SAMPLES / "h200" / "measured" / "resnet50_workers0.json").read_text())["measured_by_the_loop"]
    waited = sum(m["data_wait_s_per_step"][7:13]) / sum(m["wall_s_per_step"][7:13])  # the loop's own clock: 85%
    assert d.shares is not None and d.shares.shares["data_loading"] == pytest.approx(waited, abs=0.03)
    assert "stacks" in str(d.verdict.evidence["sources"])


def test_a_cpu_bound_loader_on_saturated_cores_is_not_told_to_add_workers() -> None:
    """Four workers decoding on an 8-core host that is 97% busy: a fifth worker has no core to run on; the advice is
    to take decoding off the CPU. The same loader waiting on reads instead still gets more workers."""
    import dataclasses

    assert LOADER_CPU.host is not None and LOADER_IO.host is not None
    busy_cpu = dataclasses.replace(LOADER_CPU, host=dataclasses.replace(LOADER_CPU.host, host_cpu_mean=0.97))
    d = diagnose_run(live_run("saturated"), busy_cpu)
    assert (d.verdict.primary, d.verdict.resource) == ("data_loading", "cpu")
    codes = {r.code for r in d.recommendations}
    assert not codes & {"dataloader_num_workers", "dataloader_prefetch"} and "gpu_decode" in codes
    busy_io = dataclasses.replace(LOADER_IO, host=dataclasses.replace(LOADER_IO.host, host_cpu_mean=0.97))
    assert "dataloader_num_workers" in {r.code for r in diagnose_run(live_run("reads"), busy_io).recommendations}
