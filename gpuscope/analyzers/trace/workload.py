"""Is a rank training or serving? From what its trace ran, not from what it was called.

Training runs backward and an optimizer: autograd's ``...Backward0`` functions and
``autograd::engine::evaluate_function`` ranges, ``Optimizer.step#``/``Optimizer.zero_grad#`` ranges, and
kernels named for their backward pass (``batch_norm_backward_kernel``, ``dgrad``/``wgrad`` convolutions),
which a GPU-only trace still shows. Serving frameworks name themselves in host ranges and Python frames
(vLLM, SGLang, TorchServe, Triton's Python backend, TensorRT-LLM). A trace with host ops and none of the
training signs is forward only: inference. A trace that shows neither (no host ops, no backward kernels)
says nothing: None.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from gpuscope.model.rank import Workload
from gpuscope.model.trace import CPU_KINDS, Kind, RankTrace

_TRAINING_HOST = re.compile(r"Backward\d*$|^autograd::engine::evaluate_function|^Optimizer\.(?:step|zero_grad)#"
                            r"|^## backward ##$|^aten::_fused_(?:adam|adamw|sgd|adagrad)")
_TRAINING_KERNEL = ("backward", "dgrad", "wgrad", "bwd_", "_bwd")
_SERVING = re.compile(r"vllm|sglang|torchserve|ts/torch_handler|tensorrt_llm|triton_python_backend|"
                      r"execute_model|capture_\d+_(?:DECODE|PREFILL|FULL)", re.IGNORECASE)


def workload(trace: RankTrace) -> tuple[Workload | None, str]:
    """The rank's workload and the evidence for it, in a few words."""
    host_training = trace.name_mask(lambda s: _TRAINING_HOST.search(s) is not None, *CPU_KINDS)
    if host_training.any():
        return "training", _first(trace, host_training)
    kernel_training = trace.name_mask(lambda s: any(p in s.lower() for p in _TRAINING_KERNEL), Kind.KERNEL)
    if kernel_training.any():
        return "training", _first(trace, kernel_training)
    serving = trace.name_mask(lambda s: _SERVING.search(s) is not None, *CPU_KINDS)
    if serving.any():
        return "inference", _first(trace, serving)
    if trace.events.mask(Kind.CPU_OP).any():
        return "inference", "forward ops only: no backward, no optimizer step"
    return None, ""


def _first(trace: RankTrace, mask: npt.NDArray[np.bool_]) -> str:
    idx = np.flatnonzero(mask)
    name = trace.names[int(trace.events.name_id[idx[0]])]
    return name if len(name) <= 80 else name[:79] + "…"
