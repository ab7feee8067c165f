"""Physics as a ceiling: work whose achieved FLOP/s is above the GPU's peak for its type, or whose bytes/s are
above its memory bandwidth, is flagged with its likely cause instead of shown bare; operators whose FLOPs cannot be
right are left out of MFU, and an MFU still above 100% is flagged too.

Rates here are over the sum of the kernels' own durations (never an op's host time, never a union over streams),
so kernels that overlap on several streams cannot lift them: what is above a ceiling is the count (the shapes, the
algorithm the kernels used, the bytes model) or the ceiling (the type, the GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpuscope.model.efficiency import AboveCeiling, Algorithm, Cause, CeilingFlag, RankEfficiency
from gpuscope.model.gpu_spec import DTYPES, GpuSpec

KEPT_CAUSES = frozenset({"winograd", "fft", "sparsity", "tf32"})
"""Causes whose FLOPs are still the model's (the kernels did the work in fewer multiplications, or the peak is the
wrong one): kept in MFU. The rest (``shapes``) cannot be right and are left out."""
_ALGORITHM_WORDS: dict[Algorithm, tuple[Cause, str]] = {
    "winograd": ("winograd", "Winograd convolutions (cuDNN, MIOpen), which do fewer multiplications than the direct "
                             "convolution counted (2.25x fewer for F(2x2, 3x3) tiles, 4x for F(4x4, 3x3))"),
    "fft": ("fft", "FFT convolutions, which do fewer multiplications than the direct convolution counted"),
    "sparse": ("sparsity", "2:4 structured-sparse kernels, which do half the multiplications of the dense product"),
}


def peak_of(spec: GpuSpec | None, dtype: str | None) -> float | None:
    """The GPU's dense peak (FLOP/s) for ``dtype``; None where unknown."""
    if spec is None or dtype is None:
        return None
    return next((spec.peak_flops(d) for d in DTYPES if d == dtype), None)


@dataclass(frozen=True)
class Work:
    """A piece of work to hold against the ceilings: its FLOPs, bytes and kernels' time, the type its FLOPs ran in,
    and the FLOPs of it done by an algorithm of fewer multiplications (and which)."""

    what: str
    flops: float
    bytes: float
    gpu_us: float
    dtype: str | None
    fast_flops: float = 0.0
    algorithm: Algorithm = "direct"


def flag(work: Work, spec: GpuSpec | None, *, suspect_peak: bool = False) -> CeilingFlag | None:
    """The flag for ``work`` above the peak for its type or above the memory bandwidth; None where it is under
    both, or where they are not known. ``suspect_peak``: the run's operators say the GPU is not the one named
    (``above_ceiling``), so work above the peak is told so, not blamed on its shapes."""
    if spec is None or work.gpu_us <= 0:
        return None
    seconds = work.gpu_us / 1e6
    peak = peak_of(spec, work.dtype)
    if peak and work.flops / seconds > peak:
        found = _above_peak(work, spec, peak, work.flops / seconds)
        if suspect_peak and found.cause == "shapes":
            return CeilingFlag("above_peak", "peak", f"{_head(work, spec, peak, work.flops / seconds)}: "
                                                     f"{_PEAK_WORDS}")
        return found
    bandwidth = spec.memory_bandwidth_bytes_per_s
    if bandwidth and work.bytes / seconds > bandwidth:
        return CeilingFlag("above_bandwidth", "cache", (
            f"{work.what}: {work.bytes / seconds / 1e12:,.2f} TB/s, above the {bandwidth / 1e12:,.3g} TB/s of "
            f"{spec.model}'s memory: the bytes counted (each input read and each output written once) were partly "
            "served from the GPU's caches (small tensors, re-read inputs), or the recorded shapes do not match the "
            "kernels' time"))
    return None


_PEAK_WORDS = "as is most of the matrix kernels' time: the GPU is likely not the one the trace names"


def _head(work: Work, spec: GpuSpec, peak: float, achieved: float) -> str:
    return (f"{work.what}: {achieved / 1e12:,.1f} TFLOP/s, above the {work.dtype} peak of {peak / 1e12:,.4g} "
            f"TFLOP/s of {spec.model}")


def _above_peak(work: Work, spec: GpuSpec, peak: float, achieved: float) -> CeilingFlag:
    head = _head(work, spec, peak, achieved)
    if work.fast_flops > 0 and work.algorithm in _ALGORITHM_WORDS:
        direct_rate = (work.flops - work.fast_flops) / (work.gpu_us / 1e6)
        if direct_rate <= peak:
            cause, words = _ALGORITHM_WORDS[work.algorithm]
            return CeilingFlag("above_peak", cause, f"{head}: its kernels are {words}; the model's FLOPs are "
                               "the direct count, kept in MFU")
    tf32 = spec.peak_flops("tf32")
    if work.dtype == "fp32" and tf32 and achieved <= tf32:
        return CeilingFlag("above_peak", "tf32", (
            f"{head}, under its TF32 tensor-core peak of {tf32 / 1e12:,.4g}: the fp32 work ran as TF32 (kernels whose "
            "names do not say so), so the fp32 peak is the wrong ceiling"))
    return CeilingFlag("above_peak", "shapes", (
        f"{head}: the recorded shapes imply more work than the kernels' time allows (Input Dims that do not match "
        "the kernels, or work done by kernels not recorded against the operator); such FLOPs are left out of MFU"))


MOSTLY = 0.5
"""Above the peak for over half the time of the matrix kernels: the peak is the wrong one (another GPU than the
trace names), not the shapes of so many operators. (By time: a count that cannot be right would hold most of the
FLOPs however few its kernels.)"""
MATRIX_FAMILIES = frozenset({"gemm", "convolution", "attention"})


def above_ceiling(ranks: Sequence[RankEfficiency], spec: GpuSpec | None) -> tuple[AboveCeiling, ...]:
    """Each rank's fastest operators at a shape that are above the peak for their type, fastest first. Where those
    whose shapes would be the cause hold most of the model's FLOPs, the cause is the peak instead: kept in MFU, which
    then shows above 100% and is flagged."""
    rows = _above(ranks, spec)
    matrix_us = sum(f.gpu_us for r in ranks for f in r.families if f.family in MATRIX_FAMILIES)
    shapes_us = sum(a.gpu_us_per_step for a in rows if a.flag.cause == "shapes")
    if spec is None or not matrix_us or shapes_us <= MOSTLY * matrix_us:
        return rows
    return tuple(replace(a, in_mfu=True, flag=CeilingFlag("above_peak", "peak", (
        f"{a.op} at {a.shape}: {a.achieved_tflops:,.1f} TFLOP/s, above the {a.dtype} peak of {a.peak_tflops:,.4g} "
        f"TFLOP/s of {spec.model}, as are operators that take {shapes_us / matrix_us:.0%} of the matrix kernels' "
        "time: the GPU is likely not the one the trace names"))) if a.flag.cause == "shapes" else a for a in rows)


def peak_suspected(above: Sequence[AboveCeiling]) -> bool:
    """The run's operators above the peak say the GPU is not the one named."""
    return any(a.flag.cause == "peak" for a in above)


def _above(ranks: Sequence[RankEfficiency], spec: GpuSpec | None) -> tuple[AboveCeiling, ...]:
    out = []
    for rank in ranks:
        for r in rank.rates:
            what = f"{r.op} at {r.shape}"  # the op's name and shape: text from the trace, escaped by every view
            work = Work(what, r.flops, 0.0, r.gpu_us, r.dtype,
                        fast_flops=r.flops if r.algorithm != "direct" else 0.0, algorithm=r.algorithm)
            found = flag(work, spec)
            peak = peak_of(spec, r.dtype)
            if found is None or found.kind != "above_peak" or peak is None:
                continue
            out.append(AboveCeiling(op=r.op, shape=r.shape, dtype=r.dtype, achieved_tflops=r.flops / r.gpu_us / 1e6,
                                    peak_tflops=peak / 1e12, flops_per_step=r.flops, gpu_us_per_step=r.gpu_us,
                                    flag=found,
                                    in_mfu=found.cause in KEPT_CAUSES))
    return tuple(sorted(out, key=lambda a: -a.achieved_tflops))


def utilisation_flag(name: str, value: float | None, *, untimed_share: float, dtype: str | None,
                     spec: GpuSpec | None, kept: Sequence[AboveCeiling]) -> CeilingFlag | None:
    """The flag for an MFU or HFU (``name``) above 100%; None at or under it."""
    if value is None or value <= 1.0:
        return None
    head = f"{name} is above 100%"
    if untimed_share > 0.0:
        return CeilingFlag("above_100", "untimed", (
            f"{head}: {untimed_share:.0%} of the model FLOPs are of operators whose kernels the trace did not record "
            "(CUDA-graph replays, kernels outside the profile), so no kernel time bounds them"))
    tf32 = spec.peak_flops("tf32") if spec is not None else None
    fp32 = spec.peak_flops("fp32") if spec is not None else None
    if dtype == "fp32" and tf32 and fp32 and value * fp32 / tf32 <= 1.0:
        return CeilingFlag("above_100", "tf32", f"{head} of the fp32 peak: the fp32 work ran as TF32 on tensor "
                                                 f"cores ({value * fp32 / tf32:.1%} of the TF32 peak)")
    fast = next((a for a in kept if a.flag.cause in ("winograd", "fft", "sparsity")), None)
    if fast is not None:
        return CeilingFlag("above_100", fast.flag.cause, f"{head}: {fast.flag.detail}")
    return CeilingFlag("above_100", "peak", (
        f"{head}: more FLOPs than the GPU can do in the step time at its peak; the GPU may not be the one the trace "
        "names, or the recorded shapes do not match the work"))
