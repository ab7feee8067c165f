"""Peak device memory from the allocator's ``[memory]`` events."""

from __future__ import annotations

import numpy as np

from gpuscope.model.rank import Memory
from gpuscope.model.trace import GPU_DEVICE_TYPES, RankTrace


def device_memory(trace: RankTrace) -> Memory:
    """The peak of allocated GPU memory on the rank's busiest-allocating device, from the allocator's events of
    every GPU device type (CUDA, and HIP on ROCm: ``GPU_DEVICE_TYPES``)."""
    mem = trace.memory
    gpu = np.isin(mem.device_type, GPU_DEVICE_TYPES)
    device_bytes_by_id = {g.index: g.memory_bytes for g in trace.gpus}
    if not gpu.any():
        device = _main_device(trace)
        return Memory(peak_allocated_bytes=None, device_bytes=device_bytes_by_id.get(device) if device is not None
                      else None)
    peaks: dict[int, int] = {}
    lower_bound = False
    for dev in np.unique(mem.device_id[gpu]).tolist():
        sel = gpu & (mem.device_id == dev)
        total = mem.total_allocated_bytes[sel]
        # Traces before "Total Allocated" existed: the running sum of the allocation deltas the trace saw, which
        # misses whatever was allocated before it began: a lower bound.
        exact = bool((total >= 0).all())
        running = total if exact else np.cumsum(mem.bytes[sel])
        lower_bound |= not exact
        peaks[int(dev)] = max(int(running.max()), 0)
    device = max(peaks, key=lambda d: peaks[d])
    peak = peaks[device]
    device_bytes = device_bytes_by_id.get(device)
    share = peak / device_bytes if device_bytes else None
    return Memory(peak_allocated_bytes=peak, device_bytes=device_bytes, peak_share=share, lower_bound=lower_bound)


def _main_device(trace: RankTrace) -> int | None:
    device = trace.main_device
    return device if device is not None else (trace.gpus[0].index if trace.gpus else None)
