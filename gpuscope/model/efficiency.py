"""Useful work, not busy time: the FLOPs and bytes a rank's operators did (from their recorded shapes), per kernel
family against the GPU's roofline, and the run's model FLOPs utilisation (MFU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OpClass = Literal["gemm", "convolution", "attention", "normalization", "softmax", "elementwise"]
DEFAULT_TARGET_MFU = 0.4
"""The MFU the cost section prices the gap to unless the user sets one (``--target-mfu``, config.toml): what
well-tuned dense training reaches on today's GPUs (large models 40-50%; small models and inference less)."""
MODEL_CLASSES: tuple[OpClass, ...] = ("gemm", "convolution", "attention")
"""The classes whose FLOPs are model FLOPs (matrix work, as MFU is conventionally counted); the others are memory
bound and enter the roofline by their bytes."""
Algorithm = Literal["direct", "winograd", "fft", "sparse"]
"""How a matrix op's kernels did its work, from their names: the direct product counted, or an algorithm that does
fewer multiplications than it (Winograd and FFT convolutions, 2:4 structured sparsity)."""
FlagKind = Literal["above_peak", "above_bandwidth", "above_100"]
Cause = Literal["winograd", "fft", "sparsity", "tf32", "shapes", "cache", "untimed", "peak"]


@dataclass(frozen=True)
class CeilingFlag:
    """A figure physics does not allow, shown as this flag instead of the bare figure: what is above its ceiling
    and the likely cause.

    Causes: ``winograd``/``fft``/``sparsity`` the kernels did fewer multiplications than the direct product counted
    (the model's FLOPs are still the direct count); ``tf32`` fp32 work ran on tensor cores (kernel names that do not
    say so), above the fp32 peak it is measured against; ``shapes`` the recorded shapes imply more work than the
    kernels' time allows (shapes that do not match the kernels, or work done by kernels not recorded against the
    op); ``cache`` the bytes counted were served from the GPU's caches, not its memory; ``untimed`` FLOPs of ops
    whose kernels the trace did not record; ``peak`` the GPU may not be the one the trace names."""

    kind: FlagKind
    cause: Cause
    detail: str


@dataclass(frozen=True)
class OpRate:
    """One operator at one recorded shape and type, over a rank's steady steps per step: its FLOPs and the time of
    the kernels it launched. A rank keeps its fastest (``RankEfficiency.rates``), for the check against the peak."""

    op: str
    shape: str
    """Its ``Input Dims`` as recorded (shortened)."""
    dtype: str | None
    calls: int
    flops: float
    gpu_us: float
    algorithm: Algorithm = "direct"


@dataclass(frozen=True)
class FamilyWork:
    """One kernel family's work over a rank's steady steps: what its kernels did and the time they took."""

    family: str
    gpu_us: float
    """Time of the family's kernels that counted operators launched (the modelled ones)."""
    flops: float
    bytes: float
    dtype: str | None = None
    """The type most of its FLOPs ran in; None without FLOPs (and in reports saved before it existed)."""
    fast_algorithm_flops: float = 0.0
    """Of ``flops``, those of ops whose kernels did fewer multiplications than counted (``Algorithm``)."""
    fast_algorithm: Algorithm = "direct"
    """Which algorithm did most of ``fast_algorithm_flops``."""


@dataclass(frozen=True)
class UnmodelledOp:
    """An operator whose FLOPs cannot be worked out from its recorded inputs, and the GPU time it launched."""

    name: str
    calls: int
    gpu_us: float


@dataclass(frozen=True)
class GemmWork:
    """Matrix work of one kind (by its inputs' type and what is wasted), over the steady steps."""

    kind: Literal["fp32", "unaligned", "small"]
    """fp32: fp32 GEMMs/convolutions (tensor cores left idle unless TF32 is on); unaligned: GEMM dims not multiples
    of 8 (tensor-core tiles padded inside); small: GEMMs too small to fill the GPU (under ``SMALL_GEMM_FLOPS``)."""
    calls: int
    flops: float
    gpu_us: float
    example: str = ""
    """One of the shapes, e.g. "mm [32, 1000] x [1000, 2048]"."""


@dataclass(frozen=True)
class RankEfficiency:
    """One rank's operators' work over its steady steps (per step where the rank has profiler steps)."""

    steps: int
    """Steady profiler steps the totals cover; 0: the steady span without profiler steps."""
    model_flops: float
    """FLOPs of GEMMs, convolutions and attention over the steady steps (forward and backward), each op counted once."""
    flops_by_dtype: tuple[tuple[str, float], ...]
    """``model_flops`` split by the peak type that applies ("fp32", "tf32", "bf16", "fp16", "fp8", ...)."""
    kernel_gpu_us: float
    """Time of compute kernels (not communication, copies or memsets) over the steady steps."""
    unmodelled_gpu_us: float
    """Of ``kernel_gpu_us``, what operators that cannot be modelled launched."""
    families: tuple[FamilyWork, ...] = ()
    unmodelled: tuple[UnmodelledOp, ...] = ()
    """The unmodelled operators with the most GPU time, most first."""
    gemms: tuple[GemmWork, ...] = ()
    eager_attention_us: float = 0.0
    """GPU time of softmax over materialised attention scores ([B, H, L, S], L and S >= 64) with no fused attention
    in the rank: eager attention, which SDPA / FlashAttention does without writing the scores out."""
    elementwise_us: float = 0.0
    elementwise_bytes: float = 0.0
    shapes_recorded: bool = True
    """False: the trace has no recorded shapes (``record_shapes=False``), so nothing could be counted."""
    step_flops: tuple[tuple[str, float], ...] = ()
    """``model_flops`` of each steady profiler step, by the step's name (its number): the calls that started inside
    the step's own ProfilerStep span, on any thread. The job's FLOPs per step are taken over the steps its step time
    is the mean of (``JobFacts.step_time_us``: outlier steps left out). Empty without profiler steps, and in reports
    saved before it existed."""
    recomputed_flops: float = 0.0
    """FLOPs of GEMMs, convolutions and attention re-run in backward for checkpointed activations
    (``analyzers.efficiency.recompute``), per step: hardware FLOPs, not in ``model_flops``."""
    step_recomputed_flops: tuple[tuple[str, float], ...] = ()
    """``recomputed_flops`` of each step, by the names of ``step_flops``."""
    rates: tuple[OpRate, ...] = ()
    """The fastest operators at a shape (FLOPs over their kernels' time), most first: where work above the peak
    would show (``analyzers.efficiency.ceiling``)."""
    untimed_flops: float = 0.0
    """Of ``model_flops``, those of calls that launched no kernel the trace recorded (no time to check them by)."""


@dataclass(frozen=True)
class FamilyRoofline:
    """One kernel family against the roofline of the run's GPU, per GPU over the steady steps."""

    family: str
    gpu_us: float
    flops: float
    bytes: float
    achieved_tflops: float | None
    achieved_tb_s: float | None
    intensity: float | None
    """FLOPs per byte moved; None without bytes."""
    roofline_tflops: float | None
    """What the roofline allows at this intensity: min(peak, intensity x bandwidth); None without a spec."""
    roofline_share: float | None
    """Achieved over ``roofline_tflops`` (0..1); None where either is unknown."""
    bound: Literal["compute", "memory"] | None = None
    """Which ceiling the intensity is under."""
    dtype: str | None = None
    """The type whose peak its roofline is under: the one most of its FLOPs ran in, or the run's where that one has
    no peak (int64 indexing, bool masks)."""
    flag: CeilingFlag | None = None
    """Set where the achieved TFLOP/s is above the peak or the TB/s above the bandwidth: every view shows the flag
    and its cause instead of the share."""


@dataclass(frozen=True)
class OpWork:
    """One operator's work over every call of it whose FLOPs could be worked out (``gpuscope ops``), against the
    roofline of the run's GPU at the operator's own type. An operator that is modelled itself is counted at its own
    inputs; one that is not (a module, an autograd node) sums the counted operators inside it."""

    calls: int
    """Calls with a count (of all the operator's calls)."""
    flops: float
    bytes: float
    gpu_us: float
    """GPU total time (its own kernels and those of everything nested in it) of those calls."""
    dtype: str | None
    """The type most of its FLOPs ran in ("fp32", "tf32", "bf16", ...)."""
    achieved_tflops: float | None
    achieved_tb_s: float | None
    intensity: float | None
    roofline_tflops: float | None
    """min(peak for ``dtype``, intensity x bandwidth); None for a GPU not in the spec table or a type it has no
    peak for."""
    roofline_share: float | None
    bound: Literal["compute", "memory"] | None = None
    recomputed_flops: float = 0.0
    """Of ``flops``, those of calls re-run for a checkpointed activation (hardware FLOPs, not the model's)."""
    flag: CeilingFlag | None = None
    """Set where the achieved figures are above the GPU's ceilings: shown instead of the share."""


@dataclass(frozen=True)
class AboveCeiling:
    """An operator at one shape whose FLOPs over its kernels' time are above the peak for its type."""

    op: str
    shape: str
    dtype: str | None
    achieved_tflops: float
    peak_tflops: float
    flops_per_step: float
    gpu_us_per_step: float
    """The time of its kernels a step."""
    flag: CeilingFlag
    in_mfu: bool
    """Kept in MFU (the FLOPs are the model's; the kernels did fewer multiplications) or left out (the FLOPs
    cannot be right)."""


@dataclass(frozen=True)
class Inefficiency:
    """Kernels doing their work well below what the GPU could: what they are, what to change, what it saves."""

    code: Literal["fp32_gemm", "unaligned_gemm", "small_gemm", "eager_attention", "elementwise_chains"]
    gpu_us_per_step: float
    saving_us_per_step: float
    """Their time minus the time at the attainable fraction of the better ceiling (the roofline saving)."""
    detail: str


@dataclass(frozen=True)
class PipeUse:
    """What DCGM's profiling counters say a GPU's SMs did, each a share of time (0..1) averaged over the GPU's
    samples; None where dcgm-exporter did not give the field (not scraped, or a GPU without profiling counters)."""

    sm_active: float | None
    """DCGM_FI_PROF_SM_ACTIVE: the share of time at least one warp was resident, averaged over the SMs."""
    tensor_active: float | None
    """DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: the share of cycles the tensor (matrix) pipes were busy."""
    sm_occupancy: float | None = None
    """DCGM_FI_PROF_SM_OCCUPANCY: resident warps over the most an SM can hold."""
    dram_active: float | None = None
    """DCGM_FI_PROF_DRAM_ACTIVE: the share of cycles the memory interface was busy."""

    @property
    def tensor_share_of_sm(self) -> float | None:
        """Tensor-pipe activity over SM activity: how much of the time the SMs work goes to the tensor cores."""
        if self.tensor_active is None or not self.sm_active:
            return None
        return min(self.tensor_active / self.sm_active, 1.0)


@dataclass(frozen=True)
class Efficiency:
    """The run's useful work: model FLOPs per step, the peak they are measured against, MFU, and the roofline."""

    model_flops_per_step: float | None
    """Summed over ranks, per steady step (the forward and backward the model needs: no re-run for checkpointed
    activations; no operator whose FLOPs are above what its kernels' time allows, ``left_out_flops_per_step``); None
    without recorded shapes."""
    peak_flops: float | None
    """Per GPU, dense, for ``peak_dtype``; None for a GPU not in the spec table."""
    peak_dtype: str | None
    peak_source: str | None
    """The spec table's source line for the peak (datasheet, date read, URL)."""
    gpu_model: str | None
    """The spec table entry ("V100 SXM2 32GB"), or the device name where none matched."""
    gpus: int
    """The GPUs the counted ranks ran on (MFU's divisor); 0 for a CPU job."""
    mfu: float | None
    """model_flops_per_step / (step_time x gpus x peak_flops); None with ``mfu_note`` saying why."""
    mfu_note: str | None
    step_time_us: float | None
    """The step time MFU divides by: ``Report.facts.step_time_us``."""
    unmodelled_share: float | None
    """GPU time of unmodelled operators over all compute kernel time (0..1)."""
    families: tuple[FamilyRoofline, ...] = ()
    unmodelled: tuple[UnmodelledOp, ...] = ()
    inefficiencies: tuple[Inefficiency, ...] = ()
    memory_bandwidth_bytes_per_s: float | None = None
    attainable_mfu: float | None = None
    """The MFU target the cost section prices the gap to (``--target-mfu``, default ``DEFAULT_TARGET_MFU``)."""
    target_mfu_source: str | None = None
    """Where the target was set: "--target-mfu", the config file, or the default."""
    hardware_flops_per_step: float | None = None
    """``model_flops_per_step`` plus the forward work re-run for checkpointed activations (PaLM's hardware FLOPs);
    None without recorded shapes (and in reports saved before it existed)."""
    hfu: float | None = None
    """hardware_flops_per_step / (step_time x gpus x peak_flops), the same left-out work excluded; None where MFU
    is."""
    left_out_flops_per_step: float = 0.0
    """FLOPs per step of operators above the peak for a reason that makes their count wrong (``above_ceiling``),
    left out of the FLOPs per step, MFU and HFU."""
    above_ceiling: tuple[AboveCeiling, ...] = ()
    """Operators whose achieved FLOP/s is above the peak, with the cause; fastest first."""
    mfu_flag: CeilingFlag | None = None
    """Set where MFU (after what is left out) is still above 100%: the views show it instead of the figure."""
    hfu_flag: CeilingFlag | None = None
