"""Graph replays given to the operators that captured their kernels, from a capture trace (``traces.capture``).

A replay runs under one ``cudaGraphLaunch``: a trace shows its kernels but no operator launched them, so an operator
view puts nearly all of a decode step under the launch call. The capture trace says which operator launched each
kernel into the graph. A replayed graph is matched to the capture whose kernels it ran (the most kernel calls in
common, by name, and at least ``MATCH_MIN`` of the replay's); each kernel's replayed time then goes to the operators
that launched a kernel of that name in the capture, in proportion to how many each launched. Replays whose kernels
the trace did not record are given the kernels and operators of the capture when there is one capture.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from gpuscope.model.serving import CapturedGraph, GraphKernel, GraphReplay, ServingReport

MATCH_MIN = 0.8
"""Share of a replay's kernel calls its capture must hold for the two to be one graph."""
UNKNOWN_OPERATOR = "(no operator)"


def with_captures(serving: ServingReport | None, captures: Sequence[CapturedGraph]) -> ServingReport | None:
    """``serving`` with each recorded graph named after its capture and its time given to operators."""
    if serving is None or not captures or not serving.graphs:
        return serving
    return replace(serving, graphs=tuple(attribute(g, captures) for g in serving.graphs))


def attribute(graph: GraphReplay, captures: Sequence[CapturedGraph]) -> GraphReplay:
    """The graph with its operators (and its capture's name) where a capture matches it; else as it was."""
    if not graph.recorded:
        return _unrecorded(graph, captures)
    if not graph.kernels:
        return graph
    calls = Counter({k.name: k.calls for k in graph.kernels})
    total = sum(calls.values())
    best, held = None, 0
    for capture in captures:
        per_replay = Counter(capture.kernels)
        common = sum(min(n, per_replay[name] * graph.replays) for name, n in calls.items())
        if common > held:
            best, held = capture, common
    if best is None or held < MATCH_MIN * total:
        return graph
    launched: dict[str, Counter[str]] = {}
    for kernel, operator in zip(best.kernels, best.operators):
        launched.setdefault(kernel, Counter())[operator or UNKNOWN_OPERATOR] += 1
    time_by: dict[str, float] = {}
    calls_by: Counter[str] = Counter()
    for k in graph.kernels:
        owners = launched.get(k.name) or Counter({UNKNOWN_OPERATOR: 1})
        n = sum(owners.values())
        for op, count in owners.items():
            time_by[op] = time_by.get(op, 0.0) + (k.total_us or 0.0) * count / n
            calls_by[op] += round(k.calls * count / n)
    operators = tuple(GraphKernel(name=op, calls=calls_by[op], total_us=t)
                      for op, t in sorted(time_by.items(), key=lambda item: -item[1]))
    return replace(graph, name=f"{graph.name} ({best.name})", operators=operators)


def _unrecorded(graph: GraphReplay, captures: Sequence[CapturedGraph]) -> GraphReplay:
    """Replays whose kernels the trace lacks, and one capture: its kernels and operators are what they ran (calls
    per replay times the replays; their time stays the graph's, unknown per kernel). With several captures nothing
    says which graph a replay was: left as it was."""
    if len(captures) != 1:
        return graph
    (capture,) = captures
    kernels = Counter(capture.kernels)
    operators = Counter(op or UNKNOWN_OPERATOR for op in capture.operators)
    return replace(graph, name=f"{graph.name} ({capture.name})", kernels_per_replay=len(capture.kernels),
                   kernels=tuple(GraphKernel(name=k, calls=n * graph.replays, total_us=None)
                                 for k, n in kernels.most_common()),
                   operators=tuple(GraphKernel(name=op, calls=n * graph.replays, total_us=None)
                                   for op, n in operators.most_common()))
