"""What a GPU model can do at most: its memory, memory bandwidth and dense peak rate per data type, with the datasheet
the figures come from (gpuscope/data/gpu_specs.json, extended in config.toml; ``gpuscope.specs`` reads them)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

Dtype = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]
"""The data types a peak is given for. ``tf32`` is fp32 inputs on tensor cores; ``int8`` is in TOPS."""
DTYPES: tuple[Dtype, ...] = get_args(Dtype)
GB = 10**9
"""Datasheet memory and bandwidth are decimal: 80 GB is 80e9 bytes, 3.35 TB/s is 3.35e12 bytes a second."""
TERA = 10**12


@dataclass(frozen=True)
class PeakTflops:
    """Dense (no 2:4 sparsity) peak rate per data type in TFLOP/s (int8: TOPS), the highest the datasheet gives for
    that type (tensor or matrix cores where the GPU has them). None: the GPU has no such rate, or none is known."""

    fp64: float | None = None
    fp32: float | None = None
    """NVIDIA: the CUDA-core rate (fp32 matmuls on tensor cores are ``tf32``)."""
    tf32: float | None = None
    bf16: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None

    def get(self, dtype: Dtype) -> float | None:
        value: float | None = getattr(self, dtype)
        return value

    def known(self) -> tuple[tuple[Dtype, float], ...]:
        """The data types with a peak, in ``DTYPES`` order."""
        return tuple((d, v) for d in DTYPES if (v := self.get(d)) is not None)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's datasheet figures and where they come from.

    ``match`` holds regular expressions over the normalized device name (lower case, vendor words dropped, split on
    '-', '_', '/': "NVIDIA A100-SXM4-80GB" -> "a100 sxm4 80gb"), as in the price catalog.
    """

    model: str
    """The table's own name, e.g. "A100 SXM 80GB", "H100 NVL", "MI300X"."""
    vendor: Literal["nvidia", "amd"]
    arch: str
    """Architecture family: "Volta", "Ampere", "Hopper", "Blackwell", "CDNA 3"."""
    compute_capability: str | None
    """NVIDIA: CUDA compute capability ("8.0"); AMD: the gfx target ("gfx942")."""
    form_factor: str
    """"SXM4", "PCIe", "PCIe (NVLink bridge)", "OAM", "Superchip (NVL72)"..."""
    interconnect: Literal["NVLink", "PCIe", "Infinity Fabric"]
    """How this form factor's GPUs talk to each other."""
    memory_gb: float
    memory_bandwidth_gb_s: float | None
    peak_tflops: PeakTflops
    source: str
    """The datasheet (or page) the figures were read from."""
    url: str | None
    read: str | None
    """The date the source was read, "YYYY-MM-DD"."""
    match: tuple[str, ...] = ()
    checked: str | None = None
    """How the figures were checked against a second source, or why they could not be."""
    note: str | None = None
    """What a reader must know: which figures are halved from sparse ones, which are unknown and why."""
    unrated_dtypes: tuple[Dtype, ...] = ()
    """Types the GPU runs natively although no peak for them is on record (the A10G's bf16 and TF32)."""
    device_bytes: int | None = None
    """The memory the driver reports to CUDA or ROCm (``totalGlobalMem``: ``torch.cuda.get_device_properties()
    .total_memory``, a profiler trace's deviceProperties): what the allocator can have, a little under the
    datasheet's decimal GB (79.2 GiB on an H100 SXM sold as 80 GB). None where no recording of it is on record."""
    device_bytes_source: str | None = None
    """Where ``device_bytes`` was read (a recording, with the name it reported)."""

    @property
    def memory_bytes(self) -> int:
        """The datasheet's size in bytes (decimal GB)."""
        return int(self.memory_gb * GB)

    @property
    def usable_memory(self) -> tuple[int, str]:
        """The device's size as a run on it sees it, and where that comes from: the driver-reported bytes where on
        record, else the datasheet's decimal GB (a little more than the driver reports), said so."""
        if self.device_bytes is not None:
            return self.device_bytes, f"{self.model} in the GPU spec table, as the driver reports it"
        return self.memory_bytes, (f"{self.model} in the GPU spec table: the datasheet's {self.memory_gb:g} GB (no "
                                   "driver-reported size on record; the driver reports a little less)")

    @property
    def memory_bandwidth_bytes_per_s(self) -> float | None:
        return None if self.memory_bandwidth_gb_s is None else self.memory_bandwidth_gb_s * GB

    def peak_flops(self, dtype: Dtype) -> float | None:
        """Dense peak in FLOP/s (int8: operations/s) for ``dtype``; None where the GPU has none or it is unknown."""
        tflops = self.peak_tflops.get(dtype)
        return None if tflops is None else tflops * TERA

    def supports(self, dtype: Dtype) -> bool:
        """Whether the GPU runs ``dtype`` natively (bf16, TF32, fp8 tensor cores...): it has a peak for it, or is
        known to run it without one on record (``unrated_dtypes``). V100 and T4 have no bf16 or TF32, Ampere no fp8."""
        return self.peak_tflops.get(dtype) is not None or dtype in self.unrated_dtypes

    @property
    def source_line(self) -> str:
        """How the figures are cited in every view: "<source>, read <date>: <url>"."""
        read = f", read {self.read}" if self.read else ""
        url = f": {self.url}" if self.url else ""
        return f"{self.source}{read}{url}"


PEAK_FIELDS = tuple(f.name for f in fields(PeakTflops))
