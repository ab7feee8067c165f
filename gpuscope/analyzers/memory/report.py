"""Device histories into the memory report: the peak, what was live then and what it was made of, the timeline,
fragmentation, out-of-memory events, and the advice."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuscope.analyzers.memory.advice import AdviceInputs, advise
from gpuscope.analyzers.memory.history import BEFORE, U8, DeviceHistory
from gpuscope.analyzers.memory.makeup import categories, live_curves, live_groups, makeup
from gpuscope.analyzers.memory.timeline import timeline
from gpuscope.model.memory import (
    CATEGORIES,
    DeviceMemory,
    Fragmentation,
    MemoryReport,
    OomEvent,
    ReadStats,
    SourceKind,
    Timeline,
)
from gpuscope.model.snapshot import OOMS_DESCRIBED


@dataclass(frozen=True)
class MemoryOptions:
    """What the recording does not say: the device's size, the price, the job's length and how its step splits."""

    device_bytes: int | None = None
    """Overrides what the recording says (``--device-gib``, or a GPU model's size from the price catalog)."""
    device_bytes_source: str | None = None
    usd_per_gpu_hour: float | None = None
    price_source: str | None = None
    job_hours: float | None = None
    fixed_step_share: float | None = None
    """The share of a step that does not grow with the batch: launch and host overhead and exposed communication
    (their stage shares in the run's analysis). What prices a larger batch."""
    compute_share: float | None = None
    """The share of a step in GPU compute (the gpu_compute stage): what activation checkpointing adds a third to."""
    world_size: int | None = None


def build_memory_report(histories: list[DeviceHistory], *, source: str, kind: SourceKind,
                        options: MemoryOptions = MemoryOptions(), expandable_segments: bool | None = None,
                        read: ReadStats | None = None, warnings: tuple[str, ...] = (),
                        run_id: str | None = None) -> MemoryReport:
    devices = tuple(device_memory(h, options, expandable_segments) for h in histories)
    return MemoryReport(source=source, kind=kind, run_id=run_id, devices=devices,
                        expandable_segments=expandable_segments, usd_per_gpu_hour=options.usd_per_gpu_hour,
                        price_source=options.price_source, job_hours=options.job_hours, read=read, warnings=warnings)


def device_memory(h: DeviceHistory, options: MemoryOptions, expandable: bool | None) -> DeviceMemory:
    """One device's figures."""
    size, size_source = ((options.device_bytes, options.device_bytes_source) if options.device_bytes is not None
                         else (h.device_bytes, h.device_bytes_source))
    peak = h.peak_index()
    reserved = h.reserved_bytes
    peak_reserved = int(reserved.max()) if reserved is not None and len(reserved) else None
    if peak is None:
        return DeviceMemory(device=h.device, rank=h.rank, peak_allocated_bytes=None, peak_time_us=None,
                            absolute=h.absolute, peak_reserved_bytes=peak_reserved, reserved_at_peak_bytes=None,
                            device_bytes=size, device_bytes_source=size_source, headroom_bytes=None,
                            start_allocated_bytes=h.start_allocated_bytes, at_peak=(), makeup=(),
                            timeline=Timeline((), (), None, 0), fragmentation=Fragmentation(None, None, None))
    cats = categories(h)
    allocated = int(h.allocated_bytes[peak])
    at_reserved = int(reserved[peak]) if reserved is not None else None
    used = peak_reserved if peak_reserved is not None else int(h.allocated_bytes.max())
    parts = makeup(h, cats, peak)
    device = DeviceMemory(
        device=h.device, rank=h.rank, peak_allocated_bytes=allocated,
        peak_time_us=_epoch_us(h, peak), absolute=h.absolute,
        peak_reserved_bytes=peak_reserved, reserved_at_peak_bytes=at_reserved, device_bytes=size,
        device_bytes_source=size_source, headroom_bytes=None if size is None or not h.absolute else size - used,
        start_allocated_bytes=h.start_allocated_bytes, at_peak=live_groups(h, cats, peak), makeup=parts,
        timeline=timeline(h), fragmentation=_fragmentation(h, at_reserved, allocated),
        oom=tuple(_oom(h, cats, o.index, o.requested_bytes, o.device_free_bytes) for o in h.ooms[:OOMS_DESCRIBED]))
    if not h.absolute:
        return device
    inputs = AdviceInputs(
        peak_allocated_bytes=allocated, reserved_at_peak_bytes=at_reserved, device_bytes=size,
        by_category={p.category: p.bytes for p in parts}, before_bytes=_before_bytes(h, peak),
        expandable_segments=expandable, layers=_layers(device), ooms=len(h.ooms),
        curves={"allocated": h.allocated_bytes, **{str(k): v for k, v in live_curves(
            h, cats, ("activations", "temporaries", "optimizer_state")).items()}},
        fixed_step_share=options.fixed_step_share, compute_share=options.compute_share,
        usd_per_gpu_hour=options.usd_per_gpu_hour,
        gpu_hours=options.job_hours, world_size=options.world_size)
    return replace(device, advice=advise(inputs))


def _fragmentation(h: DeviceHistory, reserved: int | None, allocated: int) -> Fragmentation:
    if reserved is None or not h.absolute:
        return Fragmentation(None, None, h.largest_free_at_peak_bytes)
    idle = reserved - allocated
    return Fragmentation(reserved_unallocated_bytes=idle, share_of_reserved=idle / reserved if reserved else None,
                         largest_free_block_bytes=h.largest_free_at_peak_bytes)


def _oom(h: DeviceHistory, cats: U8, index: int, requested: int,
         free: int | None) -> OomEvent:
    at = max(index - 1, 0) if index < len(h) else len(h) - 1
    return OomEvent(time_us=_epoch_us(h, index) if index < len(h) else None, requested_bytes=requested,
                    device_free_bytes=free,
                    allocated_bytes=int(h.allocated_bytes[at]) if len(h) and h.absolute else None,
                    live=live_groups(h, cats, at, limit=10))


def _epoch_us(h: DeviceHistory, index: int) -> int | None:
    """Event ``index``'s epoch time in µs; None where the recording has no times or does not say when it was made."""
    t = int(h.time_us[index])
    return t if t and h.epoch_times else None


def _before_bytes(h: DeviceHistory, peak: int) -> int:
    al = h.allocations
    live = al.live_at(peak) & (al.start == BEFORE)
    return int(al.size_bytes[live].sum())


def _layers(device: DeviceMemory) -> int | None:
    """The most common count among the places of activations at the peak: a line in a block of a model whose
    blocks run the same code makes one allocation per layer."""
    counts = [g.count for g in device.at_peak[:20] if g.category == "activations" and g.count >= 2]
    return max(set(counts), key=lambda c: (counts.count(c), c)) if counts else None


__all__ = ["CATEGORIES", "MemoryOptions", "build_memory_report", "device_memory"]
