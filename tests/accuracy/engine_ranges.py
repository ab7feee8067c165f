"""A serving engine's step ranges, found in a trace's raw events for the independent checks (``test_flops``,
``test_busy_and_steps``): the ranges SGLang (``step[EXTEND ...]``, ``step[DECODE ...]``, ...) and vLLM
(``execute_context_N(T)_generation_M(G)``, ``execute_N_context_...``) mark a forward with, else vLLM's
``execute_model``; the innermost where they nest. Written from the engines' names, not from gpuscope's recogniser."""

from __future__ import annotations

from typing import Any

PHASES = ("step[EXTEND", "step[PREFILL", "step[DECODE", "step[MIXED", "step[TARGET_VERIFY", "execute_context_")
HOST = ("user_annotation", "cpu_op")


def _phase(name: str) -> bool:
    parts = name.split("_")
    return name.startswith(PHASES) or (name.startswith("execute_") and "_context_" in name and parts[1].isdigit())


def engine_ranges(evs: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The engine's step ranges as (start, end) in µs, in time order."""
    hosts = [e for e in evs if str(e.get("cat", "")).lower() in HOST]
    chosen = [e for e in hosts if _phase(str(e.get("name", "")))] or [
        e for e in hosts if e.get("name") == "execute_model"]
    spans = sorted({(e["ts"], e["ts"] + e["dur"]) for e in chosen})
    # innermost: a range that holds no other of them
    return [(s, t) for s, t in spans if not any(s <= a and b <= t and (a, b) != (s, t) for a, b in spans)]
