"""What a trace's work needs of a GPU beyond fp32: the element types and kernels that not every GPU has.

A model that runs bf16 kernels does not run them on a V100 or a T4 (no bf16 units), one whose attention runs
FlashAttention 2 kernels needs an Ampere-or-newer GPU, FlashAttention 3 a Hopper one, fp8 matmuls an Ada, Hopper
or MI300-class GPU, and TF32 kernels a GPU with TF32 tensor cores. Two sources tell: the host operators' input
types (Kineto's ``Input type``, with ``record_shapes``), and the kernels' own names
(``classify.kernel_features``). The first covers every operator of the model; names cover only the kernels whose
libraries spell their types, so a trace without input types may use more than its names show
(``RankSetup.dtypes`` empty says so).
"""

from __future__ import annotations

import numpy as np

from gpuscope.analyzers.trace import classify
from gpuscope.model.trace import Kind, Precision, RankTrace

FEATURES: tuple[str, ...] = ("bf16", "fp16", "fp8", "tf32", "flash_attention_2", "flash_attention_3")
"""Everything ``gpu_needs`` may name, in the order it names them."""
_BY_PRECISION: dict[int, frozenset[str]] = {
    Precision.BF16: frozenset({"bf16"}),
    Precision.FP16: frozenset({"fp16"}),
    Precision.FP8: frozenset({"fp8"}),
    # A run stored before fp16 and bf16 were told apart: either; the stricter one is what a GPU must support.
    Precision.HALF: frozenset({"fp16", "bf16"}),
}


def gpu_needs(trace: RankTrace) -> tuple[str, ...]:
    """The features (from ``FEATURES``) the rank's operators and kernels use, anywhere in the trace."""
    ev = trace.events
    found: set[str] = set()
    for p in np.unique(ev.precision[ev.mask(Kind.CPU_OP)]).tolist():
        found |= _BY_PRECISION.get(int(p), frozenset())
    for i in ev.name_ids(Kind.KERNEL).tolist():
        found |= classify.kernel_features(trace.names[i])
    return tuple(f for f in FEATURES if f in found)
