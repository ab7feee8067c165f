"""GPU compute (make busy kernels faster) and idle (the GPU allocated but unused).

Covers the TensorBoard plugin's rule "compute capability >= 7, no tensor-core kernels, tensor-core
eligible kernels present -> AMP", TF32 on Ampere and later, and Nsight Systems' "GPU gaps over
500 ms" and "GPU utilization under 50% in any of 30 chunks" rules.
"""

from __future__ import annotations

from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding
from gpuscope.analyzers.diagnosis.evidence import CHUNKS
from gpuscope.analyzers.diagnosis.rules import serving
from gpuscope.analyzers.efficiency.pipes import TENSOR_ADVICE, mean_use, pipe_use, tensor_cores_idle
from gpuscope.model.diagnosis import Finding, Recommendation

TC_ELIGIBLE_MIN = 0.10
TC_USED_MAX = 0.05
"""Under this share of kernel time on tensor cores, they count as unused."""
IDLE_MIN = 0.3


def apply(ctx: Context) -> RuleOutput:
    if ctx.no_gpu:  # main-thread idle from stacks is not a GPU left idle
        return RuleOutput()
    trace = _tensor_cores(ctx)
    return trace + (_tensor_pipe(ctx) if not trace.findings else RuleOutput()) + _idle(ctx) + _busy(ctx)


def _tensor_pipe(ctx: Context) -> RuleOutput:
    """A live run's DCGM counters: the SMs busy and the tensor pipes nearly idle (``efficiency.pipes``, the fleet's
    rule too). The trace's own rule, which knows the operators, speaks instead where there is a trace."""
    if ctx.live is None or not ctx.live.gpus:
        return RuleOutput()
    use = mean_use(pipe_use(g.sm_active_mean, g.tensor_active_mean, g.sm_occupancy_mean, g.dram_active_mean)
                   for g in ctx.live.gpus)
    if not tensor_cores_idle(use):
        return RuleOutput()
    rec = Recommendation(
        codes.AMP, "Put the matrix work on the tensor cores",
        f"DCGM: the SMs were active {use.sm_active:.0%} of the time and the tensor pipes "
        f"{use.tensor_active:.0%}. {TENSOR_ADVICE}", None,
        "no saving is claimed from DCGM counters alone: they do not say how much of the SM time is matrix work; "
        "a trace recorded with record_shapes=True sizes it (docs/efficiency.md)", stage="gpu_compute")
    f = finding(codes.TENSOR_PIPE_IDLE, "warning",
                f"Tensor cores idle while the SMs work: tensor pipes {use.tensor_active:.0%}, SM active "
                f"{use.sm_active:.0%} (DCGM)",
                {"sm_active_share": use.sm_active, "tensor_active_share": use.tensor_active,
                 "sm_occupancy_share": use.sm_occupancy}, share=ctx.shares.get("gpu_compute"), recs=[rec],
                stage="gpu_compute")
    return RuleOutput((f,), (rec,))


def _tensor_cores(ctx: Context) -> RuleOutput:
    eligible = ctx.mean_ev(lambda e: e.tc_eligible_share)
    used = ctx.mean_ev(lambda e: e.tc_share)
    cc = ctx.compute_capability
    if eligible is None or used is None or eligible < TC_ELIGIBLE_MIN or used >= TC_USED_MAX:
        return RuleOutput()
    if cc is not None and cc < 7.0:
        return RuleOutput()
    kernel = ctx.shares.get("gpu_compute")
    recs: list[Recommendation] = []
    units = ctx.words.matrix_units
    s = savings.faster_kernels(kernel, eligible, savings.AMP_SPEEDUP, f"on {units} in fp16/bf16")
    recs.append(Recommendation(
        codes.AMP, "Serve in bf16/fp16" if ctx.inference else "Enable automatic mixed precision",
        f"{eligible:.0%} of kernel time is launched by operators that {units} can run (convolutions, matmuls) but "
        f"{used:.0%} runs on {units}. {serving.AUTOCAST if ctx.inference else _autocast(cc)}", s.fraction,
        s.reasoning,
        stage="gpu_compute"))
    if cc is not None and cc >= 8.0:
        s = savings.faster_kernels(kernel, eligible, savings.TF32_SPEEDUP, "on tensor cores in TF32")
        recs.append(Recommendation(
            codes.TF32, "Allow TF32 for fp32 matmuls and convolutions",
            "Set torch.backends.cuda.matmul.allow_tf32 = True and torch.backends.cudnn.allow_tf32 = True (or "
            "torch.set_float32_matmul_precision('high')): fp32 GEMMs then run on tensor cores without code changes.",
            s.fraction, s.reasoning, stage="gpu_compute"))
    cc_text = f"{cc:.1f}" if cc is not None else None
    f = finding(codes.TENSOR_CORES_UNUSED, "warning",
                f"{units[:1].upper()}{units[1:]} unused: {eligible:.0%} of kernel time could use them",
                {"tc_eligible_share": eligible, "tensor_core_share": used, "compute_capability": cc_text},
                share=kernel * eligible, recs=recs, stage="gpu_compute")
    return RuleOutput((f,), tuple(recs))


def _autocast(cc: float | None) -> str:
    if cc is not None and cc < 8.0:
        return ("Run the forward pass under torch.autocast('cuda', dtype=torch.float16) and scale the loss with "
                "torch.amp.GradScaler('cuda') (this GPU has fp16 tensor cores but no bf16).")
    return ("Run the forward pass under torch.autocast('cuda', dtype=torch.bfloat16) (fp16 with "
            "torch.amp.GradScaler on GPUs without bf16).")


def _idle(ctx: Context) -> RuleOutput:
    findings: list[Finding] = []
    recs: list[Recommendation] = []
    gaps = sum(e.long_gaps for e in ctx.evidence)
    if gaps:
        findings.append(finding(
            codes.GPU_GAP_LONG, "warning", f"{gaps} GPU gap{'s' if gaps > 1 else ''} over 500 ms with nothing running",
            {"long_gaps": gaps,
             "long_gap_per_window_us": sum(e.long_gap_us for e in ctx.evidence) / len(ctx.evidence)},
            share=ctx.shares.get("idle"), stage="idle"))
    chunks = [e.low_util_chunks for e in ctx.evidence if e.low_util_chunks is not None]
    if chunks and max(chunks) > 0:
        findings.append(finding(
            codes.GPU_UTIL_LOW_CHUNKS, "info",
            f"The GPU was under 50% busy in {max(chunks)} of {CHUNKS} equal slices of the trace",
            {"low_util_chunks": max(chunks), "chunks": CHUNKS}, stage="idle"))
    # The GPU-side wait (work queued, or nothing on the host to blame) is the idle stage's too, but its own finding
    # (rules.gpu_wait): releasing the GPU would not give it back.
    idle = max(ctx.shares.get("idle") - ctx.shares.details.get("gpu_side_wait_share", 0.0), 0.0)
    if idle >= IDLE_MIN:
        s = savings.Saving(idle, f"The GPU sat idle {idle:.1%} of the time: that time buys nothing at any speed.")
        rec = Recommendation(
            codes.RELEASE_IDLE_GPU, "Release the GPU while it is not used",
            "The GPU is allocated but idle for long stretches: check for a stalled job or a waiting loop "
            f"({ctx.words.smi} shows which processes hold it), run evaluation and checkpointing asynchronously, or "
            "give the GPU back (scale down, shorter reservations) between bursts of work.", s.fraction, s.reasoning,
            stage="idle")
        recs.append(rec)
        evidence: dict[str, float | int | str | None] = {"idle_share": idle}
        if ctx.live is not None and ctx.live.gpus:
            evidence["gpu_util"] = sum(g.busy_mean or 0.0 for g in ctx.live.gpus) / len(ctx.live.gpus)
            evidence["duration_s"] = ctx.live.duration_s
        findings.append(finding(codes.GPU_IDLE, "critical" if idle >= 0.6 else "warning",
                                f"The GPU was idle {idle:.0%} of the time", evidence, share=idle, recs=[rec],
                                stage="idle"))
    return RuleOutput(tuple(findings), tuple(recs))


def _busy(ctx: Context) -> RuleOutput:
    busy = ctx.facts.gpu_busy
    if busy is None or busy < 0.9:
        return RuleOutput()
    f = finding(codes.GPU_BUSY_HIGH, "info",
                f"The GPU is busy {busy:.0%} of the time: it is the limit, as it should be",
                {"gpu_busy": busy, "sm_efficiency_share": ctx.mean(lambda r: r.sm_efficiency)}, share=busy,
                stage="gpu_compute")
    return RuleOutput((f,))
