"""A profiler trace's ``[memory]`` events replayed into each GPU's ``DeviceHistory``.

Which events are each GPU's, and what they say was allocated, are the rules the analysis's own peak goes by
(``gpuscope.analyzers.trace.memory``: every GPU device type, HIP's on ROCm included; the allocator's own totals,
"Total Allocated", where the trace records them: the device's whole). Older traces record only each event's
``Bytes``: their running sum counts from the trace's start, so it is relative (a lower bound of the peak) and said
so. Times are made epoch times by the trace's own clock (``RankTrace.epoch_offset_ns``: Kineto's
``baseTimeNanoseconds``, which newer PyTorch counts ``ts`` from). An allocation is paired with its free by address
("Addr"), and named by the op it was made in: the outermost host op around it on its thread (``aten::linear``, or
the autograd node ``autograd::engine::evaluate_function: MmBackward0`` in backward), with the Python frames around
it where the trace recorded them (``with_stack``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.memory.history import (
    BEFORE,
    BEFORE_SITE,
    I32,
    I64,
    U8,
    Allocations,
    DeviceHistory,
    Phase,
    Site,
    pair_by_address,
)
from gpuscope.analyzers.memory.sites import MAX_FRAMES, label_of, phase_of_ops, trace_frame
from gpuscope.analyzers.trace.memory import allocated_bytes, gpu_events
from gpuscope.analyzers.trace.optree import DROPPED, call_tree
from gpuscope.model.trace import Kind, RankTrace

NO_OP_SITE = Site(frames=None, op=None, label="outside any recorded op")
MAX_DEPTH = 256


def replay_trace(trace: RankTrace) -> tuple[list[DeviceHistory], list[str]]:
    """Each GPU's history in the trace's memory events, and what could not be told (one line each)."""
    picked = gpu_events(trace.memory)
    warnings: list[str] = []
    if not picked:
        return [], warnings
    chains = _Chains(trace)
    sizes = {g.index: g.memory_bytes for g in trace.gpus}
    histories = [_device(trace, d, sel, chains, sizes.get(d), warnings) for d, sel in picked.items()]
    return histories, warnings


def _device(trace: RankTrace, device: int, sel: I64, chains: _Chains, size: int | None,
            warnings: list[str]) -> DeviceHistory:
    mem = trace.memory
    n = sel.size
    moved = mem.bytes[sel]
    total = mem.total_allocated_bytes[sel]
    allocated, absolute = allocated_bytes(mem, sel)
    reserved_raw = mem.total_reserved_bytes[sel]
    reserved = reserved_raw if bool((reserved_raw >= 0).all()) else None
    start = int(total[0] - moved[0]) if absolute else None
    made = np.flatnonzero(moved > 0)
    freed = np.flatnonzero(moved < 0)
    addr = mem.addr[sel]
    site_of, phase_of, sites = chains.sites(mem.tid[sel][made], mem.ts_ns[sel][made])
    if bool((addr[np.r_[made, freed]] < 0).any()):
        warnings.append(f"rank {trace.rank} GPU {device}: its memory events carry no addresses, so what was live at "
                        "the peak cannot be told (only the totals)")
        allocs = Allocations.empty()
    else:
        allocs = _allocations(moved, addr, made, freed, n, start, site_of, phase_of)
    offset = trace.epoch_offset_ns
    return DeviceHistory(
        device=device, rank=trace.rank, time_us=(mem.ts_ns[sel] + (offset or 0)) // 1000,
        epoch_times=offset is not None, allocated_bytes=allocated.astype(np.int64),
        reserved_bytes=None if reserved is None else reserved.astype(np.int64), absolute=absolute,
        start_allocated_bytes=start, allocations=allocs, sites=(BEFORE_SITE, NO_OP_SITE, *sites),
        alloc_events=made.astype(np.int64), alloc_phase=phase_of, device_bytes=size,
        device_bytes_source="the trace's deviceProperties" if size is not None else None)


def _allocations(moved: I64, addr: I64, made: I64, freed: I64, n: int, start: int | None, site_of: I32,
                 phase_of: U8) -> Allocations:
    end, orphans = pair_by_address(addr, made, freed, n)
    columns: list[list[npt.NDArray[Any]]] = [
        [moved[made], -moved[orphans]], [made, np.full(orphans.size, BEFORE)], [end, orphans],
        [site_of, np.zeros(orphans.size, np.int32)], [phase_of, np.full(orphans.size, Phase.BEFORE)],
        [addr[made], addr[orphans]]]
    rest = None if start is None else start - int(-moved[orphans].sum())
    if rest is not None and rest > 0:  # live at the start and never freed in the trace: no address to name it by
        for col, value in zip(columns, (rest, BEFORE, n, 0, Phase.BEFORE, -1)):
            col.append(np.array([value]))
    size, first, last, site, phase, at = (np.concatenate(c) for c in columns)
    return Allocations(size_bytes=size.astype(np.int64), start=first.astype(np.int64), end=last.astype(np.int64),
                       site=site.astype(np.int32), phase=phase.astype(np.uint8), addr=at.astype(np.int64))


class _Chains:
    """The host events around a moment on a thread, innermost first, from the trace's call tree."""

    def __init__(self, trace: RankTrace) -> None:
        tree = call_tree(trace)
        ev = trace.events
        self.names = trace.names
        self.event = tree.event
        self.parent = tree.parent.tolist()
        self.tid = ev.tid[tree.event]
        self.ts = ev.ts_ns[tree.event]
        self.end = ev.end_ns[tree.event].tolist()
        self.kind = ev.kind[tree.event].tolist()
        self.name_id = ev.name_id[tree.event].tolist()

    def chain(self, tid: int, ts: int) -> list[int]:
        lo, hi = np.searchsorted(self.tid, tid, side="left"), np.searchsorted(self.tid, tid, side="right")
        k = int(lo + np.searchsorted(self.ts[lo:hi], ts, side="right")) - 1
        out: list[int] = []
        while k >= lo and len(out) < MAX_DEPTH:
            if self.ts[k] <= ts <= self.end[k]:
                out.append(k)
                k = self.parent[k] if self.parent[k] >= 0 else -1
            else:
                k = self.parent[k] if self.parent[k] >= 0 else (k - 1 if self.parent[k] == DROPPED else -1)
        return out

    def sites(self, tids: I64, ts: I64) -> tuple[I32, U8, list[Site]]:
        """For each allocation: its place (index into the returned sites, after the two fixed ones) and phase."""
        index: dict[tuple[str | None, tuple[object, ...]], int] = {}
        sites: list[Site] = []
        site_of = np.ones(tids.size, dtype=np.int32)
        phase_of = np.zeros(tids.size, dtype=np.uint8)
        for j, (t, s) in enumerate(zip(tids.tolist(), ts.tolist())):
            chain = self.chain(t, s)
            names = [self.names[self.name_id[k]] for k in chain]
            phase_of[j] = phase_of_ops(names)
            ops = [nm for k, nm in zip(chain, names) if self.kind[k] == Kind.CPU_OP]
            frames = tuple(trace_frame(nm) for k, nm in zip(chain, names) if self.kind[k] == Kind.PYTHON)[:MAX_FRAMES]
            if not ops and not frames:
                continue
            key = (ops[-1] if ops else None, frames)
            if key not in index:
                index[key] = len(sites) + 2
                label = key[0] or label_of(frames)
                sites.append(Site(frames=frames or None, op=key[0], label=label))
            site_of[j] = index[key]
        return site_of, phase_of, sites
