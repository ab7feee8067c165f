"""How much of the step each bottleneck stage accounts for: the numbers the verdict weighs.

From a trace, a rank's mean step is split with the TensorBoard plugin's categories, regrouped into
stages:

- data_loading  = DataLoader
- communication = Communication + host time blocked in collective waits (torchrec awaitables, all-to-all)
- memory        = Memcpy + Memset
- idle          = GPU gaps over 500 ms (Nsight Systems' rule) while the host was neither loading data nor in a
                  collective, and the GPU-side wait (work launched but queued, or no host activity to blame:
                  ``analyzers.trace.queue``), as a share of the window
- host_overhead = Runtime + CPU Exec + Other, less the two above (the host busy, the GPU waiting)
- gpu_compute   = Kernel

so the stages of a rank add up to its step. A job's share is the mean over its ranks, weighted by their
windows (the share of the job's GPU time). Without a trace, live samples give the shares (NVML busy, the
main thread's stack shares, DCGM DRAM vs SM activity). With both, the trace's shares stand: its profiled
steps measure each stage directly, while live samples span the whole run, start-up included (imports,
model build, autotuning), and would count that as steady-state time. Live samples then say what a trace
cannot (I/O or CPU behind the loader, DRAM-bound kernels) through the rules, not through the shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.model.diagnosis import STAGES, Stage
from gpuscope.model.live import LiveSummary, StackLive
from gpuscope.model.rank import RankReport

STALLS: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication", "memory", "idle")
"""The stages that keep a GPU from working; the verdict names the largest of them."""
DRAM_BOUND_MIN = 0.6
"""DCGM DRAM active at or above this, with SM active at or below SM_LOW, reads as bandwidth-bound."""
SM_LOW = 0.4
IDLE_UTIL_MAX = 0.05


@dataclass(frozen=True)
class StageShares:
    """Share of the (mean) step each stage accounts for, 0..1; None where nothing could tell."""

    shares: Mapping[Stage, float | None]
    per_rank: tuple[Mapping[Stage, float], ...] = ()
    sources: tuple[str, ...] = ()
    """Which evidence fed the shares: "trace", "nvml", "dcgm", "stacks"."""
    details: Mapping[str, float] = field(default_factory=dict)
    """Named parts behind the shares, e.g. host_collective_wait_share."""

    def get(self, stage: Stage) -> float:
        """The share, with unknown read as 0 (for ranking only; shown values keep None)."""
        return self.shares.get(stage) or 0.0


def rank_shares(r: RankReport, ev: TraceEvidence) -> dict[Stage, float]:
    """One rank's stage shares of its mean step."""
    step = r.span_us
    if step <= 0:
        return {}
    b = r.step_breakdown_us
    host_rest = b.runtime + b.cpu_exec + b.other
    wait = min(ev.collective_wait_us, host_rest)
    # Idle gaps and the GPU-side wait lie in the host categories (no GPU event, no DataLoader, no collective covers
    # them); the host caused neither.
    idle = min(_idle_us(ev) / r.window_us, (host_rest - wait) / step) if r.window_us > 0 else 0.0
    host = max(0.0, (host_rest - wait) / step - idle)
    return {
        "data_loading": b.dataloader / step,
        "communication": (b.communication + wait) / step,
        "memory": (b.memcpy + b.memset) / step,
        "idle": idle,
        "host_overhead": host,
        "gpu_compute": b.kernel / step,
    }


def _idle_us(ev: TraceEvidence) -> float:
    return ev.idle_gap_us + ev.gpu_wait_us


def gpu_side_share(r: RankReport, ev: TraceEvidence, shares: Mapping[Stage, float]) -> float:
    """The GPU-side wait's part of a rank's ``idle`` share (the rest is plain idle: long gaps, nothing queued)."""
    idle_us = _idle_us(ev)
    return shares.get("idle", 0.0) * ev.gpu_wait_us / idle_us if idle_us > 0 else 0.0


def trace_shares(ranks: Sequence[RankReport], evidence: Sequence[TraceEvidence]) -> StageShares | None:
    """The job's stage shares from its ranks' traces: the mean over ranks weighted by their windows (each
    rank is one GPU for its window, so this is the share of the job's GPU time); None without GPU work."""
    # A rank without GPU work (a CPU-only trace) says nothing about what holds a GPU back.
    triples = [(s, r, e) for s, r, e in ((rank_shares(r, e), r, e) for r, e in zip(ranks, evidence)
                                         if r.gpu_busy is not None) if s]
    if not triples:
        return None
    per_rank = tuple(s for s, _, _ in triples)
    total_us = sum(r.window_us for _, r, _ in triples)
    weights = [r.window_us / total_us if total_us > 0 else 1 / len(triples) for _, r, _ in triples]
    mean: dict[Stage, float | None] = {st: sum(w * p[st] for p, w in zip(per_rank, weights)) for st in STAGES}
    waits = [e.collective_wait_us / r.span_us for r, e in zip(ranks, evidence) if r.span_us > 0]
    side = sum(w * gpu_side_share(r, e, s) for (s, r, e), w in zip(triples, weights))
    return StageShares(shares=mean, per_rank=per_rank, sources=("trace",),
                       details={"host_collective_wait_share": sum(waits) / len(waits) if waits else 0.0,
                                "gpu_side_wait_share": side})


def live_shares(live: LiveSummary) -> StageShares | None:
    """Stage shares from live samples alone.

    The GPUs' busy share (``GpuLive.busy_mean``: NVML utilization, the target's own SM share on a GPU it
    shared, GR engine active on a MIG instance) is the work; the main thread's stack samples say what the host was
    doing: a collective wait is communication, and the time the GPU is not busy is split between data
    loading, host work (launches, Python, syncs) and idle in proportion to the main thread's samples.
    Without stacks only NVML's idle samples can be attributed. DCGM's DRAM active high with SM active
    low turns the busy share into memory (bandwidth-bound).
    """
    shares: dict[Stage, float | None] = dict.fromkeys(STAGES)
    sources: list[str] = []
    util = _mean(g.busy_mean for g in live.gpus)
    dram, sm = _mean(g.dram_active_mean for g in live.gpus), _mean(g.sm_active_mean for g in live.gpus)
    busy = util if util is not None else sm
    if util is not None:
        sources.append("dcgm" if all(g.busy_source == "gr_engine_active" for g in live.gpus) else "nvml")
    s = live.stacks if live.stacks is not None and _main_sampled(live.stacks) else None
    comm = (s.main_nccl_wait or 0.0) if s is not None else None
    if busy is not None:
        shares["gpu_compute"] = max(busy - (comm or 0.0), 0.0)
        if s is None:
            idle = _mean(g.idle_share for g in live.gpus)
            shares["idle"] = min(idle, 1.0 - busy) if idle is not None else (1.0 - busy if busy < IDLE_UTIL_MAX
                                                                               else 0.0)
    if dram is not None and sm is not None and busy is not None:
        sources.append("dcgm")
        bound = dram >= DRAM_BOUND_MIN and sm <= SM_LOW
        shares["memory"] = shares["gpu_compute"] if bound else 0.0
        shares["gpu_compute"] = 0.0 if bound else shares["gpu_compute"]
    if s is not None:
        sources.append("stacks")
        shares["communication"] = comm
        weights: dict[Stage, float] = {
            "data_loading": s.main_dataloader_wait or 0.0,
            "host_overhead": sum(x or 0.0 for x in (s.main_launch, s.main_python, s.main_sync)),
            "idle": s.main_idle or 0.0,
        }
        # A collective wait usually shows as GPU busy (the NCCL kernel spins), so the time the GPU is
        # free of both is what the host-side activities split.
        free = 1.0 - max(busy if busy is not None else 0.0, comm or 0.0)
        total = sum(weights.values())
        for st, w in weights.items():
            shares[st] = free * w / total if total > 0 else (free if st == "idle" else 0.0)
    if not sources:
        return None
    return StageShares(shares=shares, sources=tuple(sources))


def combine(trace: StageShares | None, live: StageShares | None) -> StageShares | None:
    """Trace and live shares together: the trace's share of each stage it measured, live shares only for a stage
    the trace could not tell (see the module docstring for why the trace wins)."""
    if trace is None or live is None:
        return trace or live
    merged: dict[Stage, float | None] = {
        st: trace.shares.get(st) if trace.shares.get(st) is not None else live.shares.get(st) for st in STAGES}
    total = sum(x for x in merged.values() if x is not None)
    if total > 1.0:
        merged = {st: (x / total if x is not None else None) for st, x in merged.items()}
    return StageShares(shares=merged, per_rank=trace.per_rank, sources=trace.sources + live.sources,
                       details=dict(trace.details))


def _main_sampled(s: StackLive) -> bool:
    return any(x is not None for x in (s.main_dataloader_wait, s.main_sync, s.main_nccl_wait, s.main_launch,
                                       s.main_python, s.main_idle))


def _mean(values: Iterable[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
