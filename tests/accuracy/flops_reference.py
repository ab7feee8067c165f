"""FLOPs of GEMMs, convolutions and attention counted straight from a Kineto trace's JSON: a small, slow, obviously
right recomputation that shares nothing with gpuscope's reader or its FLOP code (``tests/accuracy/test_flops.py``
holds gpuscope's figures against it).

- A call's FLOPs from its own ``Input Dims`` (a multiply-add is 2): a GEMM 2·m·k·n (x batch); a convolution
  2·N·C_out·out-positions·(C_in/groups)·kernel, its backward that times the gradients ``output_mask`` asks for (2 when
  not recorded); attention 2·B·H·L·S·(E + Ev), twice that backward, half when causal.
- An argument is found by its name in PyTorch's own schema of the op (``torch._C._jit_get_schemas_for_operator``,
  the one with as many arguments as the call recorded), never by a position written here; ops PyTorch has since
  removed name their arguments below.
- A convolution without ``Concrete Inputs`` takes its output's size from the backward call of the same input and
  weight (its gradient of the output).
- Counted once: a call inside another counted call of these ops on its thread is its work, not more (a call whose
  inputs do not say, shapes that cannot be multiplied, hides none of the calls inside it).
- Each step: the calls that start inside its ``ProfilerStep#N`` span, on any thread; in a trace without one, inside
  a serving engine's step range (SGLang ``step[...]``, vLLM ``execute_context...``/``execute_N_context...``, else
  ``execute_model``; the innermost where they nest), numbered from 0 in time order.
- Re-run for a checkpointed activation (hardware FLOPs, not the model's): a forward call with a ``Sequence number``
  inside an ``autograd::engine::evaluate_function:`` span whose number no such span carries, or one inside a Python
  frame of torch's checkpoint recompute.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import torch

from tests.accuracy.engine_ranges import engine_ranges

GEMMS = {"aten::mm": ("self", "mat2"), "aten::addmm": ("mat1", "mat2"), "aten::bmm": ("self", "mat2"),
         "aten::baddbmm": ("batch1", "batch2"), "aten::matmul": ("self", "other"), "aten::linear": ("input", "weight")}
CONVS = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
         "aten::cudnn_convolution", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}
CONV_BACKWARDS = {"aten::convolution_backward", "aten::cudnn_convolution_backward"}
ATTENTION = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
             "aten::_flash_attention_forward", "aten::_scaled_dot_product_flash_attention_backward",
             "aten::_scaled_dot_product_efficient_attention_backward",
             "aten::_scaled_dot_product_cudnn_attention_backward"}
COUNTED = set(GEMMS) | CONVS | CONV_BACKWARDS | ATTENTION
REMOVED = {"aten::cudnn_convolution_backward": ("self", "grad_output", "weight", "padding", "stride", "dilation",
                                                "groups", "benchmark", "deterministic", "allow_tf32", "output_mask")}
"""Ops PyTorch 1.8 to 1.10 recorded (the bundled 2021 traces) and later removed: their arguments' names."""


class _Args(msgspec.Struct):
    input_dims: Any = msgspec.field(name="Input Dims", default=None)
    input_dims_2021: Any = msgspec.field(name="Input dims", default=None)
    input_type: Any = msgspec.field(name="Input type", default=None)
    concrete: Any = msgspec.field(name="Concrete Inputs", default=None)
    sequence: Any = msgspec.field(name="Sequence number", default=None)


class _Event(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: _Args | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815 - the trace's own key


HOST_CATEGORIES = {"cpu_op", "operator", "user_annotation", "python_function"}
"""The host events read here: operators, ProfilerStep spans, Python frames (GPU events are not)."""


def events(path: Path) -> list[dict[str, Any]]:
    """The complete ("X") host events, each as a dict of the fields read here (a plain JSON decode of those
    fields)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = msgspec.json.decode(raw, type=_Doc)
    out = []
    for e in doc.traceEvents:
        if e.ph != "X" or not isinstance(e.ts, (int, float)) or not isinstance(e.dur, (int, float)) \
                or str(e.cat).lower() not in HOST_CATEGORIES:
            continue
        args: dict[str, Any] = {}
        if e.args is not None:
            for key, value in (("Input Dims", e.args.input_dims), ("Input dims", e.args.input_dims_2021),
                               ("Input type", e.args.input_type), ("Concrete Inputs", e.args.concrete),
                               ("Sequence number", e.args.sequence)):
                if value is not None:
                    args[key] = value
        out.append({"cat": e.cat, "name": e.name, "tid": e.tid, "ts": e.ts, "dur": e.dur, "args": args})
    return out


@cache
def _schemas(op: str) -> tuple[tuple[str, ...], ...]:
    if op in REMOVED:
        return (REMOVED[op],)
    return tuple(tuple(a.name for a in s.arguments) for s in torch._C._jit_get_schemas_for_operator(op))


def position(op: str, name: str, recorded: int) -> int | None:
    """Where argument ``name`` is among ``recorded`` inputs: by the schema of that length, else by a longer one that
    only appends arguments after it."""
    for names in _schemas(op):
        if len(names) == recorded and name in names:
            return names.index(name)
    for names in _schemas(op):
        if len(names) > recorded and name in names[:recorded]:
            return names.index(name)
    return None


def _arg(e: dict[str, Any], key: str, name: str) -> Any:
    args = e.get("args") or {}
    dims = args.get("Input Dims") or args.get("Input dims") or []
    at = position(e["name"], name, len(dims))
    values = args.get(key) or []
    return values[at] if at is not None and at < len(values) else None


def _dims(e: dict[str, Any], name: str) -> list[int] | None:
    d = _arg(e, "Input Dims", name) if (e.get("args") or {}).get("Input Dims") else _arg(e, "Input dims", name)
    return d if isinstance(d, list) and d and all(isinstance(x, int) for x in d) else None


def _concrete(e: dict[str, Any], name: str) -> Any:
    text = _arg(e, "Concrete Inputs", name)
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text.lower())  # "True", "[1, 1]", "[True, True, False]", "0.0"
    except ValueError:
        return None


def gemm_flops(e: dict[str, Any]) -> float | None:
    a_name, b_name = GEMMS[e["name"]]
    a, b = _dims(e, a_name), _dims(e, b_name)
    if a is None or b is None:
        return None
    if e["name"] == "aten::linear":  # weight [out, in]
        return 2.0 * math.prod(a[:-1]) * a[-1] * b[0] if len(b) == 2 and a[-1] == b[1] else None
    if len(a) == 1:
        a = [1, *a]
    if len(b) == 1:
        b = [*b, 1]
    if a[-1] != b[-2] or (e["name"] in ("aten::mm", "aten::addmm") and (len(a), len(b)) != (2, 2)) or (
            e["name"] in ("aten::bmm", "aten::baddbmm") and (len(a), len(b)) != (3, 3)):
        return None
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch = [max(x, y) for x, y in zip([1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b)]
    return 2.0 * math.prod(batch) * a[-2] * a[-1] * b[-1]


def conv_forward_flops(e: dict[str, Any], outputs: dict[tuple[str, str], list[int]]) -> float | None:
    x = _dims(e, "input") or _dims(e, "self")
    w = _dims(e, "weight")
    if x is None or w is None:
        return None
    transposed = "transpose" in e["name"] or _concrete(e, "transposed") is True
    if transposed:
        return 2.0 * x[0] * w[0] * math.prod(x[2:]) * w[1] * math.prod(w[2:])
    stride, padding, dilation = (_concrete(e, n) for n in ("stride", "padding", "dilation"))
    if isinstance(stride, list) and isinstance(padding, list) and isinstance(dilation, list):
        n = len(x) - 2
        s, p, d = ((v * n if len(v) == 1 else v) for v in (stride, padding, dilation))
        spatial = [(x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1 for i in range(n)]
    else:
        out = outputs.get((json.dumps(x), json.dumps(w)))
        if out is None:
            return None
        spatial = out[2:]
    return 2.0 * x[0] * w[0] * math.prod(spatial) * w[1] * math.prod(w[2:])


def conv_backward_flops(e: dict[str, Any]) -> float | None:
    g, w = _dims(e, "grad_output"), _dims(e, "weight")
    x = _dims(e, "input") or _dims(e, "self")
    if g is None or w is None or x is None:
        return None
    if _concrete(e, "transposed") is True:
        forward = 2.0 * x[0] * w[0] * math.prod(x[2:]) * w[1] * math.prod(w[2:])
    else:
        forward = 2.0 * g[0] * w[0] * math.prod(g[2:]) * w[1] * math.prod(w[2:])
    mask = _concrete(e, "output_mask")
    return forward * (sum(1 for m in mask[:2] if m) if isinstance(mask, list) else 2)


def attention_flops(e: dict[str, Any]) -> float | None:
    q, k, v = (_dims(e, n) for n in ("query", "key", "value"))
    causal = _concrete(e, "is_causal")
    if q is None or k is None or v is None or len(q) != 4 or causal is None:
        return None
    if e["name"] == "aten::_flash_attention_forward":  # [B, L, H, E]
        b, length, h, emb = q
        s, ev = k[1], v[3]
    else:  # [B, H, L, E]
        b, h, length, emb = q
        s, ev = k[2], v[3]
    flops = 2.0 * b * h * length * s * (emb + ev) * (2 if e["name"].endswith("_backward") else 1)
    return flops / 2 if causal else flops


def call_flops(e: dict[str, Any], outputs: dict[tuple[str, str], list[int]]) -> float | None:
    """One call's FLOPs at its own inputs; None where its inputs do not say."""
    name = e["name"]
    if name in GEMMS:
        return gemm_flops(e)
    if name in CONVS:
        return conv_forward_flops(e, outputs)
    if name in CONV_BACKWARDS:
        return conv_backward_flops(e)
    return attention_flops(e)


def conv_outputs(evs: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    """(input dims, weight dims) -> output dims, from the backward calls' gradient of the output."""
    out = {}
    for e in evs:
        if e.get("name") in CONV_BACKWARDS:
            x, g, w = _dims(e, "input") or _dims(e, "self"), _dims(e, "grad_output"), _dims(e, "weight")
            if x is not None and g is not None and w is not None:
                out[(json.dumps(x), json.dumps(w))] = g
    return out


def engine_steps(evs: list[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """A serving engine's step ranges as (start, end, number), numbered from 0 in time order."""
    return [(s, t, str(n)) for n, (s, t) in enumerate(engine_ranges(evs))]


def _inside(e: dict[str, Any], spans: list[dict[str, Any]]) -> bool:
    return any(s is not e and s.get("tid") == e.get("tid") and s["ts"] <= e["ts"]
               and e["ts"] + e["dur"] <= s["ts"] + s["dur"] for s in spans)


def _folded(inners: list[dict[str, Any]], calls: list[dict[str, Any]], ops: list[dict[str, Any]]) -> set[int]:
    """The calls that are the only operator inside a call of the same name on their thread: one call recorded twice,
    which the profiler's operator tables (and `gpuscope ops`) count once."""
    starts: dict[Any, list[float]] = defaultdict(list)
    for o in ops:
        starts[o.get("tid")].append(o["ts"])
    for v in starts.values():
        v.sort()

    def ops_starting_in(tid: Any, a: float, b: float) -> int:
        return bisect.bisect_left(starts[tid], b) - bisect.bisect_left(starts[tid], a)

    same: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for c in calls:
        same[(c["name"], c.get("tid"))].append(c)
    out: set[int] = set()
    for inner in inners:
        tid, end = inner.get("tid"), inner["ts"] + inner["dur"]
        outers = [o for o in same[(inner["name"], tid)] if o is not inner and o["ts"] <= inner["ts"]
                  and end <= o["ts"] + o["dur"]]
        if not outers:
            continue
        outer = max(outers, key=lambda o: (o["ts"], -o["dur"]))  # the innermost of them
        # the outer and the inner call, and what starts inside the inner one: nothing else inside the outer
        inside_outer = ops_starting_in(tid, outer["ts"], outer["ts"] + outer["dur"])
        if inside_outer - 1 - ops_starting_in(tid, inner["ts"], end) == 0:
            out.add(id(inner))
    return out


def _nested(calls: list[dict[str, Any]]) -> set[int]:
    """The calls (by id) that run inside another of ``calls`` on their thread: one sweep per thread, in start order
    (the longer first), keeping the calls still open."""
    out: set[int] = set()
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in calls:
        by_tid[e.get("tid")].append(e)
    for group in by_tid.values():
        open_ends: list[float] = []
        for e in sorted(group, key=lambda c: (c["ts"], -c["dur"])):
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            if open_ends and e["ts"] + e["dur"] <= open_ends[-1]:
                out.add(id(e))
            open_ends.append(e["ts"] + e["dur"])
    return out


@dataclass
class Count:
    """FLOPs of one trace: per step (model and re-run), and per operator over all its calls."""

    model: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rerun: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_op: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    uncounted: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@cache
def count(path: Path) -> Count:
    """The trace's count (once per file: callers must not change it)."""
    evs = events(path)
    calls = [e for e in evs if e.get("name") in COUNTED and (e.get("args") or {}).get("Input type") is not None]
    outputs = conv_outputs(calls)
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["name"].removeprefix("ProfilerStep#")) for e in evs
                   if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation")
    steps = steps or engine_steps(evs)
    engine = [e for e in evs if str(e.get("name", "")).startswith("autograd::engine::evaluate_function: ")]
    carried = {(e.get("args") or {}).get("Sequence number") for e in engine}
    frames = [e for e in evs if e.get("cat") == "python_function" and "checkpoint.py(" in str(e.get("name"))
              and str(e["name"]).endswith(("recompute_fn", "unpack_hook"))]
    flops_of = {id(e): call_flops(e, outputs) for e in calls}
    countable = [e for e in calls if flops_of[id(e)] is not None]
    nested = _nested(countable)  # a call that cannot be counted does not hide the ones inside it
    inside_any = _nested(calls)
    ops = [e for e in evs if str(e.get("cat")).lower() in ("cpu_op", "operator")]
    folded = _folded([e for e in calls if id(e) in inside_any], calls, ops)
    result = Count()
    for e in calls:
        flops = flops_of[id(e)]
        if flops is None:
            result.uncounted[e["name"]] += 1
            continue
        if id(e) not in folded:
            result.by_op[e["name"]] += flops
        if id(e) in nested:
            continue  # counted in the call it is part of
        step = next((n for s, t, n in steps if s <= e["ts"] < t), None)
        if step is None:
            continue
        seq = (e.get("args") or {}).get("Sequence number")
        forward = not e["name"].endswith("_backward")
        rerun = forward and ((seq is not None and seq not in carried and _inside(e, engine)) or _inside(e, frames))
        (result.rerun if rerun else result.model)[step] += flops
    return result
