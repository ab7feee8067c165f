"""Prefill and decode steps of a serving engine's trace, each phase with its own time share, step time and GPU busy.

Steps are told apart first by the engine's own ``record_function`` ranges, which name the batch each forward ran
(``trace.engine_steps``: SGLang ``step[EXTEND ...]``, vLLM ``execute_context_N(T)_generation_M(G)``, ATOM
``prefill[...]``; the innermost where they nest). Without such ranges, each
profiler step is classified by the attention kernels it ran: prefill kernels read a whole prompt (varlen / batch
prefill / context attention), decode kernels one new token per request against the KV cache (paged attention,
split-KV, decode); a step with both is mixed, a step with neither is left out.

A step runs from its range's start (or the previous step's end, where the engine's overlap scheduling began the
next range early) to the end of the GPU work its runtime calls launched, as the TensorBoard plugin spans a step; its
GPU busy is the union of GPU work (graph replays included) inside it over its length, and its GPU-side wait the
idle time the host cannot have caused (``trace.queue``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.engine_steps import phase_ranges
from gpuscope.analyzers.trace.intervals import clip, merge
from gpuscope.analyzers.trace.queue import gpu_side_wait
from gpuscope.analyzers.trace.steps import find_steps, launched_gpu_events
from gpuscope.model.serving import PhaseName, PhaseStats
from gpuscope.model.trace import GPU_KINDS, Kind, RankTrace

_PREFILL_KERNELS = ("prefill", "varlen", "context_attention", "extend_attention")
"""Attention kernels only a serving engine's prefill runs: a batch of whole prompts of different lengths."""
_ANY_ATTENTION = ("flash_fwd", "fmha_fwd", "unified_attention_2d", "_fwd_kernel")
"""Attention any transformer forward runs: prefill only where the step also writes a KV cache."""
_DECODE_KERNELS = ("paged_attention", "decode_attention", "batchdecode", "splitkv", "split_kv", "fwd_kvcache",
                   "unified_attention_3d", "flash_decoding", "mla_decode")
"""Attention of one new token per request against a KV cache (checked first: FlashAttention's split-KV decode
kernel is ``flash_fwd_splitkv_kernel``)."""
_KV_WRITES = ("reshape_and_cache", "store_kvcache", "kv_cache", "kvcache", "set_kv_buffer")


def attention_phase(kernel_names: list[str]) -> PhaseName | None:
    """The phase one step's kernels say: prefill, decode, both (mixed) or neither (None). An encoder or a model
    without a KV cache runs attention too: generic attention counts as prefill only beside KV-cache writes."""
    return _phase_of([_kernel_marks(name) for name in kernel_names])


def _kernel_marks(name: str) -> tuple[bool, bool, bool, bool]:
    """What one kernel's name says: (decode attention, prefill attention, a KV-cache write, any attention)."""
    n = name.lower()
    return (any(w in n for w in _DECODE_KERNELS), any(w in n for w in _PREFILL_KERNELS),
            any(w in n for w in _KV_WRITES), any(w in n for w in _ANY_ATTENTION))


def _phase_of(marks: list[tuple[bool, bool, bool, bool]]) -> PhaseName | None:
    """``attention_phase`` of kernels by their ``_kernel_marks``: prefill attention counts only in kernels that are
    not decode attention."""
    decode = any(m[0] for m in marks)
    rest = [m for m in marks if not m[0]]
    writes_cache = any(m[2] for m in marks)
    prefill = any(m[1] for m in rest) or (writes_cache and any(m[3] for m in rest))
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
    side = gpu_side_wait(trace, busy_set, int(starts.min()), int(ends.max()))
    stats: dict[str, PhaseStats] = {}
    for s, e, phase, tok in zip(starts.tolist(), ends.tolist(), phases, tokens):
        if e <= s:
            continue
        busy = clip(busy_set, s, e).total
        old = stats.get(phase, PhaseStats(steps=0, span_us=0.0, busy_us=0.0, tokens=0))
        stats[phase] = PhaseStats(steps=old.steps + 1, span_us=old.span_us + (e - s) / 1000,
                                  busy_us=old.busy_us + busy / 1000,
                                  tokens=None if old.tokens is None or tok is None else old.tokens + tok,
                                  gpu_wait_us=old.gpu_wait_us + clip(side, s, e).total / 1000)
    return Phases(stats, source if stats else None)


_Found = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[PhaseName], list[int | None]]


def _engine_steps(trace: RankTrace) -> _Found | None:
    """The innermost engine step ranges (an outer one holding another step is a marker around it)."""
    idx, steps = phase_ranges(trace)
    if not idx.size:
        return None
    ev = trace.events
    return (ev.ts_ns[idx].copy(), ev.end_ns[idx].copy(), [s.phase for s in steps], [s.tokens for s in steps])


def _kernel_steps(trace: RankTrace) -> _Found | None:
    """Profiler steps classified by their attention kernels; None without profiler steps."""
    steps = find_steps(trace)
    if not steps.from_profiler or not len(steps):
        return None
    ev = trace.events
    kernels = np.flatnonzero(ev.kind == Kind.KERNEL)
    kernel_ts = ev.ts_ns[kernels]  # in time order, as the events are
    marks: dict[int, tuple[bool, bool, bool, bool]] = {}  # each kernel name read once, not once a step
    keep_s, keep_e, phases = [], [], []
    for s, e in zip(steps.starts_ns.tolist(), steps.ends_ns.tolist()):
        inside = kernels[np.searchsorted(kernel_ts, s, side="left"):np.searchsorted(kernel_ts, e, side="left")]
        phase = _phase_of([marks[i] if i in marks else marks.setdefault(i, _kernel_marks(trace.names[i]))
                           for i in np.unique(ev.name_id[inside]).tolist()])
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

