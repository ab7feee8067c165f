"""Prefill and decode steps of a serving engine's trace, each phase with its own time share, step time and GPU busy.

Steps are told apart first by the engine's own ``record_function`` ranges, which name the batch each forward ran:

- SGLang: ``step[EXTEND bs=15 toks=15360]`` (prefill), ``step[DECODE bs=32]``, ``step[MIXED ...]``;
- vLLM: ``execute_context_N(T)_generation_M(G)`` and its detailed form ``execute_T_context_N(sq..)_generation_M
  (sq..)``: N requests reading T prompt tokens, M requests generating G tokens (N and M both: mixed);
- ATOM: ``prefill[bs=.. tok=..]``, ``decode[bs=.. tok=..]``.

Where ranges nest (a vLLM-style marker around SGLang's own), the innermost is the step. Without such ranges, each
profiler step is classified by the attention kernels it ran: prefill kernels read a whole prompt (varlen / batch
prefill / context attention), decode kernels one new token per request against the KV cache (paged attention,
split-KV, decode); a step with both is mixed, a step with neither is left out.

A step runs from its range's start (or the previous step's end, where the engine's overlap scheduling began the
next range early) to the end of the GPU work its runtime calls launched, as the TensorBoard plugin spans a step; its
GPU busy is the union of GPU work (graph replays included) inside it over its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.intervals import clip, merge
from gpuscope.analyzers.trace.steps import find_steps, launched_gpu_events
from gpuscope.model.serving import PhaseName, PhaseStats
from gpuscope.model.trace import GPU_KINDS, Kind, RankTrace

_SGLANG = re.compile(r"^step\[(EXTEND|PREFILL|DECODE|MIXED|TARGET_VERIFY)\b([^\]]*)\]")
_VLLM_NATIVE = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_VLLM_DETAILED = re.compile(r"^execute_\d+_context_(\d+)\(sq(\d+)sk\d+sqsq\d+sqsk\d+\)"
                            r"_generation_(\d+)\(sq(\d+)sk\d+sqsq\d+sqsk\d+\)")
_ATOM = re.compile(r"^(prefill|decode)\[([^\]]*)\]")
_KV = re.compile(r"(\w+)=(\d+)")
_PREFILL_KERNELS = ("prefill", "varlen", "context_attention", "extend_attention")
"""Attention kernels only a serving engine's prefill runs: a batch of whole prompts of different lengths."""
_ANY_ATTENTION = ("flash_fwd", "fmha_fwd", "unified_attention_2d", "_fwd_kernel")
"""Attention any transformer forward runs: prefill only where the step also writes a KV cache."""
_DECODE_KERNELS = ("paged_attention", "decode_attention", "batchdecode", "splitkv", "split_kv", "fwd_kvcache",
                   "unified_attention_3d", "flash_decoding", "mla_decode")
"""Attention of one new token per request against a KV cache (checked first: FlashAttention's split-KV decode
kernel is ``flash_fwd_splitkv_kernel``)."""
_KV_WRITES = ("reshape_and_cache", "store_kvcache", "kv_cache", "kvcache", "set_kv_buffer")


@dataclass(frozen=True)
class EngineStep:
    """One engine range: its phase and the tokens it says the batch held."""

    phase: PhaseName
    tokens: int | None


def engine_step(name: str) -> EngineStep | None:
    """What an engine's step range says of its batch; None for any other name."""
    m = _SGLANG.match(name)
    if m:
        kind, fields = m.group(1), dict(_KV.findall(m.group(2)))
        if kind in ("EXTEND", "PREFILL"):
            return EngineStep("prefill", _int(fields.get("toks")))
        if kind == "MIXED":
            return EngineStep("mixed", _int(fields.get("toks")))
        return EngineStep("decode", _int(fields.get("bs")))
    m = _VLLM_DETAILED.match(name) or _VLLM_NATIVE.match(name)
    if m:
        context, context_tokens, generation, generation_tokens = (int(g) for g in m.groups())
        if context and generation:
            return EngineStep("mixed", context_tokens + generation_tokens)
        if context:
            return EngineStep("prefill", context_tokens)
        return EngineStep("decode", generation_tokens) if generation else None
    m = _ATOM.match(name)
    if m:
        fields = dict(_KV.findall(m.group(2)))
        return EngineStep("prefill" if m.group(1) == "prefill" else "decode", _int(fields.get("tok")))
    return None


def attention_phase(kernel_names: list[str]) -> PhaseName | None:
    """The phase one step's kernels say: prefill, decode, both (mixed) or neither (None). An encoder or a model
    without a KV cache runs attention too: generic attention counts as prefill only beside KV-cache writes."""
    lower = [name.lower() for name in kernel_names]
    decode = any(any(w in n for w in _DECODE_KERNELS) for n in lower)
    rest = [n for n in lower if not any(w in n for w in _DECODE_KERNELS)]
    writes_cache = any(any(w in n for w in _KV_WRITES) for n in lower)
    prefill = any(any(w in n for w in _PREFILL_KERNELS) for n in rest) or (
        writes_cache and any(any(w in n for w in _ANY_ATTENTION) for n in rest))
    if prefill and decode:
        return "mixed"
    return "prefill" if prefill else "decode" if decode else None


@dataclass(frozen=True)
class Phases:
    stats: dict[str, PhaseStats]
    source: str | None


def serving_phases(trace: RankTrace) -> Phases:
    """The rank's steps by phase, from its engine's ranges, else from its profiler steps' attention kernels."""
    found = _engine_steps(trace)
    source = "engine_ranges"
    if found is None:
        found, source = _kernel_steps(trace), "attention_kernels"
    if found is None:
        return Phases({}, None)
    starts, ends, phases, tokens = found
    ends = np.maximum(ends, _gpu_ends(trace, starts, ends))
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    phases, tokens = [phases[i] for i in order.tolist()], [tokens[i] for i in order.tolist()]
    previous = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]])
    starts = np.maximum(starts, previous)
    ev = trace.events
    gpu = ev.mask(*GPU_KINDS)
    busy_set = merge(ev.ts_ns[gpu], ev.end_ns[gpu])
    stats: dict[str, PhaseStats] = {}
    for s, e, phase, tok in zip(starts.tolist(), ends.tolist(), phases, tokens):
        if e <= s:
            continue
        busy = clip(busy_set, s, e).total
        old = stats.get(phase, PhaseStats(steps=0, span_us=0.0, busy_us=0.0, tokens=0))
        stats[phase] = PhaseStats(steps=old.steps + 1, span_us=old.span_us + (e - s) / 1000,
                                  busy_us=old.busy_us + busy / 1000,
                                  tokens=None if old.tokens is None or tok is None else old.tokens + tok)
    return Phases(stats, source if stats else None)


_Found = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[PhaseName], list[int | None]]


def _engine_steps(trace: RankTrace) -> _Found | None:
    """The innermost engine step ranges (an outer one holding another step is a marker around it)."""
    ev = trace.events
    parsed: dict[int, EngineStep] = {}
    for i in ev.name_ids(Kind.USER_ANNOTATION, Kind.CPU_OP).tolist():
        step = engine_step(trace.names[i])
        if step is not None:
            parsed[i] = step
    if not parsed:
        return None
    host = ev.mask(Kind.USER_ANNOTATION, Kind.CPU_OP)
    idx = np.flatnonzero(host & np.isin(ev.name_id, np.fromiter(parsed, dtype=np.int64)))
    # Ranges nest or follow one another: in start order (the longer first at one start), a range holds another
    # exactly when the next one starts and ends inside it.
    idx = idx[np.lexsort((-ev.end_ns[idx], ev.ts_ns[idx]))]
    starts, ends = ev.ts_ns[idx], ev.end_ns[idx]
    holds = np.zeros(idx.size, dtype=bool)
    holds[:-1] = (starts[1:] <= ends[:-1]) & (ends[1:] <= ends[:-1])
    idx = idx[~holds]
    steps = [parsed[int(n)] for n in ev.name_id[idx].tolist()]
    return (ev.ts_ns[idx].copy(), ev.end_ns[idx].copy(), [s.phase for s in steps], [s.tokens for s in steps])


def _kernel_steps(trace: RankTrace) -> _Found | None:
    """Profiler steps classified by their attention kernels; None without profiler steps."""
    steps = find_steps(trace)
    if not steps.from_profiler or not len(steps):
        return None
    ev = trace.events
    kernels = np.flatnonzero(ev.kind == Kind.KERNEL)
    keep_s, keep_e, phases = [], [], []
    for s, e in zip(steps.starts_ns.tolist(), steps.ends_ns.tolist()):
        inside = kernels[(ev.ts_ns[kernels] >= s) & (ev.ts_ns[kernels] < e)]
        phase = attention_phase([trace.names[i] for i in np.unique(ev.name_id[inside]).tolist()])
        if phase is not None:
            keep_s.append(s)
            keep_e.append(e)
            phases.append(phase)
    if not phases:
        return None
    return np.array(keep_s, np.int64), np.array(keep_e, np.int64), phases, [None] * len(phases)


def _gpu_ends(trace: RankTrace, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each step's last end of GPU work launched by a runtime call inside it (its own end where none)."""
    ev = trace.events
    rt, dev = launched_gpu_events(trace)
    out = ends.copy()
    if rt.size == 0:
        return out
    launch_ts, gpu_end = ev.ts_ns[rt], ev.end_ns[dev]
    order = np.argsort(launch_ts, kind="stable")
    launch_ts, gpu_end = launch_ts[order], gpu_end[order]
    lo = np.searchsorted(launch_ts, starts, side="left")
    hi = np.searchsorted(launch_ts, ends, side="right")
    for j, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        if b > a:
            out[j] = max(int(out[j]), int(gpu_end[a:b].max()))
    return out


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None
