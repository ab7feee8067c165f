"""Families of kernels and host operators: what a kernel or an operator does, whatever its exact name.

Two runs of one model rarely share every kernel name: another GPU, cuDNN or cuBLAS version picks other GEMM and
convolution kernels for the same layers, and a DataLoader with workers has another iterator class. A diff matches
names first and then families, and splits compute time by family.
"""

from __future__ import annotations

import re

from gpuscope.analyzers.trace import classify

# Tested in this order on the lower-case name: the first family whose parts occur wins. Convolutions before GEMMs
# (cuDNN's implicit-GEMM convolutions carry "gemm" in their names), attention before both (FlashAttention's kernels
# are GEMMs too), normalization before convolution (cuDNN's batch-norm kernels carry "cudnn"), optimizers before
# elementwise (multi_tensor_apply is elementwise by construction).
_KERNEL_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("flash", "fmha", "attention", "attn", "sdpa", "cudnn::fusion")),
    ("normalization", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "layer_norm", "layernorm", "rms_norm",
                       "rmsnorm", "group_norm", "instance_norm")),
    ("convolution", ("conv", "cudnn", "fprop", "dgrad", "wgrad", "implicit_", "winograd", "scudnn", "hcudnn",
                     "gtcx", "igemm")),
    ("gemm", ("gemm", "gemv", "cublas", "cutlass", "matmul", "nvjet", "cijk_", "_mm_", "splitk")),
    ("softmax", ("softmax",)),
    ("optimizer", ("multi_tensor_apply", "adam", "fused_sgd", "sgd_", "optimizer")),
    ("pooling", ("pool",)),
    ("triton (torch.compile)", ("triton_",)),
    ("reduction", ("reduce", "_sum", "mean_", "argmax", "argmin", "norm_kernel", "cub::")),
    ("copy and index", ("copy", "cat_", "catarray", "index", "gather", "scatter", "embedding", "transpose",
                        "permute", "fill")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise", "relu", "gelu", "silu", "sigmoid",
                     "tanh", "dropout", "add", "mul")),
)
MEMORY_FAMILY = "memory"
COMMUNICATION_FAMILY = "communication"
OTHER_FAMILY = "other"

# The DataLoader's iterator class says whether it had workers; both are the DataLoader's next batch.
_DATALOADER = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#")
_OPTIMIZER = re.compile(r"^Optimizer\.(\w+)#")
_OVERLOAD = re.compile(r"\.(default|Tensor|Scalar|out|int|float)$")


def kernel_family(name: str, *, communication: bool = False, memory: bool = False) -> str:
    """The family of a GPU kernel (or memcpy/memset: ``memory``), from its name; collectives are
    ``communication`` (``classify.is_comm_kernel`` when not told)."""
    if memory:
        return MEMORY_FAMILY
    if communication or classify.is_comm_kernel(name):
        return COMMUNICATION_FAMILY
    lower = name.lower()
    for family, parts in _KERNEL_FAMILIES:
        if any(part in lower for part in parts):
            return family
    return OTHER_FAMILY


def operator_family(name: str) -> str:
    """A host operator's family: the DataLoader's next batch whatever its iterator, an optimizer's step or
    zero_grad whatever the optimizer, an aten operator without its overload, else the name up to its ``#``."""
    match = _DATALOADER.match(name)
    if match:
        return f"enumerate({match.group(1)}) next batch"
    match = _OPTIMIZER.match(name)
    if match:
        return f"Optimizer.{match.group(1)}"
    return _OVERLOAD.sub("", name.split("#", 1)[0]) or name
