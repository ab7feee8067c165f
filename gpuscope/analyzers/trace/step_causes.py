"""What took the extra time of a rank's slow steps: the ranges that were long in that step and not in the others.

For each steady step at least ``step_stats.FLOOR`` longer than the rank's median (every step the job's outlier rule
could name, ``step_stats.long_mask``), each named range's time in the step (its events of that name summed,
clipped to the step) is set against its median time over the rank's steady steps. The ranges whose excess is at
least half the step's own excess took the extra time. An enclosing range holds at least the excess of the ranges
inside it, so sorting by excess puts ``save_checkpoint`` before the operators it ran. When no range qualifies, the
extra time was spent outside every traced range (Python between operators, the garbage collector, the OS).

The ranges: host operators, ``record_function`` ranges, Python functions, runtime calls, GPU kernels and copies;
the ``ProfilerStep`` ranges themselves are left out. Computed only for the rank's slow steps, while its events are
at hand: the report keeps the findings, not the events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.step_stats import long_mask
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.model.rank import LongRange, RangeKind, SlowStep
from gpuscope.model.trace import Kind, RankTrace

CAUSE_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
CAUSE_MIN = 0.5
"""A range took a slow step's extra time when its own excess is at least half the step's."""
MAX_RANGES = 3
_KIND_WORDS: dict[int, RangeKind] = {Kind.CPU_OP: "operator", Kind.USER_ANNOTATION: "record_function",
                                     Kind.PYTHON: "python", Kind.RUNTIME: "runtime", Kind.KERNEL: "kernel",
                                     Kind.MEMCPY: "memcpy", Kind.MEMSET: "memset"}


def slow_steps(trace: RankTrace, steps: Steps, steady: npt.NDArray[np.bool_]) -> tuple[SlowStep, ...]:
    """The rank's steady steps past the floor over its median, each with the ranges that took its extra time.
    ``steady``: which of ``steps`` are steady (not warm-up)."""
    idx = np.flatnonzero(steady)
    durations = (steps.ends_ns[idx] - steps.starts_ns[idx]).astype(np.float64)
    slow = long_mask(durations)
    if not slow.any():
        return ()
    median_ns = float(np.median(durations))
    times = _range_times_ns(trace, steps.starts_ns[idx], steps.ends_ns[idx], slow)
    out = []
    for j in np.flatnonzero(slow).tolist():
        extra_ns = float(durations[j]) - median_ns
        out.append(SlowStep(step=steps.names[int(idx[j])], duration_us=float(durations[j]) / 1000,
                            extra_us=extra_ns / 1000, ranges=_long_ranges(trace, times, j, extra_ns)))
    return tuple(out)


@dataclass(frozen=True)
class _RangeTimes:
    """Time per range and steady step: one row per range (its name id and kind), one column per step (ns)."""

    name_ids: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.uint8]
    ns: npt.NDArray[np.float64]


def _range_times_ns(trace: RankTrace, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64],
                    slow: npt.NDArray[np.bool_]) -> _RangeTimes:
    """Each range's time in each step, for the ranges that ran in a slow step (no other can have taken its time)."""
    ev = trace.events
    sel = np.flatnonzero(ev.mask(*CAUSE_KINDS))
    step_of = np.searchsorted(starts, ev.ts_ns[sel], side="right") - 1
    ok = step_of >= 0
    ok[ok] = ev.ts_ns[sel[ok]] < ends[step_of[ok]]
    sel, step_of = sel[ok], step_of[ok]
    # Kind and name together: a kernel and an operator may share a name.
    key = ev.name_id[sel].astype(np.int64) * 256 + ev.kind[sel].astype(np.int64)
    keep = np.isin(key, key[slow[step_of]])
    sel, step_of, key = sel[keep], step_of[keep], key[keep]
    # An event counts in the step it starts in, clipped to that step's end.
    clipped = np.minimum(ev.end_ns[sel], ends[step_of]) - ev.ts_ns[sel]
    keys, inverse = np.unique(key, return_inverse=True)
    n = starts.size
    dense = np.bincount(inverse * n + step_of, weights=clipped.astype(np.float64),
                        minlength=keys.size * n).reshape(keys.size, n)
    return _RangeTimes(keys // 256, (keys % 256).astype(np.uint8), dense.astype(np.float64))


def _long_ranges(trace: RankTrace, t: _RangeTimes, j: int, extra_ns: float) -> tuple[LongRange, ...]:
    if extra_ns <= 0 or t.ns.size == 0:
        return ()
    excess = t.ns[:, j] - np.median(t.ns, axis=1)
    hits = np.flatnonzero(excess >= CAUSE_MIN * extra_ns)
    # Most excess first; on equal excess the range with more time in the step, so an enclosing range (which holds
    # at least the time of the ranges inside it) comes before them.
    hits = hits[np.lexsort((-t.ns[hits, j], -excess[hits]))][:MAX_RANGES]
    return tuple(LongRange(name=trace.names[int(t.name_ids[k])], kind=_kind(trace.names[int(t.name_ids[k])],
                                                                            int(t.kinds[k])),
                           time_us=float(t.ns[k, j]) / 1000, extra_us=float(excess[k]) / 1000)
                 for k in hits.tolist())


def _kind(name: str, kind: int) -> RangeKind:
    if kind in (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON) and classify.is_dataloader_op(name):
        return "dataloader"
    if (kind == Kind.KERNEL and classify.is_comm_kernel(name)) or (
            kind in (Kind.CPU_OP, Kind.USER_ANNOTATION) and classify.is_collective_op(name)):
        return "collective"
    if kind == Kind.RUNTIME and classify.is_sync_runtime(name):
        return "sync"
    return _KIND_WORDS[kind]
