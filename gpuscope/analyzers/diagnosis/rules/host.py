"""Host overhead: the GPU waits while the host runs Python, launches kernels or synchronises.

Covers the TensorBoard plugin's rule "GPU utilization < 50% -> bigger batch" (when the batch fits:
``advice.batch``) and Nsight Systems'
"synchronization APIs" rule, and adds CUDA graphs / torch.compile, fused optimizers, removing
``.item()``-style syncs found in the trace, and fusing many tiny kernels.
"""

from __future__ import annotations

from gpuscope.analyzers.advice import batch
from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding, severity
from gpuscope.analyzers.diagnosis.rules import serving
from gpuscope.analyzers.trace import classify
from gpuscope.model.diagnosis import Finding, Recommendation

HOST_MIN = 0.10
SHORT_KERNELS_MIN = 0.5
GPU_UTIL_LOW = 0.5
"""The TensorBoard plugin's threshold for "bigger batch"."""
OPTIMIZER_MIN = 0.05
GRAPHED_MAX = 0.5
"""CUDA graphs are not suggested once half the kernels or more are already launched by graph replays."""


def apply(ctx: Context) -> RuleOutput:
    host = ctx.shares.shares.get("host_overhead")
    if host is None:
        return RuleOutput()
    recs = _recommendations(ctx, host)
    findings: list[Finding] = []
    if host >= HOST_MIN:
        findings.append(finding(
            codes.HOST_WAIT_IDLE, severity(host, warning=0.15, critical=0.30),
            f"The main thread is busy {host:.1%} of the time (Python and torch calls; no GPU seen)" if ctx.no_gpu
            else f"The GPU waits on the host for {host:.1%} of the step (Python, launches, syncs; not data loading)",
            _host_evidence(ctx, host), share=host, recs=recs, stage="host_overhead"))
    short = ctx.mean(lambda r: r.launch.short_kernel_share if r.launch else None)
    if short is not None and short >= SHORT_KERNELS_MIN and host >= HOST_MIN / 2:
        findings.append(finding(
            codes.SHORT_KERNELS, "warning" if host >= HOST_MIN else "info",
            f"{short:.0%} of kernels run under 10 µs: launching them costs more than running them",
            {"short_kernel_share": short, "kernel_median_us": ctx.mean(lambda r: r.launch.kernel_median_us
                                                                        if r.launch else None),
             "kernels_per_step": _rounded(ctx.mean(lambda r: r.launch.kernels / max(r.steps, 1)
                                                   if r.launch else None))},
            share=host, recs=[r for r in recs if r.code in (codes.CUDA_GRAPHS, codes.FUSE_KERNELS)],
            stage="host_overhead"))
    sync = _sync_finding(ctx, [r for r in recs if r.code == codes.REMOVE_SYNCS])
    if sync is not None:
        findings.append(sync)
    util = ctx.mean(lambda r: r.kernel_utilization)
    if util is not None and util < GPU_UTIL_LOW:
        findings.append(finding(
            codes.GPU_UTIL_LOW, "warning", f"Kernels run only {util:.1%} of the step time (under 50%)",
            {"kernel_util": util, "gpu_busy": ctx.facts.gpu_busy},
            recs=[r for r in recs if r.code in (codes.LARGER_BATCH, codes.DYNAMIC_BATCHING)], stage="host_overhead"))
    return RuleOutput(tuple(findings), tuple(recs))


def _host_evidence(ctx: Context, host: float) -> dict[str, float | int | str | None]:
    ev: dict[str, float | int | str | None] = {
        "host_overhead_share": host,
        "idle_host_wait_share": ctx.mean(lambda r: r.idle_breakdown_us.host_wait / r.window_us
                                         if r.idle_breakdown_us and r.window_us else None),
        "launch_delay_median_us": ctx.mean(lambda r: r.launch.launch_delay_median_us if r.launch else None),
        "optimizer_per_step_us": ctx.mean_ev(lambda e: e.optimizer_step_us) if ctx.evidence else None,
    }
    if ctx.live is not None and ctx.live.stacks is not None:
        s = ctx.live.stacks
        ev.update({"main_launch_share": s.main_launch, "main_sync_share": s.main_sync,
                   "main_python_share": s.main_python})
    return ev


def _recommendations(ctx: Context, host: float) -> list[Recommendation]:
    recs: list[Recommendation] = []
    util = ctx.mean(lambda r: r.kernel_utilization)
    short = ctx.mean(lambda r: r.launch.short_kernel_share if r.launch else None)
    if (util is not None and util < GPU_UTIL_LOW) or host >= HOST_MIN:
        bigger = batch.larger_batch(ctx, host)
        recs.extend([bigger] if bigger is not None else [])
    graphed = ctx.mean_ev(lambda e: e.graph_kernel_share)
    if host >= HOST_MIN and (short is None or short >= SHORT_KERNELS_MIN) and (graphed or 0.0) < GRAPHED_MAX:
        s = savings.share_of(host, 0.5, "Host time the GPU waits for", "one graph replay replaces the per-kernel "
                             "launches, but Python outside the captured region stays")
        on_rocm = " (a HIP graph on ROCm)" if ctx.vendor == "amd" else ""
        recs.append(Recommendation(
            codes.CUDA_GRAPHS, f"Capture the step in {ctx.words.graphs} (torch.compile)",
            serving.graphs(ctx.words) if ctx.inference else
            "Wrap the model in torch.compile(model, mode='reduce-overhead'), or capture the forward/backward with "
            f"torch.cuda.CUDAGraph{on_rocm}, so the step is launched as one graph instead of thousands of kernel "
            "launches (needs static shapes).", s.fraction, s.reasoning, stage="host_overhead"))
    if short is not None and short >= 0.6 and host >= HOST_MIN:
        s = savings.share_of(host, 0.25, "Host time the GPU waits for", "fusing elementwise chains removes a "
                             "part of the launches")
        recs.append(Recommendation(
            codes.FUSE_KERNELS, "Fuse the many tiny kernels",
            f"{short:.0%} of kernels run under 10 µs. torch.compile fuses chains of elementwise ops into one "
            "kernel; fused layers (e.g. apex/FusedLayerNorm, fused Adam) do the same by hand.",
            s.fraction, s.reasoning, stage="host_overhead"))
    recs.extend(_optimizer(ctx, host))
    recs.extend(_syncs(ctx, host))
    return recs


def _optimizer(ctx: Context, host: float) -> list[Recommendation]:
    """fused=True for the torch.optim optimizers that have it and do not use it yet; foreach=True for those with
    only a multi-tensor version, when the trace shows per-parameter ops. Nothing for other optimizers (say,
    Shampoo) or ones already fused: the finding keeps the host time, the advice would be wrong."""
    share = ctx.per_step_share(lambda r, e: e.optimizer_step_us)
    if share < OPTIMIZER_MIN or host < HOST_MIN or any(e.optimizer_fused for e in ctx.evidence):
        return []
    name = next((e.optimizer for e in ctx.evidence if e.optimizer), None)
    foreach = any(e.optimizer_foreach for e in ctx.evidence)
    if name in classify.FUSED_OPTIMIZERS:
        s = savings.share_of(min(share, host), 0.7, "Optimizer.step on the host",
                             "a fused optimizer launches a handful of kernels instead of several per parameter"
                             + (" (or per parameter group, with foreach)" if foreach else ""))
        detail = (f"Optimizer.step ({name}) takes {share:.1%} of the step on the host"
                  f"{' in multi-tensor (foreach) ops' if foreach else ', launching kernels parameter by parameter'}."
                  f" Construct it with fused=True, e.g. torch.optim.{name}(params, lr, fused=True), and call "
                  "zero_grad(set_to_none=True).")
        return [Recommendation(codes.FUSED_OPTIMIZER, "Use the fused optimizer", detail, s.fraction, s.reasoning,
                               stage="host_overhead")]
    if name in classify.FOREACH_OPTIMIZERS and not foreach:
        s = savings.share_of(min(share, host), 0.5, "Optimizer.step on the host",
                             "a multi-tensor optimizer launches one kernel per group of parameters instead of one "
                             "per parameter")
        detail = (f"Optimizer.step ({name}) takes {share:.1%} of the step on the host, launching kernels parameter "
                  f"by parameter. torch.optim.{name} has no fused version; construct it with foreach=True.")
        return [Recommendation(codes.FOREACH_OPTIMIZER, "Use the multi-tensor (foreach) optimizer", detail,
                               s.fraction, s.reasoning, stage="host_overhead")]
    return []


def _syncs(ctx: Context, host: float) -> list[Recommendation]:
    drain = ctx.per_step_share(lambda r, e: e.sync_drain_us)
    items = sum(e.item_calls for e in ctx.evidence)
    live_sync = ctx.live.stacks.main_sync if ctx.live and ctx.live.stacks else None
    if host < HOST_MIN / 2 or (drain < 0.005 and items < 10 and (live_sync or 0) < 0.05):
        return []
    fraction = min(max(drain, (live_sync or 0) * 0.5), host)
    reasoning = (f"After each sync the GPU queue is empty until the host launches again; those gaps are "
                 f"{drain:.1%} of the step in the trace" +
                 (f", and {live_sync:.1%} of the main thread's samples sit in a sync" if live_sync else "") +
                 f": removing the syncs gives back about {fraction:.1%}.")
    return [Recommendation(
        codes.REMOVE_SYNCS, "Remove host-device syncs from the step",
        f"The step synchronises with the GPU ({_sync_names(ctx)}). "
        + (serving.SYNCS if ctx.inference else
           "Keep losses and metrics on the GPU and read them every N steps, avoid .item()/.cpu()/print of GPU "
           f"tensors and torch.cuda.synchronize() ({ctx.words.device_sync}) inside the loop, and use non_blocking "
           "copies."),
        fraction, reasoning, stage="host_overhead")]


def _rounded(x: float | None) -> int | None:
    return None if x is None else round(x)


def _sync_names(ctx: Context) -> str:
    counts: dict[str, int] = {}
    for e in ctx.evidence:
        for name, n in e.sync_calls:
            counts[name] = counts.get(name, 0) + n
    items = sum(e.item_calls for e in ctx.evidence)
    if items:
        counts[".item()"] = items
    per_rank = f" over {len(ctx.evidence)} ranks" if len(ctx.evidence) > 1 else ""
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) + per_rank \
        if counts else "seen in stack samples"


def _sync_finding(ctx: Context, recs: list[Recommendation]) -> Finding | None:
    calls = sum(n for e in ctx.evidence for _, n in e.sync_calls)
    items = sum(e.item_calls for e in ctx.evidence)
    if calls == 0 and items == 0:
        return None
    drain = ctx.per_step_share(lambda r, e: e.sync_drain_us)
    return finding(
        codes.SYNC_CALLS, "warning" if recs else "info",
        f"Host-device synchronisation in the step: {_sync_names(ctx)}",
        {codes.SYNC_CALLS: calls, "item_calls": items, "sync_drain_share": drain,
         "sync_per_step_us": ctx.mean(lambda r: r.launch.sync_us / max(r.steps, 1) if r.launch else None)},
        share=drain, recs=recs, stage="host_overhead")
