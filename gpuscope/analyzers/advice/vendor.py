"""The vendor's words: what advice calls the collective library, graphs, runtime calls and tools on the GPUs a job
ran on. Decided once per job from what each rank's trace said (``RankSetup.vendor``), else from the GPUs' names
(a live run); every advice text reads ``Words``, so a ROCm job is told of RCCL, HIP graphs and
``HIP_VISIBLE_DEVICES``, never of NCCL or CUDA graphs.

PyTorch keeps its CUDA-named API on ROCm (``torch.cuda``, ``torch.autocast('cuda')``, the backend name
``'nccl'``, which runs RCCL there): advice quotes those names as they are, since they are what a user types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.analyzers.trace.vendor import name_vendor
from gpuscope.model.gpu import GpuInfo, Vendor
from gpuscope.model.rank import RankReport


@dataclass(frozen=True)
class Words:
    """How advice names one vendor's software."""

    vendor: Vendor
    collectives: str
    """The collective library: "NCCL", "RCCL"."""
    collective_tests: str
    """Its bandwidth benchmarks: "nccl-tests", "rccl-tests"."""
    graphs: str
    """"CUDA graphs", "HIP graphs"."""
    device_sync: str
    """The runtime's device-wide sync: "cudaDeviceSynchronize", "hipDeviceSynchronize"."""
    sync_copies: str
    """The runtime's blocking copy and set calls."""
    visible_devices: str
    """The environment variable that picks the GPUs a process sees."""
    smi: str
    """The command-line tool that shows the GPUs and what runs on them."""
    topology: str
    """Its command that shows how the GPUs are connected."""
    matrix_units: str
    """"tensor cores", "matrix cores"."""
    runtime: str = "CUDA"
    """The GPU runtime: "CUDA", "HIP"."""
    kernel_tuning: str = "cuDNN autotuning"
    """The convolution library's first-call search for its fastest algorithms."""
    graph_capture: str = "CUDA-graph capture"
    """Recording a graph of kernels to replay."""


NVIDIA = Words(vendor="nvidia", collectives="NCCL", collective_tests="nccl-tests",
               graphs="CUDA graphs", device_sync="cudaDeviceSynchronize", sync_copies="cudaMemcpy/cudaMemset",
               visible_devices="CUDA_VISIBLE_DEVICES", smi="nvidia-smi", topology="nvidia-smi topo -m",
               matrix_units="tensor cores")
AMD = Words(vendor="amd", collectives="RCCL", collective_tests="rccl-tests", graphs="HIP graphs",
            device_sync="hipDeviceSynchronize", sync_copies="hipMemcpy/hipMemset",
            visible_devices="HIP_VISIBLE_DEVICES", smi="amd-smi (or rocm-smi)",
            topology="amd-smi topology (or rocm-smi --showtopo)", matrix_units="matrix cores", runtime="HIP",
            kernel_tuning="MIOpen's kernel search", graph_capture="HIP-graph capture")


def words(vendor: Vendor | None) -> Words:
    """The words for ``vendor``; NVIDIA's where the vendor is unknown (most traces without a device name are)."""
    return AMD if vendor == "amd" else NVIDIA


def collectives(vendor: Vendor | None, backends: set[str]) -> str:
    """The job's collective library as its user names it: the process group's backend where it is not NCCL's
    ("gloo"), else RCCL on AMD GPUs and NCCL otherwise."""
    if backends and "nccl" not in backends:
        return ", ".join(sorted(backends))
    return words(vendor).collectives


def job_vendor(ranks: Sequence[RankReport], gpus: Sequence[GpuInfo] = ()) -> Vendor | None:
    """The job's vendor: the one its ranks' traces name (``RankSetup.vendor``); for ranks that do not say (reports
    saved before it was recorded) or a run without traces, the one its GPUs' names name. None when none tells, or
    the sources disagree."""
    seen = {r.profile.setup.vendor for r in ranks if r.profile is not None and r.profile.setup.vendor is not None}
    if not seen:
        names = [r.device for r in ranks] + [g.name for g in gpus]
        seen = {v for v in map(name_vendor, names) if v is not None}
    return seen.pop() if len(seen) == 1 else None
