"""The ranges a serving engine (or the user) marks its steps with: the one recogniser the step finder and the
serving phases share.

An engine's ``record_function`` ranges name the batch each forward ran:

- SGLang: ``step[EXTEND bs=15 toks=15360]`` (prefill), ``step[DECODE bs=32]``, ``step[MIXED ...]``;
- vLLM: ``execute_context_N(T)_generation_M(G)`` and its detailed form ``execute_T_context_N(sq..)_generation_M
  (sq..)``: N requests reading T prompt tokens, M requests generating G tokens (N and M both: mixed); without
  those, ``execute_model`` (a step whose phase the name does not say);
- ATOM: ``prefill[bs=.. tok=..]``, ``decode[bs=.. tok=..]``.

TGI records no step range of its own in a PyTorch profiler trace: its steps are found with ``--step-range NAME``,
which takes the ranges named NAME, or whose name begins with it, as the steps.

Where ranges nest (a vLLM-style marker around SGLang's own), the innermost is the step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.model.profile import PROFILER_ATTR
from gpuscope.model.serving import PhaseName
from gpuscope.model.trace import Kind, RankTrace

_SGLANG = re.compile(r"^step\[(EXTEND|PREFILL|DECODE|MIXED|TARGET_VERIFY)\b([^\]]*)\]")
_VLLM_NATIVE = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_VLLM_DETAILED = re.compile(r"^execute_\d+_context_(\d+)\(sq(\d+)sk\d+sqsq\d+sqsk\d+\)"
                            r"_generation_(\d+)\(sq(\d+)sk\d+sqsq\d+sqsk\d+\)")
_ATOM = re.compile(r"^(prefill|decode)\[([^\]]*)\]")
_KV = re.compile(r"(\w+)=(\d+)")
PHASELESS = ("execute_model",)
"""Step ranges whose name does not say the phase: steps, but no serving phase."""
_RANGE_KINDS = (Kind.USER_ANNOTATION, Kind.CPU_OP)


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


def phase_ranges(trace: RankTrace) -> tuple[npt.NDArray[np.intp], list[EngineStep]]:
    """The innermost engine ranges that name their phase (indices into the events, in start order), with what
    each says."""
    parsed: dict[int, EngineStep] = {}
    for i in trace.events.name_ids(*_RANGE_KINDS).tolist():
        step = engine_step(trace.names[i])
        if step is not None:
            parsed[i] = step
    idx = innermost(trace, parsed)
    return idx, [parsed[int(n)] for n in trace.events.name_id[idx].tolist()]


def step_ranges(trace: RankTrace, name: str | None = None) -> npt.NDArray[np.intp]:
    """The ranges that mark steps, innermost, in start order: the ranges named ``name`` (or beginning with it) when
    given; else an engine's phase ranges, else its phaseless ones (``execute_model``)."""
    if name is not None:  # the user's name may be any range's, ProfilerStep's too
        ids = trace.events.name_ids(*_RANGE_KINDS, Kind.STEP).tolist()
        names = _user_names(trace)
        return innermost(trace, [i for i in ids if any(n.startswith(name) for n in names(trace.names[i]))],
                         (*_RANGE_KINDS, Kind.STEP))
    ids = trace.events.name_ids(*_RANGE_KINDS).tolist()
    idx, _ = phase_ranges(trace)
    if idx.size:
        return idx
    return innermost(trace, [i for i in ids if trace.names[i] in PHASELESS])


def _user_names(trace: RankTrace) -> Callable[[str], tuple[str, ...]]:
    """The names a user may give a range by: the trace's; in an Nsight Systems profile, whose ranges of a named
    domain read ``DOMAIN:text``, its text alone too (``--step-range train_step`` finds ``mylib:train_step``)."""
    if trace.attrs.get(PROFILER_ATTR) != "nsys":
        return lambda name: (name,)
    return lambda name: (name, name.partition(":")[2])


def innermost(trace: RankTrace, name_ids: Collection[int],
              kinds: tuple[Kind, ...] = _RANGE_KINDS) -> npt.NDArray[np.intp]:
    """The ranges (of ``kinds``: user annotations or operators) of these names that hold no other one of them, in
    start order."""
    if not name_ids:
        return np.empty(0, np.intp)
    ev = trace.events
    idx = np.flatnonzero(ev.mask(*kinds) & np.isin(ev.name_id, np.fromiter(name_ids, dtype=np.int64)))
    # Ranges nest or follow one another: in start order (the longer first at one start), a range holds another
    # exactly when the next one starts and ends inside it.
    idx = idx[np.lexsort((-ev.end_ns[idx], ev.ts_ns[idx]))]
    starts, ends = ev.ts_ns[idx], ev.end_ns[idx]
    holds = np.zeros(idx.size, dtype=bool)
    holds[:-1] = (starts[1:] <= ends[:-1]) & (ends[1:] <= ends[:-1])
    return idx[~holds]


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None
