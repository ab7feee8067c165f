"""The run's useful work from its ranks' counts: model FLOPs per step, the peak that applies, MFU, the roofline per
kernel family, and the kernels that do their work well below what the GPU could (with the roofline saving)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from gpuscope.analyzers.efficiency.ceiling import (
    Work,
    above_ceiling,
    flag,
    peak_of,
    peak_suspected,
    utilisation_flag,
)
from gpuscope.analyzers.efficiency.roofline import roofline_point
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import JobFacts, Recommendation
from gpuscope.model.efficiency import (
    DEFAULT_TARGET_MFU,
    Algorithm,
    Efficiency,
    FamilyRoofline,
    Inefficiency,
    RankEfficiency,
    UnmodelledOp,
)
from gpuscope.model.gpu_spec import Dtype, GpuSpec
from gpuscope.model.rank import RankReport

ATTAINABLE = 0.7
"""The fraction of a ceiling well-tuned kernels reach (cuBLAS GEMMs reach 70-80% of peak; streaming kernels 70-90%
of bandwidth): a roofline saving is the time above what this fraction of the better ceiling would take."""
CPU_JOB_NOTE = "a CPU job: no GPU to measure MFU against"
MIN_SAVING_SHARE = 0.01
"""Inefficiencies saving less than 1% of the step are not worth a recommendation."""
_PEAK_ORDER: tuple[Dtype, ...] = ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64", "int8")
_BETTER: tuple[Dtype, ...] = ("bf16", "tf32")


def run_efficiency(ranks: Sequence[RankReport], facts: JobFacts, spec: GpuSpec | None, gpu_name: str | None, *,
                   target_mfu: float | None = None, target_source: str | None = None,
                   spec_note: str | None = None) -> Efficiency | None:
    """The run's Efficiency; None when no rank was counted (no traces). The FLOPs a step are each rank's mean over
    all its steady steps, as the step time MFU divides by is (``analyzers/trace/step_stats``). ``spec_note``: why
    the run's GPU has no spec, where it is not simply missing from the table (a name that could be more than one
    model).

    The one place the run's FLOPs a step, MFU and HFU are worked out: ``analyze``, ``ops``, ``diff``, the report and
    the dashboard all show this object's figures."""
    counted = [r.efficiency for r in ranks if r.efficiency is not None]
    if not counted:
        return None
    cpu_job = all(r.cpu_only for r in ranks if r.efficiency is not None)
    gpus = sum(max(r.gpu_count, 1) for r in ranks if r.efficiency is not None and not r.cpu_only)
    recorded = any(c.shapes_recorded for c in counted)
    flops = sum(c.model_flops for c in counted) if recorded else None
    hardware = (flops or 0.0) + sum(c.recomputed_flops for c in counted) if recorded else None
    by_dtype: dict[str, float] = defaultdict(float)
    for c in counted:
        for name, f in c.flops_by_dtype:
            by_dtype[name] += f
    dtype = _as_dtype(max(by_dtype, key=lambda d: by_dtype[d])) if by_dtype else None
    peak = spec.peak_flops(dtype) if spec is not None and dtype is not None else None
    step_us = facts.step_time_us
    above = () if cpu_job else above_ceiling(counted, spec)
    left_out = float(sum(a.flops_per_step for a in above if not a.in_mfu))
    capacity, note = (None, CPU_JOB_NOTE) if cpu_job else _capacity(flops, step_us, gpus, peak, spec, gpu_name,
                                                                     dtype, recorded, spec_note)
    mfu = max((flops or 0.0) - left_out, 0.0) / capacity if capacity else None
    hfu = max((hardware or 0.0) - left_out, 0.0) / capacity if capacity else None
    untimed = sum(c.untimed_flops for c in counted) / flops if flops else 0.0
    kernel_us = sum(c.kernel_gpu_us for c in counted)
    unmodelled_us = sum(c.unmodelled_gpu_us for c in counted)
    bandwidth = spec.memory_bandwidth_bytes_per_s if spec is not None else None
    families = family_roofline(counted, spec, dtype, max(gpus, 1), suspect_peak=peak_suspected(above))
    kept = [a for a in above if a.in_mfu]
    return Efficiency(
        model_flops_per_step=_less(flops, left_out), peak_flops=peak, peak_dtype=dtype,
        peak_source=spec.source_line if spec is not None else None,
        gpu_model=spec.model if spec is not None else gpu_name, gpus=gpus, mfu=mfu, mfu_note=note,
        step_time_us=step_us, unmodelled_share=unmodelled_us / kernel_us if recorded and kernel_us > 0 else None,
        families=families, unmodelled=_unmodelled(counted),
        inefficiencies=() if cpu_job else _inefficiencies(counted, spec, gpus, step_us),
        memory_bandwidth_bytes_per_s=bandwidth,
        attainable_mfu=target_mfu if target_mfu is not None else DEFAULT_TARGET_MFU,
        target_mfu_source=target_source if target_mfu is not None else "default",
        hardware_flops_per_step=_less(hardware, left_out), hfu=hfu, left_out_flops_per_step=left_out,
        above_ceiling=above,
        mfu_flag=utilisation_flag("MFU", mfu, untimed_share=untimed, dtype=dtype, spec=spec, kept=kept),
        hfu_flag=utilisation_flag("HFU", hfu, untimed_share=untimed, dtype=dtype, spec=spec, kept=kept))


def _less(flops: float | None, left_out: float) -> float | None:
    return None if flops is None else max(flops - left_out, 0.0)


def _as_dtype(name: str) -> Dtype | None:
    return next((d for d in _PEAK_ORDER if d == name), None)


def _capacity(flops: float | None, step_us: float | None, gpus: int, peak: float | None, spec: GpuSpec | None,
              gpu_name: str | None, dtype: str | None, recorded: bool,
              spec_note: str | None = None) -> tuple[float | None, str | None]:
    """MFU's divisor: the FLOPs the GPUs could do in a step at the peak (step time x GPUs x peak); None with the
    reason where there is none."""
    if not recorded:
        return None, ("the trace has no recorded shapes (profile with record_shapes=True; an Nsight Systems profile "
                      "records none)")
    if not flops:
        return None, "no GEMM, convolution or attention operator could be counted from the recorded shapes"
    if spec is None:
        what = spec_note or (f"{gpu_name!r} is not in the GPU spec table" if gpu_name else
                             "the trace names no GPU model")
        return None, f"{what}: no peak to measure against (add it under [gpu_specs] in config.toml)"
    if dtype is None:
        return None, "the trace records no input types: the type the work ran in, and so its peak, is unknown"
    if peak is None:
        return None, f"the spec table has no {dtype} peak for {spec.model}"
    if not step_us:
        return None, "no steady profiler steps: no step time to divide by"
    return step_us / 1e6 * gpus * peak, None


def family_roofline(counted: Sequence[RankEfficiency], spec: GpuSpec | None, dtype: str | None,
                    gpus: int, *, suspect_peak: bool = False) -> tuple[FamilyRoofline, ...]:
    """The ranks' kernel families summed, per GPU, against the roofline of ``spec``: each under the peak for the
    type its FLOPs ran in (``dtype``, the run's, where a family's is not known); most GPU time first. A family
    above a ceiling carries the flag and its cause."""
    us: dict[str, float] = defaultdict(float)
    flops: dict[str, float] = defaultdict(float)
    moved: dict[str, float] = defaultdict(float)
    fast: dict[str, float] = defaultdict(float)
    types: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    algorithm: dict[str, Algorithm] = {}
    for c in counted:
        for f in c.families:
            us[f.family] += f.gpu_us
            flops[f.family] += f.flops
            moved[f.family] += f.bytes
            fast[f.family] += f.fast_algorithm_flops
            if f.fast_algorithm != "direct":
                algorithm[f.family] = f.fast_algorithm
            types[f.family][f.dtype or dtype or ""] += f.flops
    bandwidth = spec.memory_bandwidth_bytes_per_s if spec is not None else None
    rows = []
    for family in sorted(us, key=lambda k: -us[k]):
        own = max(types[family], key=lambda d: types[family][d]) if types[family] else ""
        # A type with no peak (int64 indexing, bool masks: memory-bound work) is held under the run's.
        kind = own if peak_of(spec, own) is not None or spec is None and own else dtype
        p = roofline_point(flops[family], moved[family], us[family], peak_of(spec, kind), bandwidth)
        work = Work(f"the {family} kernels", flops[family], moved[family], us[family], kind,
                    fast_flops=fast[family], algorithm=algorithm.get(family, "direct"))
        rows.append(FamilyRoofline(family=family, gpu_us=us[family] / gpus, flops=flops[family] / gpus,
                                   bytes=moved[family] / gpus, achieved_tflops=p.achieved_tflops,
                                   achieved_tb_s=p.achieved_tb_s, intensity=p.intensity,
                                   roofline_tflops=p.roofline_tflops, roofline_share=p.roofline_share, bound=p.bound,
                                   dtype=kind, flag=flag(work, spec, suspect_peak=suspect_peak)))
    return tuple(rows)


def _unmodelled(counted: Sequence[RankEfficiency]) -> tuple[UnmodelledOp, ...]:
    us: dict[str, float] = defaultdict(float)
    for c in counted:
        for u in c.unmodelled:
            us[u.name] += u.gpu_us
    return tuple(UnmodelledOp(name=n, calls=0, gpu_us=v) for n, v in sorted(us.items(), key=lambda kv: -kv[1]))


def _inefficiencies(counted: Sequence[RankEfficiency], spec: GpuSpec | None, gpus: int,
                    step_us: float | None) -> tuple[Inefficiency, ...]:
    """What could run faster, each priced by the roofline: time now minus time at ATTAINABLE of the better peak.
    Per GPU per step (the ranks' figures averaged)."""
    if spec is None or not step_us:
        return ()
    out = []
    fp32 = [g for c in counted for g in c.gemms if g.kind == "fp32"]
    better = next((d for d in _BETTER if spec.supports(d) and spec.peak_flops(d)), None)
    if fp32 and better is not None:
        us = sum(g.gpu_us for g in fp32) / gpus
        flops = sum(g.flops for g in fp32) / gpus
        fast_us = flops / (ATTAINABLE * (spec.peak_flops(better) or 1)) * 1e6
        out.append(Inefficiency("fp32_gemm", us, max(us - fast_us, 0.0), (
            f"fp32 GEMMs and convolutions take {us / 1e3:.1f} ms a step on {spec.model}, which has "
            f"{'bf16 and TF32' if spec.supports('tf32') else better} tensor cores; at {ATTAINABLE:.0%} of the "
            f"{better} peak ({(spec.peak_tflops.get(better) or 0):g} TFLOP/s) they would take {fast_us / 1e3:.1f} ms. "
            "Run them under torch.autocast(dtype=torch.bfloat16) (training: with the model's loss in fp32), or at "
            "least enable TF32: torch.backends.cuda.matmul.allow_tf32 = True and "
            "torch.backends.cudnn.allow_tf32 = True." if spec.supports("tf32") else
            f"Run them under torch.autocast(dtype=torch.{better.replace('fp', 'float')})."))
        )
    _add_gemm_kind(out, counted, gpus, "unaligned", spec, 0.1, (
        "GEMMs with a dimension not a multiple of 8 pad tensor-core tiles inside the kernel: pad hidden sizes, "
        "vocabulary and batch x sequence to multiples of 8 (64 for the best tiles)."))
    _add_gemm_kind(out, counted, gpus, "small", spec, 0.5, (
        "GEMMs under a 256-cube of work leave most SMs idle: batch them (a larger batch, torch.bmm over the small "
        "products, or fuse layers), or capture the step with CUDA graphs so launch gaps vanish."))
    eager = sum(c.eager_attention_us for c in counted) / gpus
    if eager > 0:
        out.append(Inefficiency("eager_attention", eager, eager * ATTAINABLE, (
            "Attention scores are materialised and softmaxed in memory ([B, H, L, S] tensors): "
            "torch.nn.functional.scaled_dot_product_attention (FlashAttention / memory-efficient kernels) computes "
            "the same without writing them out.")))
    elementwise_us = sum(c.elementwise_us for c in counted) / gpus
    elementwise_bytes = sum(c.elementwise_bytes for c in counted) / gpus
    bandwidth = spec.memory_bandwidth_bytes_per_s
    if elementwise_us > 0 and bandwidth:
        at_roofline_us = elementwise_bytes / (ATTAINABLE * bandwidth) * 1e6
        # Fusion removes the round trips between ops: half the bytes of a chain is a modest, stated assumption.
        saving = max(elementwise_us - at_roofline_us / 2, 0.0)
        out.append(Inefficiency("elementwise_chains", elementwise_us, saving, (
            f"Elementwise kernels take {elementwise_us / 1e3:.1f} ms a step and move "
            f"{elementwise_bytes / 1e9:.2f} GB; each reads and writes memory on its own. torch.compile fuses chains "
            "of them into one kernel (saving assumes fusion halves the bytes, at "
            f"{ATTAINABLE:.0%} of {bandwidth / 1e12:.2f} TB/s).")))
    return tuple(i for i in out if i.saving_us_per_step >= MIN_SAVING_SHARE * step_us)


def _add_gemm_kind(out: list[Inefficiency], counted: Sequence[RankEfficiency], gpus: int, kind: str,
                   spec: GpuSpec, saving_share: float, advice: str) -> None:
    rows = [g for c in counted for g in c.gemms if g.kind == kind]
    if not rows:
        return
    us = sum(g.gpu_us for g in rows) / gpus
    example = next((g.example for g in rows if g.example), "")
    code = "unaligned_gemm" if kind == "unaligned" else "small_gemm"
    out.append(Inefficiency(code, us, us * saving_share,  # type: ignore[arg-type]
                            f"{advice} (e.g. {example}; {saving_share:.0%} of their time is the stated saving)"))


TITLES = {
    "fp32_gemm": "Run fp32 GEMMs on the tensor cores (bf16 autocast or TF32)",
    "unaligned_gemm": "Pad GEMM dimensions to multiples of 8",
    "small_gemm": "Batch small GEMMs",
    "eager_attention": "Use scaled_dot_product_attention instead of eager attention",
    "elementwise_chains": "Fuse memory-bound elementwise chains with torch.compile",
}


def recommendations(eff: Efficiency | None) -> tuple[Recommendation, ...]:
    """One recommendation per inefficiency, its step saving the roofline saving over the step time."""
    if eff is None or not eff.step_time_us:
        return ()
    return tuple(Recommendation(
        code=i.code, title=TITLES[i.code], detail=i.detail,
        est_step_saving=min(i.saving_us_per_step / eff.step_time_us, 1.0),
        reasoning=(f"roofline: {i.gpu_us_per_step / 1e3:.1f} ms a step now, {i.saving_us_per_step / 1e3:.1f} ms "
                   f"saved at {ATTAINABLE:.0%} of the better ceiling, over a {eff.step_time_us / 1e3:.1f} ms step"),
        stage="gpu_compute") for i in eff.inefficiencies)


def efficiency_facts(facts: JobFacts, eff: Efficiency | None) -> JobFacts:
    """The facts with the run's model FLOPs, peak, MFU and unmodelled share (one value each, for every view)."""
    if eff is None:
        return facts
    return replace(facts, model_flops_per_step=eff.model_flops_per_step, peak_flops=eff.peak_flops, mfu=eff.mfu,
                   unmodelled_share=eff.unmodelled_share)


def mfu_gap(report: CostReport | None, eff: Efficiency | None) -> CostReport | None:
    """The cost report with the gap between MFU and the attainable target priced: (1 - MFU / target) x cost; none
    for an MFU above 100% (flagged: no gap can be priced from it)."""
    if report is None or eff is None or eff.mfu is None or eff.mfu_flag is not None or not eff.attainable_mfu:
        return report
    base = report.projected_usd if report.projected_usd is not None else report.total_usd
    gap = max(1.0 - eff.mfu / eff.attainable_mfu, 0.0)
    return replace(report, target_mfu=eff.attainable_mfu, mfu_gap_usd=None if base is None else gap * base)
