"""FLOPs and bytes of one operator call from its recorded inputs (docs/efficiency.md says how each is counted).

A multiply-add is 2 FLOPs, as ``torch.utils.flop_counter`` counts it. Bytes are the inputs read and the output
written once (the least a kernel must move), so intensity is an upper bound and the roofline share a lower one.
An op this module cannot count returns None and is reported as unmodelled, never guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from gpuscope.analyzers.efficiency.inputs import Inputs
from gpuscope.model.efficiency import OpClass

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpCost:
    """One call's work: its class, FLOPs, bytes moved, the peak type its matrix work runs in, and (for GEMMs)
    the (m, k, n) of one of its products, for the tile and size checks."""

    op_class: OpClass
    flops: float
    bytes: float
    dtype: str | None
    mnk: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Hints:
    """What a convolution without ``Concrete Inputs`` needs from elsewhere in the trace: its output's shape, from
    the matching backward call or the op that consumed it (``count``)."""

    conv_output: Shape | None = None


def _prod(xs: Shape) -> int:
    return math.prod(xs)


def _gemm(flops: float, a: Inputs, ins: tuple[int, ...], out_numel: int, mnk: tuple[int, int, int]) -> OpCost:
    read = sum(a.tensor_bytes(i) for i in ins)
    return OpCost("gemm", flops, read + out_numel * a.element_bytes(ins[-1]), a.dtype(ins[-1]), mnk)


def mm(a: Inputs, first: int = 0) -> OpCost | None:
    x, y = a.shape(first), a.shape(first + 1)
    if x is None or y is None or len(x) != 2 or len(y) != 2:
        return None
    m, k, n = x[0], x[1], y[1]
    return _gemm(2.0 * m * k * n, a, (first, first + 1), m * n, (m, k, n))


def bmm(a: Inputs, first: int = 0) -> OpCost | None:
    x, y = a.shape(first), a.shape(first + 1)
    if x is None or y is None or len(x) != 3 or len(y) != 3:
        return None
    b, m, k, n = x[0], x[1], x[2], y[2]
    return _gemm(2.0 * b * m * k * n, a, (first, first + 1), b * m * n, (m, k, n))


def matmul(a: Inputs) -> OpCost | None:
    x, y = a.shape(0), a.shape(1)
    if x is None or y is None or not x or not y:
        return None
    xm = (1, *x) if len(x) == 1 else x
    ym = (*y, 1) if len(y) == 1 else y
    m, k, n = xm[-2], xm[-1], ym[-1]
    batch = _broadcast(xm[:-2], ym[:-2])
    if batch is None:
        return None
    b = _prod(batch)
    return _gemm(2.0 * b * m * k * n, a, (0, 1), b * m * n, (m, k, n))


def linear(a: Inputs) -> OpCost | None:
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or not x or len(w) != 2:
        return None
    rows = _prod(x[:-1])
    k, n = x[-1], w[0]
    ins = (0, 1, 2) if a.shape(2) is not None else (0, 1)
    return _gemm(2.0 * rows * k * n, a, ins, rows * n, (rows, k, n))


def scaled_mm(a: Inputs) -> OpCost | None:
    cost = mm(a)
    return None if cost is None else OpCost("gemm", cost.flops, cost.bytes, "fp8", cost.mnk)


def _broadcast(x: Shape, y: Shape) -> Shape | None:
    out = []
    for i in range(1, max(len(x), len(y)) + 1):
        p, q = (x[-i] if i <= len(x) else 1), (y[-i] if i <= len(y) else 1)
        if p != q and 1 not in (p, q):
            return None
        out.append(max(p, q))
    return tuple(reversed(out))


def conv_flops(out: Shape, weight: Shape, *, transposed: bool = False, inp: Shape | None = None) -> float:
    """2 x N x C_out x out-positions x (C_in / groups) x kernel for a convolution; a transposed one is the
    convolution it is the gradient of (by its input's positions)."""
    if transposed and inp is not None:
        return 2.0 * inp[0] * weight[0] * _prod(inp[2:]) * weight[1] * _prod(weight[2:])
    return 2.0 * out[0] * out[1] * _prod(out[2:]) * weight[1] * _prod(weight[2:])


def conv_output(inp: Shape, weight: Shape, stride: Shape, padding: Shape, dilation: Shape) -> Shape | None:
    spatial = len(inp) - 2
    s, p, d = (_expand(v, spatial) for v in (stride, padding, dilation))
    if s is None or p is None or d is None or len(weight) != len(inp):
        return None
    sizes = [(inp[2 + i] + 2 * p[i] - d[i] * (weight[2 + i] - 1) - 1) // s[i] + 1 for i in range(spatial)]
    return None if min(sizes, default=1) <= 0 else (inp[0], weight[0], *sizes)


def _expand(v: Shape, n: int) -> Shape | None:
    return v * n if len(v) == 1 else v if len(v) == n else None


def convolution(a: Inputs, hints: Hints, *, params: tuple[int, int, int] = (3, 4, 5),
                transposed_at: int | None = None, transposed: bool = False) -> OpCost | None:
    """A convolution: ``params`` are where its stride, padding and dilation are among the inputs."""
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None or len(x) < 3 or len(w) != len(x):
        return None
    transposed = transposed or (bool(a.flag(transposed_at)) if transposed_at is not None else False)
    out = hints.conv_output
    if out is None and not transposed:
        stride, padding, dilation = (a.ints(i) for i in params)
        if stride is not None and padding is not None and dilation is not None:
            out = conv_output(x, w, stride, padding, dilation)
    if transposed:
        flops = conv_flops((), w, transposed=True, inp=x)
        out_numel = 0 if out is None else _prod(out)
    elif out is None:
        return None
    else:
        flops, out_numel = conv_flops(out, w), _prod(out)
    read = a.tensor_bytes(0) + a.tensor_bytes(1)
    return OpCost("convolution", flops, read + out_numel * a.element_bytes(0), a.dtype(0))


def conv_backward(a: Inputs, *, grad_at: int, weight_at: int, input_at: int, mask_at: int | None) -> OpCost | None:
    g, w, x = a.shape(grad_at), a.shape(weight_at), a.shape(input_at)
    if g is None or w is None or len(w) != len(g):
        return None
    mask = a.value(mask_at) if mask_at is not None else None
    grads = sum(bool(m) for m in mask[:2]) if isinstance(mask, list) and len(mask) >= 2 else 2
    moved = a.tensor_bytes(grad_at) + a.tensor_bytes(weight_at) + (a.tensor_bytes(input_at) if x else 0)
    return OpCost("convolution", grads * conv_flops(g, w), 2 * moved, a.dtype(grad_at))


def attention(a: Inputs, causal_at: int, *, backward: bool = False, first: int = 0,
              layout: str = "bhle") -> OpCost | None:
    """Scaled dot-product attention: Q K^T and P V, 2 x B x H x L x S x (E + Ev) FLOPs forward, twice that backward
    (four products); half of it under a causal mask, where the other half of the scores is never computed."""
    q, k, v = a.shape(first), a.shape(first + 1), a.shape(first + 2)
    if q is None or k is None or v is None or len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    if layout == "blhe":
        q, k, v = ((t[0], t[2], t[1], t[3]) for t in (q, k, v))
    b, h, length, e = q
    s, ev = k[2], v[3]
    flops = 2.0 * b * h * length * s * (e + ev) * (2 if backward else 1)
    if a.flag(causal_at):
        flops /= 2
    moved = sum(a.tensor_bytes(first + i) for i in range(3)) + b * h * length * ev * a.element_bytes(first)
    return OpCost("attention", flops, moved * (2 if backward else 1), a.dtype(first))


def normalization(a: Inputs, flops_per_element: float, *, backward: bool = False) -> OpCost | None:
    x = a.shape(0)
    if x is None:
        return None
    n = _prod(x)
    moved = (3 if backward else 2) * n * a.element_bytes(0)
    return OpCost("normalization", flops_per_element * n * (2 if backward else 1), moved, a.dtype(0))


def softmax(a: Inputs, *, backward: bool = False) -> OpCost | None:
    x = a.shape(0)
    if x is None:
        return None
    n = _prod(x)
    return OpCost("softmax", 5.0 * n, (3 if backward else 2) * n * a.element_bytes(0), a.dtype(0))


def elementwise(a: Inputs) -> OpCost | None:
    tensors = [i for i in range(len(a.dims)) if a.shape(i) is not None]
    if not tensors:
        return None
    shapes = [a.shape(i) or () for i in tensors]
    out: Shape | None = shapes[0]
    for s in shapes[1:]:
        out = _broadcast(out, s) if out is not None else None
    if out is None:
        return None
    n = _prod(out)
    read = sum(a.tensor_bytes(i) for i in tensors)
    return OpCost("elementwise", float(n), read + n * a.element_bytes(tensors[0]), a.dtype(tensors[0]))


ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "neg", "exp", "log", "sqrt", "rsqrt",
    "pow", "where", "masked_fill", "clamp", "clamp_min", "clamp_max", "threshold", "threshold_backward",
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "hardtanh", "leaky_relu", "abs",
    "reciprocal", "addcmul", "addcdiv", "lerp", "fill", "zero", "erf", "sin", "cos", "square", "maximum",
    "minimum", "native_dropout", "dropout",
})
_NAME = re.compile(r"^aten::(\w+?)(_)?$")

Model = Callable[[Inputs, Hints], "OpCost | None"]
MODELS: dict[str, Model] = {
    "aten::mm": lambda a, h: mm(a), "aten::addmm": lambda a, h: mm(a, 1), "aten::bmm": lambda a, h: bmm(a),
    "aten::baddbmm": lambda a, h: bmm(a, 1), "aten::matmul": lambda a, h: matmul(a),
    "aten::linear": lambda a, h: linear(a), "aten::_scaled_mm": lambda a, h: scaled_mm(a),
    "aten::conv1d": lambda a, h: convolution(a, h), "aten::conv2d": lambda a, h: convolution(a, h),
    "aten::conv3d": lambda a, h: convolution(a, h),
    "aten::convolution": lambda a, h: convolution(a, h, transposed_at=6),
    "aten::_convolution": lambda a, h: convolution(a, h, transposed_at=6),
    "aten::cudnn_convolution": lambda a, h: convolution(a, h, params=(3, 2, 4)),
    "aten::conv_transpose1d": lambda a, h: convolution(a, h, transposed=True),
    "aten::conv_transpose2d": lambda a, h: convolution(a, h, transposed=True),
    "aten::conv_transpose3d": lambda a, h: convolution(a, h, transposed=True),
    "aten::convolution_backward": lambda a, h: conv_backward(a, grad_at=0, input_at=1, weight_at=2, mask_at=10),
    "aten::cudnn_convolution_backward": lambda a, h: conv_backward(a, grad_at=1, input_at=0, weight_at=2,
                                                                   mask_at=None),
    "aten::scaled_dot_product_attention": lambda a, h: attention(a, 5),
    "aten::_scaled_dot_product_flash_attention": lambda a, h: attention(a, 4),
    "aten::_scaled_dot_product_efficient_attention": lambda a, h: attention(a, 6),
    "aten::_scaled_dot_product_cudnn_attention": lambda a, h: attention(a, 6),
    "aten::_flash_attention_forward": lambda a, h: attention(a, 6, layout="blhe"),
    "aten::_scaled_dot_product_flash_attention_backward": lambda a, h: attention(a, 11, backward=True, first=1),
    "aten::_scaled_dot_product_efficient_attention_backward": lambda a, h: attention(a, 11, backward=True,
                                                                                     first=1),
    "aten::_scaled_dot_product_cudnn_attention_backward": lambda a, h: attention(a, 12, backward=True, first=1),
    "aten::layer_norm": lambda a, h: normalization(a, 5.0), "aten::native_layer_norm": lambda a, h: normalization(
        a, 5.0), "aten::rms_norm": lambda a, h: normalization(a, 4.0),
    "aten::batch_norm": lambda a, h: normalization(a, 4.0), "aten::group_norm": lambda a, h: normalization(a, 5.0),
    "aten::native_layer_norm_backward": lambda a, h: normalization(a, 5.0, backward=True),
    "aten::native_batch_norm_backward": lambda a, h: normalization(a, 4.0, backward=True),
    "aten::cudnn_batch_norm_backward": lambda a, h: normalization(a, 4.0, backward=True),
    "aten::softmax": lambda a, h: softmax(a), "aten::_softmax": lambda a, h: softmax(a),
    "aten::log_softmax": lambda a, h: softmax(a), "aten::_log_softmax": lambda a, h: softmax(a),
    "aten::_softmax_backward_data": lambda a, h: softmax(a, backward=True),
    "aten::_log_softmax_backward_data": lambda a, h: softmax(a, backward=True),
}
"""Ops counted whole (a parent of these is not counted, a child of them never)."""


def op_cost(name: str, inputs: Inputs, hints: Hints = Hints()) -> OpCost | None:
    """The work of one call of ``name`` with ``inputs``; None when the op is not modelled or its inputs do not
    say enough."""
    model = MODELS.get(name)
    if model is not None:
        return model(inputs, hints)
    match = _NAME.match(name)
    if match is not None and match.group(1) in ELEMENTWISE:
        return elementwise(inputs)
    return None


def is_modelled(name: str) -> bool:
    """Whether ``name`` is an op this module counts (its inputs may still not say enough)."""
    match = _NAME.match(name)
    return name in MODELS or (match is not None and match.group(1) in ELEMENTWISE)
