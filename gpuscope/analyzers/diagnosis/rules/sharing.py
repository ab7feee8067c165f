"""A GPU shared with other processes: a job slowed by a neighbour is told so, with its own share against the GPU's.

Under time-slicing (the default when several processes use one GPU, and what Kubernetes' time-slicing and MPS-less
sharing give) the GPU runs one context's kernels at a time: while neighbours keep it busy, the job's kernels wait
their turn. ``analyzers.sharing`` measures the job's own SM share and the neighbours'; when the neighbours held the
GPU at least ``CONTENTION_MIN`` of the time the job was on it, that is the finding. The cost model prices the
neighbours' part (``cost.neighbours_usd``).
"""

from __future__ import annotations

from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding
from gpuscope.model.diagnosis import Recommendation

CONTENTION_MIN = 0.5
"""Neighbours whose kernels ran half the time or more the job held the GPU: its own kernels queue behind them."""


def apply(ctx: Context) -> RuleOutput:
    if ctx.live is None:
        return RuleOutput()
    out = RuleOutput()
    for s in ctx.live.shares:
        if not s.shared or s.others_sm_mean is None or s.others_sm_mean < CONTENTION_MIN:
            continue
        rec = Recommendation(
            codes.ISOLATE_GPU, "Give the job a GPU of its own, or a MIG slice",
            f"GPU {s.gpu} is time-sliced with {s.other_processes_max or 'other'} other process"
            f"{'es' if s.other_processes_max != 1 else ''}: their kernels ran {s.others_sm_mean:.0%} of the time "
            f"this job held it, so its own kernels waited their turn. A GPU of its own, or a MIG instance (its own "
            f"SMs and memory bandwidth), removes the wait; so does moving the neighbour, or MPS, which runs both "
            f"jobs' kernels side by side instead of in turns.", None,
            "the wait depends on how often the job's kernels are ready while the neighbours run: not estimated")
        out += RuleOutput((finding(
            codes.SHARED_GPU_CONTENTION, "warning",
            f"Other processes kept GPU {s.gpu} busy {s.others_sm_mean:.0%} of the time this job held it "
            f"(this job: {s.own_sm_mean or 0.0:.0%} of SM time)",
            {"own_sm_util": s.own_sm_mean, "others_sm_util": s.others_sm_mean, "gpu_busy": s.gpu_busy_mean,
             "other_processes": s.other_processes_max, "held_s": s.held_s},
            share=s.others_sm_mean, recs=[rec]),), (rec,))
    return out
