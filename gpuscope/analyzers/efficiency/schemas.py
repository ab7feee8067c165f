"""The argument lists of the operators gpuscope counts, so a call's inputs are read by name, not by position.

Kineto records a host op's inputs positionally (``Input Dims``, ``Input type``, ``Concrete Inputs``: one entry per
argument of the op's schema, keyword-only ones included, in order) and names no overload. The position of a flag that
changes a count (``is_causal``, ``transposed``, ``stride``, ``padding``, ``output_mask``) depends on the schema, and
schemas change between PyTorch releases (keyword-only arguments appended, positional ones inserted). Each operator
here lists the schemas a trace may have recorded it under, written as PyTorch's ``native_functions.yaml`` writes them
(defaults left out); a call takes the first whose length and argument kinds match what it recorded
(``bind``). A call no schema fits has no names: what needs them is not counted (never guessed by position).

Every schema marked current is PyTorch's own (``tests/analyzers/efficiency/test_schemas.py`` compares each with
``torch._C._jit_get_schemas_for_operator``); an older one says which release wrote it, and the recorded types of the
bundled traces that use it are checked against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpuscope.analyzers.efficiency.inputs import Inputs

Kind = Literal["tensor", "tensor?", "list", "scalar", "scalar?", "str", "tensors"]


@dataclass(frozen=True)
class Schema:
    """One argument list of an operator: its overload name ("" for the default), the arguments' names and kinds, and
    whether it is today's PyTorch's (``current``) or an older release's."""

    overload: str
    names: tuple[str, ...]
    kinds: tuple[Kind, ...]
    current: bool = True


_ARG = re.compile(r"^(?P<type>[A-Za-z]+(?:\[\d*\])?\??)\s+(?P<name>\w+)$")


def _kind(type_text: str) -> Kind:
    optional = type_text.endswith("?")
    base = type_text.rstrip("?")
    if base == "Tensor[]":
        return "tensors"
    if base == "Tensor":
        return "tensor?" if optional else "tensor"
    if base.endswith("]"):
        return "list"
    if base == "str":
        return "str"
    return "scalar?" if optional else "scalar"


def schema(text: str, *, current: bool = True) -> Schema:
    """``name.overload(Type arg, ...)`` (no ``*``, no defaults) as a Schema."""
    head, _, rest = text.partition("(")
    _, _, overload = head.partition(".")
    names, kinds = [], []
    for part in rest.rstrip(")").split(", ") if rest.rstrip(")") else ():
        match = _ARG.match(part.strip())
        if match is None:
            raise ValueError(f"not an argument: {part!r} in {text!r}")
        names.append(match["name"])
        kinds.append(_kind(match["type"]))
    return Schema(overload, tuple(names), tuple(kinds), current)


_CONV_ND = "{op}(Tensor input, Tensor weight, Tensor? bias, SymInt[{n}] stride, SymInt[{n}] padding, " \
           "SymInt[{n}] dilation, SymInt groups)"
_CONV_ND_PADDING = "{op}.padding(Tensor input, Tensor weight, Tensor? bias, SymInt[{n}] stride, str padding, " \
                   "SymInt[{n}] dilation, SymInt groups)"
_CONV_T = "{op}(Tensor input, Tensor weight, Tensor? bias, SymInt[{n}] stride, SymInt[{n}] padding, " \
          "SymInt[{n}] output_padding, SymInt groups, SymInt[{n}] dilation)"
_CONVOLUTION = "Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, " \
               "bool transposed, SymInt[] output_padding, SymInt groups"
_SDPA = "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p, " \
        "bool is_causal"
_FLASH_FORWARD = "_flash_attention_forward(Tensor query, Tensor key, Tensor value, Tensor? cum_seq_q, " \
                 "Tensor? cum_seq_k, SymInt max_q, SymInt max_k, float dropout_p, bool is_causal, " \
                 "bool return_debug_mask, float? scale, SymInt? window_size_left, SymInt? window_size_right, " \
                 "Tensor? seqused_k, Tensor? alibi_slopes"


def _table() -> dict[str, tuple[Schema, ...]]:
    s = schema
    t: dict[str, tuple[Schema, ...]] = {
        "aten::mm": (s("mm(Tensor self, Tensor mat2)"), s("mm.dtype(Tensor self, Tensor mat2, ScalarType out_dtype)"),
                     s("mm.out(Tensor self, Tensor mat2, Tensor out)")),
        "aten::addmm": (s("addmm(Tensor self, Tensor mat1, Tensor mat2, Scalar beta, Scalar alpha)"),
                        s("addmm.dtype(Tensor self, Tensor mat1, Tensor mat2, ScalarType out_dtype, Scalar beta, "
                          "Scalar alpha)"),
                        s("addmm.out(Tensor self, Tensor mat1, Tensor mat2, Scalar beta, Scalar alpha, Tensor out)")),
        "aten::bmm": (s("bmm(Tensor self, Tensor mat2)"),
                      s("bmm.dtype(Tensor self, Tensor mat2, ScalarType out_dtype)"),
                      s("bmm.out(Tensor self, Tensor mat2, Tensor out)")),
        "aten::baddbmm": (s("baddbmm(Tensor self, Tensor batch1, Tensor batch2, Scalar beta, Scalar alpha)"),
                          s("baddbmm.dtype(Tensor self, Tensor batch1, Tensor batch2, ScalarType out_dtype, "
                            "Scalar beta, Scalar alpha)"),
                          s("baddbmm.out(Tensor self, Tensor batch1, Tensor batch2, Scalar beta, Scalar alpha, "
                            "Tensor out)")),
        "aten::matmul": (s("matmul(Tensor self, Tensor other)"),
                         s("matmul.out(Tensor self, Tensor other, Tensor out)")),
        "aten::linear": (s("linear(Tensor input, Tensor weight, Tensor? bias)"),
                         s("linear.out(Tensor input, Tensor weight, Tensor? bias, Tensor out)")),
        "aten::_scaled_mm": (s("_scaled_mm(Tensor self, Tensor mat2, Tensor scale_a, Tensor scale_b, Tensor? bias, "
                               "Tensor? scale_result, ScalarType? out_dtype, bool use_fast_accum)"),),
        "aten::convolution": (s(f"convolution({_CONVOLUTION})"),),
        "aten::_convolution": (
            s(f"_convolution({_CONVOLUTION}, bool benchmark, bool deterministic, bool cudnn_enabled, "
              "bool allow_tf32)"),
            s(f"_convolution.deprecated({_CONVOLUTION}, bool benchmark, bool deterministic, bool cudnn_enabled)")),
        "aten::cudnn_convolution": (
            s("cudnn_convolution(Tensor self, Tensor weight, SymInt[] padding, SymInt[] stride, SymInt[] dilation, "
              "SymInt groups, bool benchmark, bool deterministic, bool allow_tf32)"),
            # PyTorch 1.7 and 1.8 (before the TF32 flag; the bundled 2021 traces record the one above)
            s("cudnn_convolution.deprecated2(Tensor self, Tensor weight, int[] padding, int[] stride, "
              "int[] dilation, int groups, bool benchmark, bool deterministic)", current=False)),
        "aten::convolution_backward": (
            s("convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, "
              "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
              "SymInt groups, bool[3] output_mask)"),),
        # PyTorch 1.8 to 1.10 (removed in 1.11 for convolution_backward): the bundled 2021 ResNet-50 traces
        "aten::cudnn_convolution_backward": (
            s("cudnn_convolution_backward(Tensor self, Tensor grad_output, Tensor weight, int[] padding, "
              "int[] stride, int[] dilation, int groups, bool benchmark, bool deterministic, bool allow_tf32, "
              "bool[2] output_mask)", current=False),),
        "aten::scaled_dot_product_attention": (
            s(f"{_SDPA}, float? scale, bool enable_gqa)"),
            s(f"{_SDPA}, float? scale)", current=False),  # PyTorch 2.1 to 2.4
            s(f"{_SDPA})", current=False)),  # PyTorch 2.0
        "aten::_scaled_dot_product_flash_attention": (
            s("_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, float dropout_p, "
              "bool is_causal, bool return_debug_mask, float? scale)"),),
        "aten::_scaled_dot_product_efficient_attention": (
            s("_scaled_dot_product_efficient_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
              "bool compute_log_sumexp, float dropout_p, bool is_causal, float? scale)"),),
        "aten::_scaled_dot_product_cudnn_attention": (
            s("_scaled_dot_product_cudnn_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
              "bool compute_log_sumexp, float dropout_p, bool is_causal, bool return_debug_mask, float? scale)"),),
        "aten::_flash_attention_forward": (
            s(f"{_FLASH_FORWARD}, Tensor? block_table, int? num_splits)"),
            s(f"{_FLASH_FORWARD})", current=False)),  # before the paged KV cache (TraceLens's MI300X traces)
        "aten::_scaled_dot_product_flash_attention_backward": (
            s("_scaled_dot_product_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
              "Tensor out, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, "
              "float dropout_p, bool is_causal, Tensor philox_seed, Tensor philox_offset, float? scale)"),),
        "aten::_scaled_dot_product_efficient_attention_backward": (
            s("_scaled_dot_product_efficient_attention_backward(Tensor grad_out_, Tensor query, Tensor key, "
              "Tensor value, Tensor attn_bias, Tensor out, Tensor logsumexp, Tensor philox_seed, "
              "Tensor philox_offset, float dropout_p, bool[4] grad_input_mask, bool is_causal, float? scale)"),),
        "aten::_scaled_dot_product_cudnn_attention_backward": (
            s("_scaled_dot_product_cudnn_attention_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, "
              "Tensor out, Tensor logsumexp, Tensor philox_seed, Tensor philox_offset, Tensor attn_bias, "
              "Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, SymInt max_k, float dropout_p, bool is_causal, "
              "float? scale)"),),
    }
    for n in (1, 2, 3):
        t[f"aten::conv{n}d"] = (s(_CONV_ND.format(op=f"conv{n}d", n=n)),
                                s(_CONV_ND_PADDING.format(op=f"conv{n}d", n=n)))
    t["aten::conv_transpose1d"] = (s(_CONV_T.format(op="conv_transpose1d", n=1)),)
    for n in (2, 3):
        t[f"aten::conv_transpose{n}d"] = (s(_CONV_T.format(op=f"conv_transpose{n}d.input", n=n)),)
    return t


SCHEMAS: dict[str, tuple[Schema, ...]] = _table()
"""Operator -> the argument lists a trace may have recorded it under, today's first."""

_NONE = ""
_SCALARS = frozenset({"Scalar", "Int", "Bool", "Double", "Float", "SymInt", "SymFloat", "SymBool", "Device",
                      "Layout", "ScalarType", "MemoryFormat", "Complex"})
_LISTS = frozenset({"ScalarList", "GenericList", "IntList", "BoolList", "DoubleList", "SymIntList", "IntArrayRef"})
_STRINGS = frozenset({"String", "str"})
_FITS: dict[str, frozenset[Kind]] = {
    "scalar": frozenset({"scalar", "scalar?"}), "list": frozenset({"list"}), "str": frozenset({"str"}),
    "tensors": frozenset({"tensors"}), "tensor": frozenset({"tensor", "tensor?"}),
}


def _recorded(type_name: str) -> str | None:
    """What a recorded ``Input type`` says an argument is; None: nothing (no value: fits any argument)."""
    if type_name == _NONE:
        return None
    if type_name in _SCALARS:
        return "scalar"
    if type_name in _LISTS:
        return "list"
    if type_name in _STRINGS:
        return "str"
    if type_name == "TensorList":
        return "tensors"
    return "tensor"  # a dtype name ("float", "c10::BFloat16", ...)


def _fits(s: Schema, types: tuple[str, ...]) -> bool:
    if len(s.kinds) != len(types):
        return False
    for kind, recorded in zip(s.kinds, map(_recorded, types)):
        if recorded is not None and kind not in _FITS[recorded]:
            return False
    return True


@dataclass(frozen=True)
class Call:
    """One call's inputs read by argument name (its schema's), each accessor as ``Inputs``'s by position; an
    argument the schema does not have reads as not recorded."""

    inputs: Inputs
    schema: Schema

    def at(self, name: str) -> int:
        """The position of argument ``name``; -1 where the schema has none."""
        try:
            return self.schema.names.index(name)
        except ValueError:
            return -1

    def shape(self, name: str) -> tuple[int, ...] | None:
        i = self.at(name)
        return self.inputs.shape(i) if i >= 0 else None

    def dtype(self, name: str) -> str | None:
        i = self.at(name)
        return self.inputs.dtype(i) if i >= 0 else None

    def element_bytes(self, name: str) -> int:
        i = self.at(name)
        return self.inputs.element_bytes(i) if i >= 0 else 0

    def tensor_bytes(self, name: str) -> int:
        i = self.at(name)
        return self.inputs.tensor_bytes(i) if i >= 0 else 0

    def value(self, name: str) -> object:
        i = self.at(name)
        return self.inputs.value(i) if i >= 0 else None

    def ints(self, name: str) -> tuple[int, ...] | None:
        i = self.at(name)
        return self.inputs.ints(i) if i >= 0 else None

    def flag(self, name: str) -> bool | None:
        i = self.at(name)
        return self.inputs.flag(i) if i >= 0 else None

    def text(self, name: str) -> str | None:
        """A string argument's value (``padding="same"``), or None where not recorded."""
        v = self.value(name)
        if isinstance(v, str):
            return v
        i = self.at(name)
        raw = self.inputs.concrete[i].strip() if 0 <= i < len(self.inputs.concrete) else ""
        return raw if raw.isalpha() else None


def bind(op: str, inputs: Inputs) -> Call | None:
    """``inputs`` read by the names of the first of ``op``'s schemas they fit; None where none does (or the op has no
    schema here)."""
    for s in SCHEMAS.get(op, ()):
        if _fits(s, inputs.types if inputs.types else ("",) * len(inputs.dims)):
            return Call(inputs, s)
    return None
