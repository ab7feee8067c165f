"""Device memory over a recording: what filled it at the peak, what that was made of, and what to change.

A memory snapshot (``torch.cuda.memory._dump_snapshot``) or a profiler trace's ``[memory]`` events are replayed
into one history per device (``history``): allocations with their lifetimes and the place they were made. From
it come the peak, the allocations live then grouped by place, their makeup (parameters, gradients, optimizer
state, activations, temporaries), a downsampled timeline, fragmentation, out-of-memory events and the advice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuscope.analyzers.memory.report import MemoryOptions, build_memory_report
from gpuscope.analyzers.memory.snapshot_replay import replay_snapshot
from gpuscope.analyzers.memory.trace_replay import replay_trace
from gpuscope.model.memory import MemoryReport, ReadStats
from gpuscope.model.report import Report
from gpuscope.model.snapshot import MemorySnapshot
from gpuscope.model.trace import RankTrace


def snapshot_memory(snap: MemorySnapshot, options: MemoryOptions = MemoryOptions(), *,
                    run_id: str | None = None) -> MemoryReport:
    """The memory report of a snapshot."""
    histories, warnings = replay_snapshot(snap)
    read = ReadStats(actions=sum(len(d.actions) for d in snap.devices), distinct_frames=len(snap.frames),
                     distinct_stacks=len(snap.stacks), file_bytes=None)
    return build_memory_report(histories, source=snap.source, kind="snapshot", options=options,
                               expandable_segments=snap.expandable_segments, read=read,
                               warnings=(*snap.warnings, *warnings), run_id=run_id)


def trace_memory(traces: Sequence[RankTrace], options: MemoryOptions = MemoryOptions(), *, source: str,
                 run_id: str | None = None, analysis: Report | None = None) -> MemoryReport:
    """The memory report of a run's traces: one device entry per rank and GPU its memory events name. The run's
    ``analysis`` gives how its step splits (``fixed_step_share``, ``compute_share``) where ``options`` does not,
    and the traces the ranks a job shards over."""
    fixed, compute = step_split(analysis)
    sizes = [t.world_size for t in traces if t.world_size]
    options = replace(options, fixed_step_share=options.fixed_step_share if options.fixed_step_share is not None
                      else fixed, compute_share=options.compute_share if options.compute_share is not None
                      else compute, world_size=options.world_size or (max(sizes) if sizes else None))
    histories = []
    warnings = [line for t in traces for line in t.warnings]  # what reading left out, as analyze says it
    for trace in traces:
        found, said = replay_trace(trace)
        histories += found
        warnings += said
    if not histories:
        warnings.append("no GPU memory events in the trace (record it with profile_memory=True)")
    read = ReadStats(actions=sum(len(t.memory.ts_ns) for t in traces), distinct_frames=0, distinct_stacks=0,
                     file_bytes=None)
    return build_memory_report(histories, source=source, kind="trace", options=options, read=read,
                               warnings=tuple(warnings), run_id=run_id)


def step_split(analysis: Report | None) -> tuple[float | None, float | None]:
    """From a run's analysis: the share of its step that does not grow with the batch (launch and host overhead,
    exposed communication: per-step costs) and its GPU compute share; None where the analysis has no stages."""
    shares = analysis.stage_shares if analysis is not None else {}
    fixed = [shares.get(s) for s in ("host_overhead", "communication")]
    if all(v is None for v in fixed):
        return None, None
    return sum(v or 0.0 for v in fixed), shares.get("gpu_compute")


__all__ = ["MemoryOptions", "build_memory_report", "snapshot_memory", "step_split", "trace_memory"]
