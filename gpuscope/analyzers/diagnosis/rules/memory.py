"""Memory: capacity, host-device copies, and bandwidth-bound kernels.

Covers the TensorBoard plugin's rule "peak memory > 90% of the device -> gradient checkpointing or
AMP", Nsight Systems' "pageable memory async memcpy" and "synchronous memcpy/memset" rules, and
DCGM's DRAM-active-high with SM-active-low (bandwidth-bound) when live samples have it.
"""

from __future__ import annotations

from gpuscope.analyzers.advice import batch
from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding
from gpuscope.analyzers.diagnosis.rules import serving
from gpuscope.analyzers.diagnosis.stages import DRAM_BOUND_MIN, SM_LOW
from gpuscope.model.diagnosis import Finding, Recommendation

CAPACITY_HIGH = 0.9
"""The TensorBoard plugin's threshold."""


def apply(ctx: Context) -> RuleOutput:
    if ctx.no_gpu:  # device memory, copies to it and its bandwidth: nothing to say without a GPU
        return RuleOutput()
    out = _copies(ctx) + _capacity(ctx) + _bandwidth(ctx)
    return out


def _capacity(ctx: Context) -> RuleOutput:
    """Peak memory against the device: the worst rank's (``JobFacts.peak_memory_share``), as every rule quotes it."""
    facts = ctx.facts
    share = facts.peak_memory_share
    if share is None:
        return RuleOutput()
    evidence: dict[str, float | int | str | None] = {
        "peak_share": share, "peak_allocated_bytes": facts.peak_memory_bytes,
        "device_bytes": facts.device_memory_bytes, "peak_rank": facts.peak_memory_rank if facts.ranks > 1 else None}
    if share >= CAPACITY_HIGH:
        if ctx.inference:
            rec = Recommendation(codes.SERVING_MEMORY, "Make room in device memory",
                                 f"Peak memory is {share:.0%} of the device: {serving.MEMORY}", None,
                                 "Frees memory rather than time.", stage="memory")
        else:
            rec = Recommendation(
                codes.ACTIVATION_CHECKPOINTING, "Make room in device memory",
                f"Peak memory is {share:.0%} of the device: enable mixed precision (torch.autocast, halves "
                "activations) or activation checkpointing (torch.utils.checkpoint on the largest blocks) before the "
                "allocator starts to retry or the job runs out of memory.", None,
                "Frees memory rather than time: checkpointing recomputes activations (often 20-30% more compute); "
                "the room it makes allows a larger batch.", stage="memory")
        f = finding(codes.MEMORY_NEAR_CAPACITY, "critical" if share >= 0.97 else "warning",
                    f"Peak device memory is {share:.0%} of the GPU's memory{_where(ctx)}", evidence, recs=[rec],
                    stage="memory")
        return RuleOutput((f,), (rec,))
    # Whether a larger batch fits is ``advice.batch``'s to say (every rank's peak known exactly: an unknown rank may
    # be the full one, and a lower bound cannot show room to spare).
    if batch.batch_room(facts).fits:
        bigger = batch.larger_batch(ctx, ctx.shares.get("host_overhead"))
        recs = (bigger,) if bigger is not None else ()
        shown = f"{share:.1%}" if share < 0.1 else f"{share:.0%}"  # 0.3%, never "only 0%"
        f = finding(codes.MEMORY_HEADROOM, "info", f"Peak device memory is only {shown} of the GPU's "
                    f"memory{_where(ctx)}: a larger batch would fit", evidence, recs=recs, stage="memory")
        return RuleOutput((f,), recs)
    return RuleOutput()


def _where(ctx: Context) -> str:
    """" on rank N" when the job has several ranks: the worst rank is the one quoted."""
    rank = ctx.facts.peak_memory_rank
    return f" on rank {rank}, the fullest" if ctx.facts.ranks > 1 and rank is not None else ""


def _copies(ctx: Context) -> RuleOutput:
    findings: list[Finding] = []
    recs: list[Recommendation] = []
    pageable = sum(r.launch.pageable_memcpy for r in ctx.ranks if r.launch)
    memory_share = ctx.shares.get("memory")
    if pageable:
        # Copies outside the steps (before the first, say) can add up to more than a step: a share is at most 1.
        copy_share = min(ctx.per_step_share(lambda r, e: r.launch.pageable_memcpy_us / max(r.steps, 1)
                                            if r.launch else 0.0), 1.0)
        s = savings.share_of(min(copy_share, max(memory_share, copy_share)), 0.5, "Copying from pageable memory",
                             "pinned copies run at full PCIe speed and asynchronously")
        rec = Recommendation(
            codes.PIN_MEMORY, "Copy from pinned host memory",
            "Host-to-device copies read pageable memory, so the driver stages them and the copy blocks the host. "
            "Set DataLoader(pin_memory=True) and move batches with tensor.to(device, non_blocking=True); pin "
            "other host tensors you copy every step with .pin_memory().", s.fraction, s.reasoning, stage="memory")
        recs.append(rec)
        findings.append(finding(
            codes.PAGEABLE_MEMCPY, "warning" if copy_share >= 0.02 else "info",
            f"{pageable} host-device copies from pageable memory ({copy_share:.1%} of the step)",
            {"pageable_memcpy_count": pageable, "pageable_memcpy_share": copy_share,
             "pageable_memcpy_per_step_us": ctx.mean(lambda r: r.launch.pageable_memcpy_us / max(r.steps, 1)
                                                     if r.launch else None)},
            share=copy_share, recs=[rec], stage="memory"))
    sync_copies = sum(e.sync_memcpy for e in ctx.evidence)
    if sync_copies:
        s = savings.share_of(memory_share, 0.25, "Copy time", "async copies overlap the host's next launches")
        rec = Recommendation(
            codes.ASYNC_COPIES, "Make copies asynchronous",
            f"{sync_copies} synchronous {ctx.words.sync_copies} calls block the host until the GPU finishes; use "
            "non_blocking=True copies from pinned memory and torch.zeros on the device instead of copying zeros.",
            s.fraction, s.reasoning, stage="memory")
        recs.append(rec)
        findings.append(finding(codes.SYNC_MEMCPY, "info", f"{sync_copies} synchronous memcpy/memset calls",
                                {"sync_memcpy_count": sync_copies}, recs=[rec], stage="memory"))
    return RuleOutput(tuple(findings), tuple(recs))


def _bandwidth(ctx: Context) -> RuleOutput:
    if ctx.live is None:
        return RuleOutput()
    gpus = [g for g in ctx.live.gpus if g.dram_active_mean is not None and g.sm_active_mean is not None]
    if not gpus:
        return RuleOutput()
    dram = sum(g.dram_active_mean or 0.0 for g in gpus) / len(gpus)
    sm = sum(g.sm_active_mean or 0.0 for g in gpus) / len(gpus)
    if dram < DRAM_BOUND_MIN or sm > SM_LOW:
        return RuleOutput()
    share = ctx.shares.get("memory")
    s = savings.share_of(share, 0.3, "Bandwidth-bound kernel time", "halving the bytes (bf16/fp16) or fusing "
                         "reads speeds the memory-bound kernels by up to 2x, partly")
    rec = Recommendation(
        codes.REDUCE_MEMORY_TRAFFIC, "Move fewer bytes per step",
        f"DRAM is active {dram:.0%} of the time while SMs are active only {sm:.0%}: the kernels wait on memory. "
        "Use bf16/fp16 (torch.autocast), channels_last for convolutions, and fuse elementwise chains "
        "(torch.compile) so tensors are read once.", s.fraction, s.reasoning, stage="memory")
    f = finding(codes.DRAM_BOUND, "warning", f"Kernels are memory-bandwidth bound: DRAM active {dram:.0%}, "
                f"SM active {sm:.0%}", {"dram_active_share": dram, "sm_active_share": sm}, share=share, recs=[rec],
                stage="memory")
    return RuleOutput((f,), (rec,))
