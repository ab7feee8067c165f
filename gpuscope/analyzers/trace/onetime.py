"""One-time work in a trace: what start-up looks like, whatever its calls are named.

A trace that starts at a job's first call holds work that never comes back:

- **CUDA/HIP initialisation.** The driver and the context come up lazily inside whatever runtime call comes
  first (``cuInit``, ``cudaFree(0)``, a device query such as ``cudaDeviceGetStreamPriorityRange``), and the
  caching allocator, library handles and modules inside the first ``cudaMalloc``, handle creation and module
  load. Warm, these calls take microseconds: one of them over 10 ms is start-up, and so is a first runtime call
  of the trace over 100 ms, whatever its name, unless it is one that waits for the GPU (a copy, a set, a sync).
- **NCCL/RCCL communicator init** (``ncclCommInitRank*``, ``ncclCommSplit``) and the c10d ranges around it (the
  collective or process-group calls on its thread that hold it; not the Python frames that hold everything).
- **cuDNN/MIOpen autotuning.** In benchmark mode the first convolution of each shape times every algorithm
  with CUDA events: a convolution that calls ``cudaEventElapsedTime`` is searching, not computing.
- **torch.compile compilation** (Dynamo's ``(dynamo_timed)`` ranges) and **CUDA-graph capture**.
- **Any other one-time first call**: an operator, annotation or runtime call whose first call, less the time it
  waited on the GPU, is over 100 ms and more than 10 times the median of its later calls (at least two). A
  shorter one is as likely a pause (the OS, the garbage collector) as start-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.intervals import EMPTY, Intervals, merge, union
from gpuscope.model.trace import CPU_KINDS, Kind, RankTrace

INIT_MIN_NS = 10_000_000
"""A runtime call of an initialising kind that takes longer than 10 ms is start-up (warm, these take µs)."""
FIRST_CALL_MIN_NS = 100_000_000
"""The trace's first runtime call over 100 ms is context creation, whatever its name (creating a context takes
from a few hundred ms to seconds; no warm call that does not wait on the GPU takes that long); and any first call
over 100 ms and far slower than its later calls is one-time work."""
FIRST_CALL_SLOW = 10.0
"""A first call this many times the median of the later calls of its name is a one-time first call."""
LATER_CALLS_MIN = 2

# Calls that initialise the driver, a context, the caching allocator, library handles or modules, or query the
# device (CUDA runtime/driver and their HIP names). Long only the first time: none of them waits on the GPU.
_INIT_CALLS = re.compile(
    r"^(?:cuda|hip)(?:Free|Malloc|MallocHost|HostAlloc|MallocAsync|FreeHost|StreamCreate\w*|EventCreate\w*"
    r"|GetDevice\w*|SetDevice\w*|DeviceGet\w+|DeviceSet\w+|DeviceCanAccessPeer|DeviceEnablePeerAccess"
    r"|DriverGetVersion|RuntimeGetVersion|FuncGetAttributes|FuncSetAttribute|Init"
    r"|Ctx(?:Create\w*|Get\w+|Set\w+))$"
    r"|^cu(?:Init|Device\w+|DevicePrimaryCtx\w+|Ctx(?:Create\w*|Get\w+|Set\w+)|ModuleLoad\w*|ModuleGetFunction"
    r"|LibraryLoad\w*|MemAlloc\w*|DriverGetVersion)$"
)
# Calls whose time is a wait for the GPU (or a copy): long in the steady state too.
_WAITS = re.compile(r"Synchroni[sz]e|Memcpy|Memset|Query|Wait|Elapsed|Graph(?:Launch|Upload)")
_CAPTURE_BEGIN = re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture\w*$")
_CAPTURE_END = re.compile(r"^(?:cuda|hip|cu)StreamEndCapture\w*$")
_GRAPH_SETUP = re.compile(r"^(?:cuda|hip|cu)Graph(?:Instantiate\w*|Upload|Destroy|ExecDestroy)$")
# torch.compile: dynamo_timed wraps each phase in record_function(f"{key} (dynamo_timed)") (torch/_dynamo/utils.py).
_COMPILE = re.compile(r"\(dynamo_timed\)$"
                      r"|^(?:_compile\.compile_inner|compile_fx_inner|OutputGraph\.call_user_compiler)$")
_NCCL_INIT = re.compile(r"^(?:nccl|rccl)Comm(?:Init\w*|Split\w*)$")
# The c10d ranges that set a communicator up: the collective or process-group call around the init.
_C10D = re.compile(r"c10d|nccl|rccl|gloo|ProcessGroup|process_group|record_param_comms|barrier|all_?reduce"
                   r"|all_?gather|broadcast|reduce_?scatter|all_?to_?all", re.IGNORECASE)
_CONVOLUTION = re.compile(r"conv(?:olution)?(?:_?[123]d|_backward|_transpose\w*|$)|cudnn|miopen", re.IGNORECASE)
_ELAPSED = re.compile(r"^(?:cuda|hip|cu)EventElapsedTime\w*$")

INIT, CAPTURE, COMPILE = "CUDA/HIP initialisation", "CUDA-graph capture", "torch.compile compilation"
NCCL_INIT, AUTOTUNE, FIRST_CALLS = "NCCL/RCCL communicator init", "cuDNN/MIOpen autotuning", "one-time first calls"


@dataclass(frozen=True)
class StartupSpans:
    """Start-up on one rank: where it lies, and how much of each kind (ns, overlaps counted once per kind)."""

    intervals: Intervals
    parts_ns: dict[str, int]
    calls: tuple[str, ...] = ()
    """The initialising calls seen (for the finding's words), most time first."""


def find_startup(trace: RankTrace) -> StartupSpans:
    """Every kind of one-time work in the trace, and where it lies."""
    ev = trace.events
    init = trace.name_mask(lambda s: _INIT_CALLS.search(s) is not None, Kind.RUNTIME) & (ev.dur_ns >= INIT_MIN_NS)
    init |= _first_runtime_call(trace)
    found = {INIT: merge(ev.ts_ns[init], ev.end_ns[init]), CAPTURE: _capture_spans(trace),
             COMPILE: _named_spans(trace, _COMPILE, *CPU_KINDS), NCCL_INIT: _nccl_init(trace),
             AUTOTUNE: _autotuning(trace), FIRST_CALLS: _first_calls(trace)}
    parts = {kind: spans for kind, spans in found.items() if len(spans)}
    if not parts:
        return StartupSpans(EMPTY, {})
    names = [trace.names[i] for i in ev.name_id[init].tolist()]
    calls = tuple(sorted(set(names), key=lambda n: -int(ev.dur_ns[init][[m == n for m in names]].sum())))
    return StartupSpans(union(*parts.values()), {k: v.total for k, v in parts.items()}, calls)


def _first_runtime_call(trace: RankTrace) -> npt.NDArray[np.bool_]:
    """The trace's first runtime call, when it is long and not one that waits on the GPU: context creation."""
    ev = trace.events
    hit = np.zeros(len(ev), dtype=bool)
    runtime = np.flatnonzero(ev.mask(Kind.RUNTIME))
    if runtime.size:
        first = int(runtime[0])
        if ev.dur_ns[first] >= FIRST_CALL_MIN_NS and not _WAITS.search(trace.names[int(ev.name_id[first])]):
            hit[first] = True
    return hit


def _named_spans(trace: RankTrace, pattern: re.Pattern[str], *kinds: Kind) -> Intervals:
    ev = trace.events
    sel = trace.name_mask(lambda s: pattern.search(s) is not None, *kinds)
    return merge(ev.ts_ns[sel], ev.end_ns[sel]) if sel.any() else EMPTY


def _nccl_init(trace: RankTrace) -> Intervals:
    """Communicator init, and the host ranges on its thread that hold it (the c10d call that set it up)."""
    ev = trace.events
    init = np.flatnonzero(trace.name_mask(lambda s: _NCCL_INIT.search(s) is not None))
    if not init.size:
        return EMPTY
    host = trace.name_mask(lambda s: _C10D.search(s) is not None, Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME)
    spans = [merge(ev.ts_ns[init], ev.end_ns[init])]
    for i in init.tolist():
        around = host & (ev.tid == ev.tid[i]) & (ev.ts_ns <= ev.ts_ns[i]) & (ev.end_ns >= ev.end_ns[i])
        spans.append(merge(ev.ts_ns[around], ev.end_ns[around]))
    return union(*spans)


def _autotuning(trace: RankTrace) -> Intervals:
    """Convolutions that time algorithms with CUDA/HIP events (cuDNN's benchmark mode, MIOpen's find)."""
    ev = trace.events
    elapsed = np.flatnonzero(trace.name_mask(lambda s: _ELAPSED.search(s) is not None, Kind.RUNTIME))
    if not elapsed.size:
        return EMPTY
    conv = trace.name_mask(lambda s: _CONVOLUTION.search(s) is not None, Kind.CPU_OP, Kind.USER_ANNOTATION)
    hits = np.zeros(len(ev), dtype=bool)
    for tid in np.unique(ev.tid[elapsed]).tolist():
        times = np.sort(ev.ts_ns[elapsed[ev.tid[elapsed] == tid]], kind="stable")
        ops = np.flatnonzero(conv & (ev.tid == tid))
        inside = np.searchsorted(times, ev.end_ns[ops], "right") - np.searchsorted(times, ev.ts_ns[ops], "left")
        hits[ops[inside > 0]] = True
    return merge(ev.ts_ns[hits], ev.end_ns[hits]) if hits.any() else EMPTY


def _first_calls(trace: RankTrace) -> Intervals:
    """First calls far slower than the later calls of their name, less what they waited on the GPU."""
    ev = trace.events
    pool = np.flatnonzero(ev.mask(Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME))
    if not pool.size:
        return EMPTY
    by_name = pool[np.argsort(ev.name_id[pool], kind="stable")]  # each name's calls in time order
    names, starts, counts = np.unique(ev.name_id[by_name], return_index=True, return_counts=True)
    first = by_name[starts]
    slow = (counts > LATER_CALLS_MIN) & (ev.dur_ns[first] >= FIRST_CALL_MIN_NS)
    waits = trace.name_mask(lambda s: _WAITS.search(s) is not None, Kind.RUNTIME)
    wait_ids = np.flatnonzero(waits)
    hits = []
    for k in np.flatnonzero(slow & ~waits[first]).tolist():
        i = int(first[k])
        typical = FIRST_CALL_SLOW * float(np.median(ev.dur_ns[by_name[starts[k] + 1: starts[k] + counts[k]]]))
        if ev.dur_ns[i] <= typical:
            continue
        w = wait_ids[(ev.tid[wait_ids] == ev.tid[i]) & (ev.ts_ns[wait_ids] >= ev.ts_ns[i])
                     & (ev.end_ns[wait_ids] <= ev.end_ns[i])]
        own = int(ev.dur_ns[i]) - int(ev.dur_ns[w].sum())
        if own >= FIRST_CALL_MIN_NS and own > typical:
            hits.append(i)
    if not hits:
        return EMPTY
    return merge(ev.ts_ns[hits], ev.end_ns[hits])


def _capture_spans(trace: RankTrace) -> Intervals:
    """From each stream-capture begin to the end of capture on the same thread, plus graph instantiation."""
    ev = trace.events
    begin = np.flatnonzero(trace.name_mask(lambda s: _CAPTURE_BEGIN.search(s) is not None, Kind.RUNTIME))
    end = np.flatnonzero(trace.name_mask(lambda s: _CAPTURE_END.search(s) is not None, Kind.RUNTIME))
    starts, ends = [], []
    for b in begin.tolist():
        later = end[(ev.tid[end] == ev.tid[b]) & (ev.ts_ns[end] >= ev.ts_ns[b])]
        if later.size:
            starts.append(int(ev.ts_ns[b]))
            ends.append(int(ev.end_ns[later[0]]))
    setup = trace.name_mask(lambda s: _GRAPH_SETUP.search(s) is not None, Kind.RUNTIME)
    starts.extend(ev.ts_ns[setup].tolist())
    ends.extend(ev.end_ns[setup].tolist())
    if not starts:
        return EMPTY
    return merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
