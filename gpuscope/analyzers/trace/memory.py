"""Peak device memory from the allocator's ``[memory]`` events, and the two rules every reader of those events
goes by: which events are each GPU's (``gpu_events``) and what they say was allocated (``allocated_bytes``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.model.rank import Memory
from gpuscope.model.trace import MemoryEvents, RankTrace

I64 = npt.NDArray[np.int64]


def gpu_events(mem: MemoryEvents) -> dict[int, I64]:
    """Each GPU's memory events (indices into ``mem``, in time order) by device id: the events of every GPU device
    type (CUDA, and HIP on ROCm: ``MemoryEvents.on_gpu``) with a device id; -1 is the CPU or an unknown device,
    not a GPU (the reader leaves such events out and says so: ``gpuscope.traces.memory_values``)."""
    gpu = mem.on_gpu() & (mem.device_id >= 0)
    return {int(d): np.flatnonzero(gpu & (mem.device_id == d)) for d in np.unique(mem.device_id[gpu]).tolist()}


def allocated_bytes(mem: MemoryEvents, sel: I64) -> tuple[I64, bool]:
    """The bytes allocated after each of one device's events (``sel``), and whether they are the device's whole:
    the allocator's own totals ("Total Allocated") where every event records them. Traces before that field
    existed give the running sum of the events' ``Bytes``, which misses whatever was allocated before the trace
    began: relative, and its peak a lower bound."""
    total = mem.total_allocated_bytes[sel]
    exact = bool((total >= 0).all())
    return (total if exact else np.cumsum(mem.bytes[sel])).astype(np.int64), exact


def device_memory(trace: RankTrace) -> Memory:
    """The peak of allocated GPU memory on the rank's busiest-allocating device, from the allocator's events of
    every GPU device type (``gpu_events``)."""
    devices = gpu_events(trace.memory)
    device_bytes_by_id = {g.index: g.memory_bytes for g in trace.gpus}
    if not devices:
        device = _main_device(trace)
        return Memory(peak_allocated_bytes=None, device_bytes=device_bytes_by_id.get(device) if device is not None
                      else None)
    peaks: dict[int, int] = {}
    lower_bound = False
    for dev, sel in devices.items():
        running, exact = allocated_bytes(trace.memory, sel)
        lower_bound |= not exact
        peaks[dev] = max(int(running.max()), 0)
    device = max(peaks, key=lambda d: peaks[d])
    peak = peaks[device]
    device_bytes = device_bytes_by_id.get(device)
    share = peak / device_bytes if device_bytes else None
    return Memory(peak_allocated_bytes=peak, device_bytes=device_bytes, peak_share=share, lower_bound=lower_bound)


def _main_device(trace: RankTrace) -> int | None:
    device = trace.main_device
    return device if device is not None else (trace.gpus[0].index if trace.gpus else None)
