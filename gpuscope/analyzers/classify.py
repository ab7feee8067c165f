"""What an event name says it is. Each rule is tested once per distinct name (see RankTrace.name_mask)."""

from __future__ import annotations

import re

# Collective kernels of every naming era: NCCL before 2.19 (ncclKernel_*), NCCL 2.19+ (ncclDevKernel_*),
# RCCL (same names on ROCm), and PyTorch's symmetric-memory / custom all-reduce kernels. Plain substring
# tests: kernel names are C++ templates of up to kilobytes, where an unanchored regex crawls.
_COMM_KERNEL_PARTS = ("multimem_all_reduce", "multimem_all_gather", "multimem_reduce_scatter", "one_shot_all_reduce",
                      "two_shot_all_reduce", "cross_device_reduce", "all_reduce_kernel", "allreduce_kernel")
# Host-side collective ops (TensorBoard plugin: NCCL/Gloo collectives count as communication).
_COLLECTIVE_OP = re.compile(
    r"^(?:nccl|gloo|rccl|mpi):|^c10d::|^record_param_comms$|^ProcessGroup(?:NCCL|Gloo)?::",
    re.IGNORECASE,
)
# Kernels that run on tensor cores, by the names cuBLAS/cuDNN/CUTLASS give them (lower case).
_TENSOR_CORE_PARTS = ("884", "1688", "16816", "hmma", "imma", "wmma", "xmma", "gmma", "tensorop", "_tc_", "bf16",
                      "f16f16", "ampere_fp16")
# Kernels that would run on tensor cores under AMP/TF32: fp32 GEMMs and convolutions (lower case).
_TC_ELIGIBLE_PARTS = ("gemm", "conv", "cudnn", "cublas", "cutlass", "matmul", "wgrad", "dgrad", "implicit_")
_SYNC_RUNTIME = re.compile(
    r"^(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|Memset|MemcpyDtoH|MemcpyHtoD)$"
    r"|^cu(?:CtxSynchronize|StreamSynchronize|EventSynchronize|MemcpyDtoH_v2|MemcpyHtoD_v2)$"
)
_LAUNCH_RUNTIME = re.compile(r"^(?:cuda|hip)(?:LaunchKernel|LaunchKernelExC|ExtModuleLaunchKernel|ModuleLaunchKernel)"
                             r"|^cuLaunchKernel|^cudaGraphLaunch|^hipGraphLaunch")


def is_comm_kernel(name: str) -> bool:
    lower = name.lower()
    if ("nccl" in lower or "rccl" in lower) and "kernel" in lower:
        return True
    return any(part in lower for part in _COMM_KERNEL_PARTS)


def is_collective_op(name: str) -> bool:
    return _COLLECTIVE_OP.search(name) is not None


def is_dataloader_op(name: str) -> bool:
    if name.startswith("enumerate(DataLoader)#"):
        return name.endswith(".__next__")
    return name.startswith("enumerate(DataPipe)#")


def is_tensor_core_kernel(name: str) -> bool:
    lower = name.lower()
    if any(part in lower for part in _TENSOR_CORE_PARTS):
        return True
    return ("sm90_" in lower and ("gemm" in lower or "conv" in lower)) or ("cutlass" in lower and "tensor" in lower)


def is_tensor_core_eligible(name: str) -> bool:
    lower = name.lower()
    return any(part in lower for part in _TC_ELIGIBLE_PARTS)


def is_sync_runtime(name: str) -> bool:
    return _SYNC_RUNTIME.search(name) is not None


def is_launch_runtime(name: str) -> bool:
    return _LAUNCH_RUNTIME.search(name) is not None


def is_pageable_memcpy(name: str) -> bool:
    return "Pageable" in name
