"""What a rank ran in its steady steps, name by name, and the set-up its trace records: what a diff compares.

Kept per rank in ``RankReport.profile`` so that a saved report (a gate baseline, a run in the store) can be
compared with a new one without its trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscope.model.gpu import Vendor


@dataclass(frozen=True)
class NameTime:
    """One kernel (or memcpy/memset) or host operator name: its calls and time over the steady steps."""

    name: str
    family: str
    """Kernels: "gemm", "convolution", "attention", "communication", "memory" ...; operators: the operator with
    what varies between versions of it left out (e.g. the DataLoader iterator's class)."""
    count: int
    total_us: float
    """Summed durations (operators: inclusive of the operators they call)."""


@dataclass(frozen=True)
class NameTable:
    """The names with the most time, most first, and what the rest add up to."""

    rows: tuple[NameTime, ...] = ()
    rest_names: int = 0
    """Names left out of ``rows``."""
    rest_count: int = 0
    rest_us: float = 0.0
    rest_max_us: float = 0.0
    """The largest ``total_us`` of a name left out: a name not in ``rows`` ran at most this long (0: none left
    out, the table is complete)."""
    rest_families_us: tuple[tuple[str, float], ...] = ()
    """``rest_us`` by family, so a split by family covers every name."""

    @property
    def total_us(self) -> float:
        return sum(r.total_us for r in self.rows) + self.rest_us


Profiler = Literal["kineto", "nsys"]
PROFILER_NAMES: dict[str, str] = {"kineto": "PyTorch profiler", "nsys": "Nsight Systems"}
PROFILER_ATTR = "profiler"
"""The ``RankTrace.attrs`` key a reader other than Kineto's names itself under (Kineto's traces leave it out)."""


@dataclass(frozen=True)
class ModelInput:
    """The first call of the model's first layer (a convolution, linear, matmul or embedding) in the trace, as
    recorded with ``record_shapes=True``: its inputs' shapes and element types."""

    op: str
    shapes: str
    """The ``Input Dims`` list as the trace gives it, e.g. "[[32, 3, 224, 224], [64, 3, 7, 7], [], ...]"."""
    types: tuple[str, ...] = ()
    """The ``Input type`` list, e.g. ("float", "float", "", ...)."""

    @property
    def batch(self) -> str:
        """The first input's shape: the batch as the model sees it, e.g. "[32, 3, 224, 224]"."""
        text = self.shapes.strip()
        if text.startswith("[[") and "]" in text:
            return text[1:text.index("]") + 1]
        return text


@dataclass(frozen=True)
class RankSetup:
    """What the rank's trace says of how the job was set up; None where it does not say."""

    cuda_runtime: str | None = None
    """The CUDA runtime version in the trace's metadata, e.g. "12.1"."""
    cuda_driver: str | None = None
    dataloader: str | None = None
    """"in-process (num_workers=0)" or "worker processes (num_workers>0)", from the DataLoader iterator's class."""
    nccl_algorithms: tuple[str, ...] = ()
    """Collective, algorithm and protocol from the NCCL kernels' names, e.g. "AllReduce RING LL"."""
    torch_compile: bool | None = None
    """Code compiled by torch.compile ran (compiled regions, compiled graphs, Triton kernels); None for a trace
    without host operators."""
    model_input: ModelInput | None = None
    dtypes: tuple[str, ...] = ()
    """Floating-point element types among the host operators' inputs (``record_shapes``), e.g. ("float32",)."""
    vendor: Vendor | None = None
    """Whose GPU the rank ran on ("nvidia", "amd"), from the device name, runtime calls and kernels
    (``analyzers.trace.vendor``); None for a trace that shows no GPU."""
    gpu_needs: tuple[str, ...] | None = None
    """What the rank's work needs of a GPU beyond fp32 ("bf16", "fp16", "fp8", "tf32", "flash_attention_2",
    "flash_attention_3"), from operators' input types and kernel names (``analyzers.trace.needs``); empty for work
    in fp32 alone; None in reports saved before it was recorded."""
    profiler: Profiler | None = None
    """What recorded the trace: "kineto" (the PyTorch profiler) or "nsys" (Nsight Systems, which records no
    operators' shapes, no allocator events and no DataLoader); None in reports saved before it was recorded."""


@dataclass(frozen=True)
class RankProfile:
    """Kernels and operators of the rank's steady steps (warm-up left out), and its set-up."""

    steps: int
    """Steady profiler steps the totals cover; 0 without profiler steps (then they cover ``window_us``)."""
    window_us: float
    kernels: NameTable
    """GPU kernels, memcpy and memset, by name."""
    operators: NameTable
    """Host operators and ``record_function`` ranges (ProfilerStep excluded), by name."""
    setup: RankSetup
