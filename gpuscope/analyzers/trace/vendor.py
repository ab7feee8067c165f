"""Whose GPU a trace ran on, NVIDIA's (CUDA) or AMD's (ROCm/HIP), decided once per trace.

ROCm builds of PyTorch write the same Kineto categories as CUDA builds (``cuda_runtime``, ``kernel``) and report
device type CUDA, so the category says nothing. What does: the device name in ``deviceProperties`` ("AMD Instinct
MI210", "NVIDIA H100 80GB HBM3", "Tesla V100-DGXS-32GB"), then the runtime calls' names (``hipLaunchKernel`` and
``hipDeviceSynchronize`` on ROCm, ``cudaLaunchKernel`` and ``cuLaunchKernel`` on CUDA), then library kernel names
that exist on one platform only (rocBLAS/hipBLASLt Tensile ``Cijk_*``, MIOpen ``igemm_*gtcx*``, ROCclr's
``__amd_rocclr_*`` against cuBLAS/cuDNN's ``volta_``/``ampere_``/``sm80_`` and ``nvjet_`` kernels). The first that
tells decides; a trace none of them tells about (a CPU-only trace) has no vendor.
"""

from __future__ import annotations

import re
from collections import Counter

from gpuscope.model.gpu import Vendor
from gpuscope.model.trace import Kind, RankTrace

_AMD_NAME = re.compile(r"\b(?:amd|instinct|radeon)\b|\bmi\d{2,3}[a-z]*\b", re.IGNORECASE)
_NVIDIA_NAME = re.compile(r"\b(?:nvidia|tesla|geforce|quadro|rtx|titan|jetson)\b|\b(?:[abhklptv]|gb|gh)\d{1,3}[a-z]?\b",
                          re.IGNORECASE)
_AMD_KERNEL = re.compile(r"^Cijk_|gtcx|^__amd_rocclr_|\bck::|_ck_|rccl", re.IGNORECASE)
_NVIDIA_KERNEL = re.compile(r"^(?:volta|turing|ampere|hopper|sm\d{2,3})_|nvjet_|cudnn|cublas|nccl(?:Dev)?Kernel")


def name_vendor(name: str | None) -> Vendor | None:
    """The vendor a GPU model name (NVML, ``deviceProperties``, the price catalog) names; None when it names neither.

    "AMD Instinct MI300X VF", "MI210" -> amd; "NVIDIA A100 80GB PCIe", "Tesla T4", "H100 NVL" -> nvidia."""
    if not name or not name.strip():
        return None
    if _AMD_NAME.search(name):
        return "amd"
    return "nvidia" if _NVIDIA_NAME.search(name) else None


def trace_vendor(trace: RankTrace) -> Vendor | None:
    """The vendor of the GPU a rank ran on: by its device name, else its runtime calls, else its kernels' names."""
    named = {v for v in (name_vendor(g.name) for g in trace.gpus) if v is not None}
    if len(named) == 1:
        return named.pop()
    ev = trace.events
    runtime = Counter(_runtime_vendor(trace.names[i]) for i in ev.name_ids(Kind.RUNTIME).tolist())
    runtime.pop(None, None)
    if runtime:
        return runtime.most_common(1)[0][0]
    kernels = Counter(_kernel_vendor(trace.names[i]) for i in ev.name_ids(Kind.KERNEL).tolist())
    kernels.pop(None, None)
    return kernels.most_common(1)[0][0] if kernels else None


def _runtime_vendor(name: str) -> Vendor | None:
    if name.startswith("hip"):
        return "amd"
    return "nvidia" if name.startswith("cu") else None


def _kernel_vendor(name: str) -> Vendor | None:
    if _AMD_KERNEL.search(name):
        return "amd"
    return "nvidia" if _NVIDIA_KERNEL.search(name) else None
