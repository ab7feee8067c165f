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
# Kernels that run on tensor cores (matrix cores on ROCm), by the names their libraries give them (lower case):
# cuBLAS/cuDNN/CUTLASS 2 (884/1688/16816 MMA shapes, hmma/imma/wmma/xmma, tensorop), Hopper wgmma and
# CUTLASS 3 / cuBLAS sm90+ GEMMs (gmma, sm90_xmma), cuBLASLt's Hopper/Blackwell "nvjet_*" GEMMs,
# FlashAttention (flash_fwd/flash_bwd, fmha), ROCm Tensile/hipBLASLt "Cijk_*_MI16x16x1_*" MFMA kernels,
# composable_kernel "xdl"/"mfma" kernels and MIOpen's xdlops iGEMM ("gtcx").
_TENSOR_CORE_PARTS = ("884", "1688", "16816", "hmma", "imma", "wmma", "xmma", "gmma", "tensorop", "_tc_", "bf16",
                      "f16f16", "ampere_fp16", "nvjet", "flash_fwd", "flash_bwd", "fmha", "mfma", "_xdl", "gtcx")
_MFMA_SHAPE = re.compile(r"_mi\d+x\d+x\d+")
"""Tensile's MFMA instruction shape in a kernel name (Cijk_..._MI16x16x1_...): a matrix-core kernel."""
# Kernels that would run on tensor cores under AMP/TF32: fp32 GEMMs and convolutions (lower case).
_TC_ELIGIBLE_PARTS = ("gemm", "conv", "cudnn", "cublas", "cutlass", "matmul", "wgrad", "dgrad", "implicit_",
                      "cijk_", "attn", "attention")
# Element types below fp32 in kernel names: template arguments (c10::BFloat16, __half), library type tags
# (bf16, f16, e4m3), Tensile's data-type letters for half/bf16 inputs (Cijk_..._HB_, _BBS_, _HHS_).
_LOW_PRECISION_PARTS = ("bfloat16", "bf16", "half", "fp16", "f16", "float16", "e4m3", "e5m2", "fp8", "int8",
                        "_hb_", "_bbs_", "_hhs_", "_bss_", "_hss_")
# The element types and kernel families a kernel's name says it computes with, which not every GPU has (lower
# case). bf16: template arguments (c10::BFloat16, cutlass::bfloat16_t), library type tags (bf16) and Tensile's
# data-type letters for bf16 inputs (_BBS_, _BSS_); fp16 likewise once bf16's names are taken out (__half, f16,
# _HHS_, _HSS_); fp8: the e4m3/e5m2 formats of fp8 matmuls (fbgemm's software "hfp8" conversions need no fp8
# units); tf32: cuBLAS/cuDNN's Ampere-and-newer tf32 kernels and hipBLASLt's xf32.
_BF16_PARTS = ("bfloat16", "bf16", "_bbs_", "_bss_")
_FP16_PARTS = ("half", "fp16", "f16", "float16", "_hhs_", "_hss_")
_FP8_PARTS = ("e4m3", "e5m2")
_TF32_PARTS = ("tf32", "xf32")
# FlashAttention 2 kernels (the flash-attention library's flash_fwd_*/flash_bwd_* kernels, PyTorch's
# scaled_dot_product_attention flash backend pytorch_flash::flash_fwd_kernel): Ampere (sm80) or newer.
# FlashAttention 3 (flash::FlashAttnFwdSm90 / FlashAttnBwdSm90): Hopper's wgmma and TMA, sm90 only.
_FLASH2_PARTS = ("flash_fwd", "flash_bwd")
_FLASH3 = re.compile(r"flash\w*sm9\d")
# Optimizers with a fused implementation in torch.optim (constructor argument ``fused``, torch 2.x).
FUSED_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
# torch.optim optimizers with a multi-tensor (``foreach``) implementation but no fused one.
FOREACH_OPTIMIZERS = frozenset({"ASGD", "Adadelta", "Adafactor", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop"})
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


def is_allreduce_kernel(name: str) -> bool:
    """A collective kernel whose name says all-reduce (ncclKernel_AllReduce_*, ncclDevKernel_AllReduce_*,
    multimem_all_reduce, one/two_shot_all_reduce, cross_device_reduce, ...); NCCL's generic kernels do not say."""
    lower = name.lower().replace("_", "")
    return "allreduce" in lower or "crossdevicereduce" in lower


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
    if lower.startswith("cijk_") and _MFMA_SHAPE.search(lower) is not None:
        return True
    return (any(arch in lower for arch in ("sm90", "sm100", "sm120")) and ("gemm" in lower or "conv" in lower)) \
        or ("cutlass" in lower and "tensor" in lower)


def is_tensor_core_eligible(name: str) -> bool:
    lower = name.lower()
    return any(part in lower for part in _TC_ELIGIBLE_PARTS)


def is_low_precision_kernel(name: str) -> bool:
    """The kernel's name says it computes in a type below fp32 (fp16, bf16, fp8, int8)."""
    lower = name.lower()
    return any(part in lower for part in _LOW_PRECISION_PARTS)


def kernel_features(name: str) -> frozenset[str]:
    """What a kernel's name says it needs of the GPU: the element types "bf16", "fp16", "fp8", "tf32", and
    "flash_attention_2" or "flash_attention_3" (see ``analyzers.trace.needs``)."""
    lower = name.lower()
    found: set[str] = set()
    if any(part in lower for part in _BF16_PARTS):
        found.add("bf16")
    rest = lower.replace("bfloat16", "").replace("bf16", "")
    if any(part in rest for part in _FP16_PARTS):
        found.add("fp16")
    if any(part in lower for part in _FP8_PARTS):
        found.add("fp8")
    if any(part in lower for part in _TF32_PARTS):
        found.add("tf32")
    if _FLASH3.search(lower):
        found.add("flash_attention_3")
    elif any(part in lower for part in _FLASH2_PARTS):
        found.add("flash_attention_2")
    return frozenset(found)


def is_graph_launch(name: str) -> bool:
    """A CUDA/HIP graph launch: the kernels it starts were captured once and are replayed without launches."""
    return name in ("cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch")


def is_sync_runtime(name: str) -> bool:
    return _SYNC_RUNTIME.search(name) is not None


def is_launch_runtime(name: str) -> bool:
    return _LAUNCH_RUNTIME.search(name) is not None


def is_pageable_memcpy(name: str) -> bool:
    return "Pageable" in name
