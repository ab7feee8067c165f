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
from gpuscope.analyzers.efficiency.schemas import Call, bind
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


def _gemm(flops: float, c: Call, ins: tuple[str, ...], out_numel: int, mnk: tuple[int, int, int]) -> OpCost:
    read = sum(c.tensor_bytes(name) for name in ins)
    return OpCost("gemm", flops, read + out_numel * c.element_bytes(ins[-1]), c.dtype(ins[-1]), mnk)


def mm(c: Call, x_name: str = "self", y_name: str = "mat2") -> OpCost | None:
    x, y = c.shape(x_name), c.shape(y_name)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None  # shapes that cannot be multiplied are not this op's (a recording that mixed two calls)
    m, k, n = x[0], x[1], y[1]
    return _gemm(2.0 * m * k * n, c, (x_name, y_name), m * n, (m, k, n))


def bmm(c: Call, x_name: str = "self", y_name: str = "mat2") -> OpCost | None:
    x, y = c.shape(x_name), c.shape(y_name)
    if x is None or y is None or len(x) != 3 or len(y) != 3 or x[2] != y[1]:
        return None
    b, m, k, n = x[0], x[1], x[2], y[2]
    return _gemm(2.0 * b * m * k * n, c, (x_name, y_name), b * m * n, (m, k, n))


def matmul(c: Call) -> OpCost | None:
    x, y = c.shape("self"), c.shape("other")
    if x is None or y is None or not x or not y:
        return None
    xm = (1, *x) if len(x) == 1 else x
    ym = (*y, 1) if len(y) == 1 else y
    m, k, n = xm[-2], xm[-1], ym[-1]
    batch = _broadcast(xm[:-2], ym[:-2])
    if batch is None or k != ym[-2]:
        return None
    b = _prod(batch)
    return _gemm(2.0 * b * m * k * n, c, ("self", "other"), b * m * n, (m, k, n))


def linear(c: Call) -> OpCost | None:
    x, w = c.shape("input"), c.shape("weight")
    if x is None or w is None or not x or len(w) != 2 or x[-1] != w[1]:
        return None
    rows = _prod(x[:-1])
    k, n = x[-1], w[0]
    ins = ("input", "weight", "bias") if c.shape("bias") is not None else ("input", "weight")
    return _gemm(2.0 * rows * k * n, c, ins, rows * n, (rows, k, n))


def scaled_mm(c: Call) -> OpCost | None:
    cost = mm(c)
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
    convolution it is the gradient of (by its input's positions: its weight is [C_in, C_out / groups, kernel])."""
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


def conv_output_of(c: Call) -> Shape | None:
    """A forward convolution's output shape from its recorded stride, padding and dilation (``padding="valid"`` is
    none, ``"same"`` keeps the input's size); None where they are not recorded."""
    x, w = c.shape(_input(c)), c.shape("weight")
    stride, dilation = c.ints("stride"), c.ints("dilation")
    if x is None or w is None or stride is None or dilation is None:
        return None
    padding = c.ints("padding")
    mode = c.text("padding")
    if mode == "same":
        return (x[0], w[0], *x[2:])
    if mode == "valid":
        padding = (0,)
    return None if padding is None else conv_output(x, w, stride, padding, dilation)


def _input(c: Call) -> str:
    return "self" if c.at("self") >= 0 else "input"


def convolution(c: Call, hints: Hints, *, transposed: bool = False) -> OpCost | None:
    """A convolution (or a transposed one: by its ``transposed`` argument or by the op)."""
    x_name = _input(c)
    x, w = c.shape(x_name), c.shape("weight")
    if x is None or w is None or len(x) < 3 or len(w) != len(x):
        return None
    out = hints.conv_output
    flag = c.flag("transposed") if c.at("transposed") >= 0 else False
    if flag is None:  # not recorded (before Concrete Inputs): the shapes tell, where the output's is known
        flag = transposed_by_shapes(x, out, w) if out is not None else None
        if flag is None:
            return None
    transposed = transposed or flag
    if out is None and not transposed:
        out = conv_output_of(c)
    if transposed:
        flops = conv_flops((), w, transposed=True, inp=x)
        out_numel = 0 if out is None else _prod(out)
    elif out is None:
        return None
    else:
        flops, out_numel = conv_flops(out, w), _prod(out)
    read = c.tensor_bytes(x_name) + c.tensor_bytes("weight")
    return OpCost("convolution", flops, read + out_numel * c.element_bytes(x_name), c.dtype(x_name))


def transposed_by_shapes(x: Shape, out: Shape, w: Shape) -> bool | None:
    """Whether a convolution from ``x`` to ``out`` with weight ``w`` is a transposed one, from the shapes alone: a
    convolution's weight is [C_out, C_in / groups, ...], a transposed one's [C_in, C_out / groups, ...]; with as many
    channels in as out, a transposed convolution is the one that does not shrink the positions. None: the shapes
    fit neither."""
    if len(x) < 3 or len(out) != len(x) or not w[1]:
        return None
    plain = out[1] == w[0] and x[1] % w[1] == 0
    flipped = x[1] == w[0] and out[1] % w[1] == 0
    if plain != flipped:
        return flipped
    if not plain:
        return None
    return _prod(out[2:]) > _prod(x[2:])


def conv_backward(c: Call) -> OpCost | None:
    """The gradients of a convolution (``output_mask`` says which of input and weight were asked for; 2 where not
    recorded), each the forward's work; a transposed convolution's forward is counted by its gradient's input."""
    x_name = _input(c)
    g, w, x = c.shape("grad_output"), c.shape("weight"), c.shape(x_name)
    if g is None or w is None or len(w) != len(g):
        return None
    transposed = c.flag("transposed") if c.at("transposed") >= 0 else False
    if transposed is None:
        transposed = transposed_by_shapes(x, g, w) if x is not None else None
        if transposed is None:
            return None
    if transposed:
        if x is None:
            return None
        forward = conv_flops((), w, transposed=True, inp=x)
    else:
        forward = conv_flops(g, w)
    mask = c.value("output_mask")
    grads = sum(bool(m) for m in mask[:2]) if isinstance(mask, list) and len(mask) >= 2 else 2
    moved = c.tensor_bytes("grad_output") + c.tensor_bytes("weight") + (c.tensor_bytes(x_name) if x else 0)
    return OpCost("convolution", grads * forward, 2 * moved, c.dtype("grad_output"))


def attention(c: Call, *, backward: bool = False, layout: str = "bhle") -> OpCost | None:
    """Scaled dot-product attention: Q K^T and P V, 2 x B x H x L x S x (E + Ev) FLOPs forward, twice that backward
    (four products); half of it under a causal mask, where the other half of the scores is never computed. The
    mask is read by name (``is_causal``); a call that did not record its value is not counted (a guess would be 2x
    off either way)."""
    q, k, v = c.shape("query"), c.shape("key"), c.shape("value")
    if q is None or k is None or v is None or len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    causal = c.flag("is_causal")
    if causal is None:
        return None
    if layout == "blhe":
        q, k, v = ((t[0], t[2], t[1], t[3]) for t in (q, k, v))
    b, h, length, e = q
    s, ev = k[2], v[3]
    flops = 2.0 * b * h * length * s * (e + ev) * (2 if backward else 1)
    if causal:
        flops /= 2
    moved = sum(c.tensor_bytes(n) for n in ("query", "key", "value")) + b * h * length * ev * c.element_bytes("query")
    return OpCost("attention", flops, moved * (2 if backward else 1), c.dtype("query"))


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


def elementwise(a: Inputs, *, write_only: bool = False, out_variant: bool = False) -> OpCost | None:
    """One FLOP an output element; bytes: the tensor inputs read and the output written (``write_only``: a fill
    reads nothing, it writes its tensor; ``out_variant``: the last input is the ``out=`` tensor, written, not
    read)."""
    tensors = [i for i in range(len(a.dims)) if a.shape(i) is not None]
    if out_variant and len(tensors) > 1 and tensors[-1] == len(a.dims) - 1:
        tensors = tensors[:-1]
    if not tensors:
        return None
    shapes = [a.shape(i) or () for i in tensors]
    out: Shape | None = shapes[0]
    for s in shapes[1:]:
        out = _broadcast(out, s) if out is not None else None
    if out is None:
        return None
    n = _prod(out)
    read = 0 if write_only else sum(a.tensor_bytes(i) for i in tensors)
    return OpCost("elementwise", float(n), read + n * a.element_bytes(tensors[0]), a.dtype(tensors[0]))


ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "neg", "exp", "log", "sqrt", "rsqrt",
    "pow", "where", "masked_fill", "clamp", "clamp_min", "clamp_max", "threshold", "threshold_backward",
    "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "hardtanh", "leaky_relu", "abs",
    "reciprocal", "addcmul", "addcdiv", "lerp", "fill", "zero", "erf", "sin", "cos", "square", "maximum",
    "minimum", "native_dropout", "dropout",
})
WRITE_ONLY = frozenset({"fill", "zero"})
"""Elementwise ops that write their tensor without reading it."""
OUT_ARITY: dict[str, frozenset[int]] = {name: frozenset(k) for name, k in {
    "add": (4,), "sub": (4,), "mul": (3,), "div": (3, 4), "relu": (2,), "gelu": (3,), "silu": (2,),
    "sigmoid": (2,), "tanh": (2,), "neg": (2,), "exp": (2,), "log": (2,), "sqrt": (2,), "rsqrt": (2,), "pow": (3,),
    "where": (4,), "masked_fill": (4,), "clamp": (4,), "clamp_min": (3,), "clamp_max": (3,), "threshold": (4,),
    "threshold_backward": (4,), "gelu_backward": (4,), "silu_backward": (3,), "sigmoid_backward": (3,),
    "tanh_backward": (3,), "hardtanh": (4,), "leaky_relu": (3,), "abs": (2,), "reciprocal": (2,), "addcmul": (5,),
    "addcdiv": (5,), "lerp": (4,), "fill": (3,), "zero": (2,), "erf": (2,), "sin": (2,), "cos": (2,),
    "square": (2,), "maximum": (3,), "minimum": (3,)}.items()}
"""Elementwise op -> how many inputs its ``out=`` variants record (Kineto names no overload: ``relu_`` calling
``clamp_min.out`` records ``aten::clamp_min`` with the output as a third input), where no functional overload
records as many ending in a tensor; checked against torch's schemas in the tests."""
_NAME = re.compile(r"^aten::(\w+?)(_)?$")

Model = Callable[[Call, Hints], "OpCost | None"]
MODELS: dict[str, Model] = {
    "aten::mm": lambda c, h: mm(c), "aten::addmm": lambda c, h: mm(c, "mat1", "mat2"),
    "aten::bmm": lambda c, h: bmm(c), "aten::baddbmm": lambda c, h: bmm(c, "batch1", "batch2"),
    "aten::matmul": lambda c, h: matmul(c), "aten::linear": lambda c, h: linear(c),
    "aten::_scaled_mm": lambda c, h: scaled_mm(c),
    "aten::conv1d": convolution, "aten::conv2d": convolution, "aten::conv3d": convolution,
    "aten::convolution": convolution, "aten::_convolution": convolution, "aten::cudnn_convolution": convolution,
    "aten::conv_transpose1d": lambda c, h: convolution(c, h, transposed=True),
    "aten::conv_transpose2d": lambda c, h: convolution(c, h, transposed=True),
    "aten::conv_transpose3d": lambda c, h: convolution(c, h, transposed=True),
    "aten::convolution_backward": lambda c, h: conv_backward(c),
    "aten::cudnn_convolution_backward": lambda c, h: conv_backward(c),
    "aten::scaled_dot_product_attention": lambda c, h: attention(c),
    "aten::_scaled_dot_product_flash_attention": lambda c, h: attention(c),
    "aten::_scaled_dot_product_efficient_attention": lambda c, h: attention(c),
    "aten::_scaled_dot_product_cudnn_attention": lambda c, h: attention(c),
    "aten::_flash_attention_forward": lambda c, h: attention(c, layout="blhe"),
    "aten::_scaled_dot_product_flash_attention_backward": lambda c, h: attention(c, backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward": lambda c, h: attention(c, backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": lambda c, h: attention(c, backward=True),
}
"""Ops whose count reads arguments by name (``schemas.SCHEMAS`` gives each one's argument lists)."""
ShapeModel = Callable[[Inputs], "OpCost | None"]
SHAPE_MODELS: dict[str, ShapeModel] = {
    "aten::layer_norm": lambda a: normalization(a, 5.0), "aten::native_layer_norm": lambda a: normalization(a, 5.0),
    "aten::rms_norm": lambda a: normalization(a, 4.0), "aten::batch_norm": lambda a: normalization(a, 4.0),
    "aten::group_norm": lambda a: normalization(a, 5.0),
    "aten::native_layer_norm_backward": lambda a: normalization(a, 5.0, backward=True),
    "aten::native_batch_norm_backward": lambda a: normalization(a, 4.0, backward=True),
    "aten::cudnn_batch_norm_backward": lambda a: normalization(a, 4.0, backward=True),
    "aten::softmax": lambda a: softmax(a), "aten::_softmax": lambda a: softmax(a),
    "aten::log_softmax": lambda a: softmax(a), "aten::_log_softmax": lambda a: softmax(a),
    "aten::_softmax_backward_data": lambda a: softmax(a, backward=True),
    "aten::_log_softmax_backward_data": lambda a: softmax(a, backward=True),
}
"""Ops counted by the size of their first tensor alone (no argument changes their count)."""


def op_cost(name: str, inputs: Inputs, hints: Hints = Hints()) -> OpCost | None:
    """The work of one call of ``name`` with ``inputs``; None when the op is not modelled or its inputs do not
    say enough (for an op read by name: none of its schemas fits what the call recorded)."""
    model = MODELS.get(name)
    if model is not None:
        call = bind(name, inputs)
        return None if call is None else model(call, hints)
    shaped = SHAPE_MODELS.get(name)
    if shaped is not None:
        return shaped(inputs)
    match = _NAME.match(name)
    if match is not None and match.group(1) in ELEMENTWISE:
        base = match.group(1)
        return elementwise(inputs, write_only=base in WRITE_ONLY,
                           out_variant=len(inputs.dims) in OUT_ARITY.get(base, frozenset()))
    return None


def is_modelled(name: str) -> bool:
    """Whether ``name`` is an op this module counts (its inputs may still not say enough)."""
    match = _NAME.match(name)
    return name in MODELS or name in SHAPE_MODELS or (match is not None and match.group(1) in ELEMENTWISE)
