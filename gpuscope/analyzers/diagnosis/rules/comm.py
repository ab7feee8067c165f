"""Communication: exposed collectives, overlap, stragglers, and the distributed set-up.

Covers the TensorBoard plugin's rules "Communication > 10% -> gradient compression / accumulation,
bigger batch", "DataParallel on more than one GPU -> DDP" and "DDP without NCCL -> NCCL".
"""

from __future__ import annotations

from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding, severity
from gpuscope.analyzers.diagnosis.links import bus_bandwidth, link_of, measured_link
from gpuscope.analyzers.diagnosis.rules import comm_topology
from gpuscope.analyzers.diagnosis.stragglers import Straggler
from gpuscope.model.diagnosis import Finding, Recommendation
from gpuscope.model.rank import RankReport

COMM_MIN = 0.10
"""The TensorBoard plugin's threshold for communication recommendations."""
LINK_BOUND = 0.6
"""Bus bandwidth at 60% or more of the link's per-direction figure: the link is the limit (nccl-tests
reach about 70-85% of it on large messages)."""
LATENCY_BOUND = 0.2
OVERLAP_LOW = 0.5


def apply(ctx: Context) -> RuleOutput:
    out = _setup(ctx)
    share = ctx.facts.exposed_comm_share
    if ctx.straggler is not None:
        out += _straggler(ctx, ctx.straggler)
    if share is None or share < COMM_MIN:
        return out
    out += _bandwidth(ctx, share) + comm_topology.apply(ctx, share)
    recs = _recommendations(ctx, share)
    overlap = ctx.mean(lambda r: r.communication.overlap)
    evidence: dict[str, float | int | str | None] = {
        "communication_share": share,
        "comm_kernels_per_step_us": ctx.mean(lambda r: r.communication.total_us / max(r.steps, 1)),
        # The exposed part is the stage share (the one definition): of the typical step, in time.
        "comm_exposed_per_step_us": share * ctx.typical_step_us if ctx.typical_step_us is not None else None,
        # What of it is the host inside collective calls with nothing on the GPU (the plugin's Communication counts
        # it): why the exposed time can exceed the collective kernels' own.
        "comm_host_calls_per_step_us": ctx.mean(_host_calls_us),
        "comm_overlap": overlap,
        "host_collective_wait_share": ctx.shares.details.get("host_collective_wait_share"),
        "allreduce_share": _allreduce_share(ctx),
        "ranks": len(ctx.ranks),
    }
    title = f"Communication not hidden behind compute takes {share:.1%} of the step"
    if overlap is not None:
        title += f" (only {overlap:.0%} of it overlaps compute)"
    return out + RuleOutput((finding(codes.COMM_EXPOSED_HIGH, severity(share, warning=0.15, critical=0.30), title,
                                     evidence, share=share, recs=recs, stage="communication"),), tuple(recs))


def _host_calls_us(r: RankReport) -> float:
    """Per steady step: the breakdown's Communication beyond the collective kernels no compute kernel hides."""
    return max(0.0, r.step_breakdown_us.communication - r.communication.exposed_us / max(r.steps, 1))


def _allreduce_share(ctx: Context) -> float | None:
    """The steady step's exposed all-reduce: what gradient accumulation and compression shrink.

    The job's exposed communication share (``JobFacts.exposed_comm_share``: collectives no computation hides, per
    steady step) times all-reduce's part of the ranks' exposed collective time in their steady steps
    (``TraceEvidence.allreduce_exposed_us`` over ``comm_exposed_us``). All-reduces hidden under the backward pass
    cost the step nothing, so they count for nothing here. None without a trace or exposed collectives."""
    exposed = ctx.facts.exposed_comm_share
    comm = sum(e.comm_exposed_us for e in ctx.evidence)
    if exposed is None or comm <= 0:
        return None
    return exposed * sum(e.allreduce_exposed_us for e in ctx.evidence) / comm


def _recommendations(ctx: Context, share: float) -> list[Recommendation]:
    recs: list[Recommendation] = []
    overlap = ctx.mean(lambda r: r.communication.overlap)
    allreduce = _allreduce_share(ctx) or 0.0
    if overlap is None or overlap < OVERLAP_LOW:
        s = savings.share_of(share, 0.5, "Exposed communication", "launching collectives earlier lets about half "
                             "of them run under the backward pass")
        recs.append(Recommendation(
            codes.DDP_BUCKET, "Overlap communication with compute",
            "Let collectives start while backward still runs: DistributedDataParallel(model, bucket_cap_mb=25 to "
            "50 (try smaller buckets so the first all-reduce starts sooner), gradient_as_bucket_view=True); with "
            "torchrec, a pipelined trainer (TrainPipelineSparseDist) overlaps the input all-to-all with compute.",
            s.fraction, s.reasoning, stage="communication"))
    if allreduce > 0.02:
        s = savings.share_of(allreduce, 0.75, "Exposed all-reduce", "accumulating 4 micro-batches under no_sync() "
                             "all-reduces once instead of 4 times")
        recs.append(Recommendation(
            codes.GRAD_ACCUMULATION, "Accumulate gradients over micro-batches",
            "Run 4 micro-batches per optimizer step and wrap the first 3 backward passes in model.no_sync(), so "
            "gradients are all-reduced once per 4 (a larger effective batch: adjust the learning rate).",
            s.fraction, s.reasoning, stage="communication"))
        s = savings.share_of(allreduce, 0.5, "Exposed all-reduce", "fp16 compression halves the bytes on the wire")
        recs.append(Recommendation(
            codes.GRADIENT_COMPRESSION, "Compress gradients for the all-reduce",
            "Register a DDP communication hook: model.register_comm_hook(None, default_hooks.fp16_compress_hook) "
            "(or PowerSGD from torch.distributed.algorithms.ddp_comm_hooks) to send fewer bytes.",
            s.fraction, s.reasoning, stage="communication"))
    return recs


def _straggler(ctx: Context, s: Straggler) -> RuleOutput:
    saving = savings.share_of(s.mean_wait_share, 0.5, "Waiting for the straggler",
                              "balancing moves work between ranks rather than removing it")
    late = (f"reaches {s.late_share:.0%} of the collectives last (the cause: {s.cause})"
            if s.late_share is not None else
            f"spends the least time in {ctx.words.collectives} kernels ({s.comm_us / 1000:.1f} ms per step): it "
            "reaches each collective last")
    rec = Recommendation(
        codes.STRAGGLER, f"Find out why rank {s.rank} is late to its collectives",
        f"Rank {s.rank} {late}, and the others wait for it, {s.mean_wait_us / 1000:.1f} ms per step on average "
        f"(up to {s.max_wait_us / 1000:.1f} ms on rank {s.max_wait_rank}). Compare rank {s.rank}'s host timeline "
        "with the others' (input size and data loading, embedding-table sharding, CPU/NUMA placement, a slower "
        "link) and balance the work.", saving.fraction, saving.reasoning, stage="communication")
    evidence: dict[str, float | int | str | None] = {
        "straggler_rank": s.rank, "straggler_comm_per_step_us": s.comm_us, "mean_wait_per_step_us": s.mean_wait_us,
        "max_wait_per_step_us": s.max_wait_us, "max_wait_rank": s.max_wait_rank, "mean_wait_share": s.mean_wait_share,
    }
    evidence.update({f"rank{rank}_wait_per_step_us": us for rank, us in s.wait_us})
    title = (f"Rank {s.rank} is the straggler: the other ranks wait for it {s.mean_wait_us / 1000:.1f} ms per step "
             f"on average (up to {s.max_wait_us / 1000:.1f} ms on rank {s.max_wait_rank})")
    f = finding(codes.STRAGGLER, severity(s.mean_wait_share, warning=0.05, critical=0.20), title, evidence,
                share=s.mean_wait_share, recs=[rec], stage="communication", rank=s.rank)
    return RuleOutput((f,), (rec,))


def _setup(ctx: Context) -> RuleOutput:
    findings: list[Finding] = []
    recs: list[Recommendation] = []
    if any(e.data_parallel for e in ctx.evidence):
        rec = Recommendation(
            codes.USE_DDP, "Use DistributedDataParallel instead of DataParallel",
            "DataParallel runs one Python thread for all GPUs and scatters and gathers through GPU 0; launch one "
            "process per GPU (torchrun) and wrap the model in DistributedDataParallel.", None,
            "The gain depends on the GPU count and is not visible in one process's trace.", stage="communication")
        recs.append(rec)
        findings.append(finding(codes.DATA_PARALLEL, "warning", "The model is wrapped in DataParallel",
                                {"ranks": len(ctx.ranks)}, recs=[rec], stage="communication"))
    backends = ctx.backends
    cc = ctx.compute_capability
    if backends and "nccl" not in backends and len(ctx.ranks) > 1 and (cc is None or cc >= 3.5):
        lib = ctx.words.collectives
        on_rocm = " (the backend PyTorch names 'nccl' runs RCCL on ROCm)" if ctx.vendor == "amd" else ""
        rec = Recommendation(
            codes.NCCL_BACKEND, f"Use the {lib} backend for GPU collectives",
            f"The process group uses {', '.join(sorted(backends))}; on GPUs init_process_group('nccl'){on_rocm} is "
            "much faster for collectives of GPU tensors.", None,
            "The gain depends on the message sizes and links; not estimated from one trace.", stage="communication")
        recs.append(rec)
        findings.append(finding(codes.DDP_NOT_NCCL, "warning", f"Distributed backend is {', '.join(sorted(backends))}, "
                                f"not {lib}", {"backend": ", ".join(sorted(backends))}, recs=[rec],
                                stage="communication"))
    return RuleOutput(tuple(findings), tuple(recs))


def _job_gpus(ctx: Context) -> int | None:
    """How many GPUs the job's collectives span: the world size the traces state, else its ranks' GPUs."""
    world = max((r.world_size for r in ctx.ranks if r.world_size), default=None)
    return world if world is not None else sum(r.gpu_count for r in ctx.ranks) or None


def _bandwidth(ctx: Context, share: float) -> RuleOutput:
    """Bound by the link, or by latency and launches: bus bandwidth against what the GPUs' link carries."""
    measured = [m for m in (measured_link(g) for g in ctx.run.meta.gpus) if m is not None]
    model = next((r.device for r in ctx.ranks if r.device), None)
    link = min(measured, key=lambda m: m.gbps) if measured else link_of(model, _job_gpus(ctx))
    moved = bus_bandwidth(ctx.ranks)
    if moved is None or link is None:
        return RuleOutput()
    busbw, small = moved.gbps, moved.small_message_share
    ratio = busbw / link.gbps
    evidence: dict[str, float | int | str | None] = {
        "busbw_gbps": busbw, "link_gbps": link.gbps, "link": link.name, "link_share": ratio,
        "small_message_time_share": small}
    if ratio >= LINK_BOUND:
        s = savings.share_of(share, 0.5, "Exposed communication", "bf16/fp16 gradients halve the bytes on a link "
                             "that is already near its limit")
        rec = Recommendation(
            codes.FEWER_COMM_BYTES, "Send fewer bytes: the link is near its limit",
            f"Collectives move {busbw:.0f} GB/s of bus bandwidth, {ratio:.0%} of {link.name}'s {link.gbps:.0f} GB/s "
            "per direction: bigger buckets will not help. Send fewer bytes: bf16/fp16 gradients "
            "(DDP's bf16_compress_hook), PowerSGD compression, or a larger per-GPU batch (fewer all-reduces per "
            "sample).", s.fraction, s.reasoning, stage="communication")
        return RuleOutput((finding(codes.COMM_LINK_BOUND, "warning", f"Collectives run at {ratio:.0%} of what "
                                   f"{link.name} carries ({busbw:.0f} of {link.gbps:.0f} GB/s)", evidence,
                                   share=share, recs=[rec], stage="communication"),), (rec,))
    if ratio <= LATENCY_BOUND and small >= 0.5:
        s = savings.share_of(share, 0.5, "Exposed communication", "fewer, larger collectives pay the per-call "
                             "latency once per bucket instead of once per tensor")
        rec = Recommendation(
            codes.BUCKET_COLLECTIVES, "Fewer, larger collectives: latency, not the link, is the limit",
            f"{small:.0%} of collective time is in messages under 1 MiB, at {busbw:.1f} GB/s of bus bandwidth: "
            f"{ratio:.0%} of {link.name}'s {link.gbps:.0f} GB/s. Coalesce them: a larger DDP bucket_cap_mb, "
            "torch.distributed's coalescing manager or all_reduce_coalesced for many small tensors, FSDP with "
            "larger wrapping units.", s.fraction, s.reasoning, stage="communication")
        return RuleOutput((finding(codes.COMM_LATENCY_BOUND, "warning", f"Small collectives run far under the link: "
                                   f"{busbw:.1f} of {link.gbps:.0f} GB/s ({link.name})", evidence, share=share,
                                   recs=[rec], stage="communication"),), (rec,))
    return RuleOutput()
