"""What an event name says it is. Each rule is tested once per distinct name (see RankTrace.name_mask)."""

from __future__ import annotations

import re

# Collective kernels of every naming era: NCCL before 2.19 (ncclKernel_*), NCCL 2.19+ (ncclDevKernel_*),
# RCCL (same names on ROCm), and PyTorch's symmetric-memory / custom all-reduce kernels.
_COMM_KERNEL = re.compile(
    r"^(?:void\s+)?(?:\w+::)*(?:nccl|rccl)\w*(?:Kernel|_kernel)"
    r"|ncclDevKernel|ncclKernel"
    r"|multimem_(?:all_reduce|all_gather|reduce_scatter)"
    r"|(?:one|two)_shot_all_reduce"
    r"|cross_device_reduce"
    r"|all_reduce_kernel|allreduce_kernel",
    re.IGNORECASE,
)
# Host-side collective ops (TensorBoard plugin: NCCL/Gloo collectives count as communication).
_COLLECTIVE_OP = re.compile(
    r"^(?:nccl|gloo|rccl|mpi):|^c10d::|^record_param_comms$|^ProcessGroup(?:NCCL|Gloo)?::",
    re.IGNORECASE,
)
_DATALOADER = re.compile(r"^enumerate\((?:DataLoader|DataPipe)\)#")
# Kernels that run on tensor cores, by the names cuBLAS/cuDNN/CUTLASS give them.
_TENSOR_CORE = re.compile(
    r"884|1688|16816|hmma|imma|wmma|xmma|gmma|wgmma|tensorop|_tc_|s16816|h16816|bf16|f16f16|ampere_fp16"
    r"|sm90_.*(?:gemm|conv)|cutlass.*tensor",
    re.IGNORECASE,
)
# Kernels that would run on tensor cores under AMP/TF32: fp32 GEMMs and convolutions.
_TC_ELIGIBLE = re.compile(r"gemm|conv|sgemm|cudnn|cublas|cutlass|matmul|wgrad|dgrad|implicit_", re.IGNORECASE)
_SYNC_RUNTIME = re.compile(
    r"^(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|Memset|MemcpyDtoH|MemcpyHtoD)$"
    r"|^cu(?:CtxSynchronize|StreamSynchronize|EventSynchronize|MemcpyDtoH_v2|MemcpyHtoD_v2)$"
)
_LAUNCH_RUNTIME = re.compile(r"^(?:cuda|hip)(?:LaunchKernel|LaunchKernelExC|ExtModuleLaunchKernel|ModuleLaunchKernel)"
                             r"|^cuLaunchKernel|^cudaGraphLaunch|^hipGraphLaunch")


def is_comm_kernel(name: str) -> bool:
    return _COMM_KERNEL.search(name) is not None


def is_collective_op(name: str) -> bool:
    return _COLLECTIVE_OP.search(name) is not None


def is_dataloader_op(name: str) -> bool:
    return _DATALOADER.search(name) is not None and (name.endswith(".__next__") or "DataPipe" in name)


def is_tensor_core_kernel(name: str) -> bool:
    return _TENSOR_CORE.search(name) is not None


def is_tensor_core_eligible(name: str) -> bool:
    return _TC_ELIGIBLE.search(name) is not None


def is_sync_runtime(name: str) -> bool:
    return _SYNC_RUNTIME.search(name) is not None


def is_launch_runtime(name: str) -> bool:
    return _LAUNCH_RUNTIME.search(name) is not None


def is_pageable_memcpy(name: str) -> bool:
    return "Pageable" in name
