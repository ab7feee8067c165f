"""A memory snapshot's allocator actions replayed into each device's ``DeviceHistory``.

Allocated bytes rise at ``alloc`` and fall at ``free_requested``, as the allocator's own ``allocated_bytes`` counter
does (``torch.cuda.max_memory_allocated``); a block whose free waits on another stream stays reserved until
``free_completed``. The trace covers only the time since ``_record_memory_history``: what was live when it began is
what the segments hold at the end minus the trace's net allocations, so the totals are the device's whole, not
the trace's share. Bytes are as requested, the unit of the trace's sizes (a block's ``requested_size``; the
allocator rounds each block up, by at most 512 bytes for small ones and under 1 MiB for large ones, and
``torch.cuda.max_memory_allocated`` counts the rounded sizes). Reserved bytes are the segments' sizes at the end,
unwound through the trace's ``segment_alloc``/``segment_free`` (and ``segment_map``/``segment_unmap`` of
expandable segments).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    OomAt,
    Phase,
    Site,
    pair_by_address,
)
from gpuscope.analyzers.memory.sane import sane_devices
from gpuscope.analyzers.memory.sites import snapshot_sites
from gpuscope.model.snapshot import NO_STACK, Action, DeviceSnapshot, MemorySnapshot

OOM_SIZE_SOURCE = ("at least: what the driver called free plus what the allocator held at the out-of-memory event "
                   "(the CUDA context and other processes' memory not counted; --gpu or --device-gib to say)")
NO_PYTHON_SITE = Site(frames=(), op=None, label="no frames recorded (a thread without Python: the autograd "
                                                 "engine's, most likely)")


@dataclass(frozen=True)
class _Stacks:
    """The snapshot's stacks as places and phases; site 0 is "before the recording", 1 "no frames"."""

    sites: tuple[Site, ...]
    site_of: I32
    phase_of: U8
    empty: npt.NDArray[np.bool_]
    """Per stack: it holds no frame at all."""


def replay_snapshot(snap: MemorySnapshot) -> tuple[list[DeviceHistory], list[str]]:
    """Each device's history, and what could not be reconciled (one line each)."""
    found, site_of, phase_of = snapshot_sites(snap.frames, snap.stacks)
    stacks = _Stacks(sites=(BEFORE_SITE, NO_PYTHON_SITE, *found), site_of=site_of + 2, phase_of=phase_of,
                     empty=np.array([len(s) == 0 for s in snap.stacks], dtype=bool))
    steps = _optimizer_steps(snap)
    devices, warnings = sane_devices(snap)
    histories = [_device(dev, stacks, steps, warnings) for dev in devices]
    return histories, warnings


def _optimizer_steps(snap: MemorySnapshot) -> tuple[tuple[int, int], ...]:
    """(start, end) times of the optimizer steps the snapshot's annotations mark."""
    out: list[tuple[int, int]] = []
    open_at: dict[str, int] = {}
    for a in sorted(snap.annotations, key=lambda a: a.time_us):
        if not a.name.startswith("Optimizer."):
            continue
        if a.stage == "START":
            open_at[a.name] = a.time_us
        elif a.stage == "END" and a.name in open_at:
            out.append((open_at.pop(a.name), a.time_us))
    return tuple(out)


def _device(dev: DeviceSnapshot, stacks: _Stacks, steps: tuple[tuple[int, int], ...],
            warnings: list[str]) -> DeviceHistory:
    a = dev.actions
    n = len(a)
    is_alloc = a.action == Action.ALLOC
    is_free = a.action == Action.FREE_REQUESTED
    delta = np.where(is_alloc, a.size_bytes, np.where(is_free, -a.size_bytes, 0))
    cum = np.cumsum(delta)
    net = int(cum[-1]) if n else 0
    has_segments = len(dev.segments.address) > 0
    end_allocated = int(dev.segments.allocated_bytes.sum()) if has_segments else None
    start = None if end_allocated is None else end_allocated - net
    if start is not None and start < 0:
        warnings.append(f"device {dev.device}: its trace frees {-start} bytes more than its segments and trace "
                        "account for (a trace cut short?): its totals are relative to the trace's start")
        start = None
    allocated = cum + (start or 0)
    reserved = _reserved(dev) if has_segments else None
    phases = _alloc_phases(dev, stacks, steps)
    allocs = _allocations(dev, stacks, phases, start, warnings)
    size = _size_at_oom(dev, reserved)
    return DeviceHistory(
        device=dev.device, rank=None, time_us=a.time_us, allocated_bytes=allocated, reserved_bytes=reserved,
        absolute=start is not None, start_allocated_bytes=start, allocations=allocs, sites=stacks.sites,
        alloc_events=np.flatnonzero(is_alloc).astype(np.int64), alloc_phase=phases,
        phase_ends_us=steps, largest_free_at_peak_bytes=_largest_free(dev, allocs, allocated),
        ooms=tuple(OomAt(o.index, o.requested_bytes, o.device_free_bytes) for o in dev.ooms),
        device_bytes=size, device_bytes_source=OOM_SIZE_SOURCE if size is not None else None)


def _size_at_oom(dev: DeviceSnapshot, reserved: I64 | None) -> int | None:
    """The device's size as an out-of-memory event shows it: what the driver said was free then plus what the
    allocator held (reserved); the most over the events. A lower bound: the CUDA context, other libraries' and
    other processes' memory are in neither. None without an event that records what was free, or without the
    segments that say what was reserved."""
    if reserved is None:
        return None
    sizes = [o.device_free_bytes + int(reserved[o.index]) for o in dev.ooms
             if o.device_free_bytes is not None and 0 <= o.index < len(reserved)]
    return max(sizes) if sizes else None


def _reserved(dev: DeviceSnapshot) -> I64:
    a = dev.actions
    grows = np.isin(a.action, (Action.SEGMENT_ALLOC, Action.SEGMENT_MAP))
    shrinks = np.isin(a.action, (Action.SEGMENT_FREE, Action.SEGMENT_UNMAP))
    change = np.cumsum(np.where(grows, a.size_bytes, np.where(shrinks, -a.size_bytes, 0)))
    end = int(dev.segments.total_bytes.sum())
    return np.asarray(end - ((int(change[-1]) if len(change) else 0) - change), dtype=np.int64)


def _alloc_phases(dev: DeviceSnapshot, stacks: _Stacks, steps: tuple[tuple[int, int], ...]) -> U8:
    a = dev.actions
    ids = a.stack_id[a.action == Action.ALLOC]
    known = ids >= 0
    phase = np.where(known, stacks.phase_of[np.maximum(ids, 0)] if len(stacks.phase_of) else 0,
                     Phase.UNKNOWN).astype(np.uint8)
    times = a.time_us[a.action == Action.ALLOC]
    for begin, end in steps:  # the annotation is the optimizer's own word for it
        phase[(times >= begin) & (times <= end)] = Phase.OPTIMIZER
    # Python frames recorded, but none on this allocation: it was made on a thread without Python, which in
    # training is the autograd engine's (backward runs there, off the main thread).
    empty = ~known | (stacks.empty[np.maximum(ids, 0)] if len(stacks.empty) else True)
    framed = bool((phase[~empty] != Phase.UNKNOWN).any())
    if framed:
        after_forward = np.maximum.accumulate(phase == Phase.FORWARD)
        phase[empty & (phase == Phase.UNKNOWN) & after_forward] = Phase.BACKWARD
    return phase


def _allocations(dev: DeviceSnapshot, stacks: _Stacks, phases: U8, start: int | None,
                 warnings: list[str]) -> Allocations:
    """Every allocation live at some point of the trace: those it made (paired with their frees by address),
    those it freed without making, and those the segments hold at the end that it never made."""
    a = dev.actions
    n = len(a)
    made = np.flatnonzero(a.action == Action.ALLOC)
    freed = np.flatnonzero(a.action == Action.FREE_REQUESTED)
    alloc_end, orphan_ev = pair_by_address(a.addr, made, freed, n)
    stack_ids = a.stack_id[made]
    sites = np.where(stack_ids >= 0, stacks.site_of[np.maximum(stack_ids, 0)] if len(stacks.site_of) else 1, 1)
    sites = np.where((stack_ids < 0) | (stacks.empty[np.maximum(stack_ids, 0)] if len(stacks.empty) else True),
                     1, sites)
    alive_addr = a.addr[made][alloc_end == n]
    b = dev.blocks
    before_alive = b.allocated & ~np.isin(b.address, alive_addr)
    parts = [
        (a.size_bytes[made], made.astype(np.int64), alloc_end, sites, phases, a.addr[made]),
        (a.size_bytes[orphan_ev], np.full(orphan_ev.size, BEFORE), orphan_ev.astype(np.int64),
         np.zeros(orphan_ev.size, np.int32), np.full(orphan_ev.size, Phase.BEFORE), a.addr[orphan_ev]),
        _blocks_before(dev, stacks, before_alive, n),
    ]
    if start is not None:
        known = int(a.size_bytes[orphan_ev].sum() + b.requested_bytes[before_alive].sum())
        rest = start - known
        if rest > 0:
            parts.append((np.array([rest]), np.array([BEFORE]), np.array([n]), np.zeros(1, np.int32),
                          np.array([Phase.BEFORE]), np.array([-1])))
        elif rest < 0:
            warnings.append(f"device {dev.device}: its blocks hold {-rest} bytes more than the trace's start "
                            "accounts for: the makeup at the peak overstates what was made before the recording")
    cols = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    return Allocations(size_bytes=cols[0].astype(np.int64), start=cols[1].astype(np.int64),
                       end=cols[2].astype(np.int64), site=cols[3].astype(np.int32), phase=cols[4].astype(np.uint8),
                       addr=cols[5].astype(np.int64))


def _blocks_before(dev: DeviceSnapshot, stacks: _Stacks, mask: npt.NDArray[np.bool_],
                   n: int) -> tuple[npt.NDArray[Any], ...]:
    """Blocks allocated at the end that the trace never made: made before it, named by their own frames where
    the snapshot kept them (recorded before a trace cut short, say)."""
    b = dev.blocks
    ids = b.stack_id[mask]
    framed = (ids != NO_STACK) & ~(stacks.empty[np.maximum(ids, 0)] if len(stacks.empty) else True)
    sites = np.where(framed, stacks.site_of[np.maximum(ids, 0)] if len(stacks.site_of) else 0, 0)
    phases = np.where(framed, stacks.phase_of[np.maximum(ids, 0)] if len(stacks.phase_of) else 0, Phase.BEFORE)
    count = int(mask.sum())
    return (b.requested_bytes[mask], np.full(count, BEFORE), np.full(count, n), sites.astype(np.int32),
            phases.astype(np.uint8), b.address[mask])


def _largest_free(dev: DeviceSnapshot, allocs: Allocations, allocated: I64) -> int | None:
    """The largest free range inside the segments that existed at the peak."""
    if not len(allocated) or not len(dev.segments.address) or bool(dev.segments.expandable.any()):
        return None
    peak = int(np.argmax(allocated))
    live = allocs.live_at(peak)
    if bool((allocs.addr[live] < 0).any()):
        return None  # some live bytes have no known place: gaps cannot be told
    a = dev.actions
    after = np.arange(len(a)) > peak
    seg_addr = dev.segments.address.tolist()
    seg_size = dev.segments.total_bytes.tolist()
    made_after = set(a.addr[after & (a.action == Action.SEGMENT_ALLOC)].tolist())
    segments = [(s, z) for s, z in zip(seg_addr, seg_size) if s not in made_after]
    gone = after & (a.action == Action.SEGMENT_FREE)
    segments += list(zip(a.addr[gone].tolist(), a.size_bytes[gone].tolist()))
    order = np.argsort(allocs.addr[live])
    starts = allocs.addr[live][order]
    ends = starts + -(-allocs.size_bytes[live][order] // 512) * 512  # blocks are whole multiples of 512 bytes
    largest = 0
    for base, size in segments:
        lo, hi = np.searchsorted(starts, base), np.searchsorted(starts, base + size)
        edge = base
        for s, e in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist()):
            largest = max(largest, s - edge)
            edge = max(edge, e)
        largest = max(largest, base + size - edge)
    return largest
