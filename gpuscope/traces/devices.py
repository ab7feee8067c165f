"""The GPUs a trace describes, matched to the device ids its GPU work carries.

A process pinned to one GPU (``CUDA_VISIBLE_DEVICES=3``, ``HIP_VISIBLE_DEVICES=3``) sees that GPU as device 0:
``deviceProperties`` lists id 0, and so do the allocator's ``[memory]`` events, while the tracer (roctracer on
ROCm) stamps kernels with the physical id, 3. Left as they are, the kernels run on a GPU the trace does not
describe: no model, no price, no memory size. When the GPU work runs on exactly one id the trace does not list,
and the trace describes exactly one device that no GPU work names, that device is the one: it takes the id the
work carries (so reports name the GPU as ``nvidia-smi``/``rocm-smi`` number it), and so do the memory events of
its logical id. A warning says so.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.trace import GPU_KINDS, Events, MemoryEvents
from gpuscope.traces.events import Device


def gpu_info(dev: Device) -> GpuInfo:
    """One ``deviceProperties`` entry; an empty or blank name is unknown (None), like a missing one."""
    cc = f"{dev.computeMajor}.{dev.computeMinor}" if dev.computeMajor is not None else None
    name = dev.name.strip() if dev.name is not None else None
    return GpuInfo(index=dev.id, name=name or None, memory_bytes=dev.totalGlobalMem, sm_count=dev.numSms,
                   compute_capability=cc)


def match_pinned(gpus: tuple[GpuInfo, ...], events: Events,
                 memory: MemoryEvents) -> tuple[tuple[GpuInfo, ...], MemoryEvents, str | None]:
    """``gpus`` and ``memory`` with a pinned process's one device renumbered as its GPU work names it, and the
    line that says so; unchanged (and None) when the trace is not such a case."""
    if len(gpus) != 1:
        return gpus, memory, None
    used = set(np.unique(events.device[events.mask(*GPU_KINDS) & (events.device >= 0)]).tolist())
    logical = gpus[0].index
    unlisted = used - {logical}
    if len(unlisted) != 1 or logical in used:
        return gpus, memory, None
    physical = unlisted.pop()
    ours = memory.on_gpu() & (memory.device_id == logical)
    if ours.any():
        memory = replace(memory, device_id=np.where(ours, np.int32(physical), memory.device_id).astype(np.int32))
    gpu = gpus[0]
    line = (f"GPU work ran on device {physical}, which deviceProperties does not list; its one device (id {logical}"
            f", {gpu.name or 'no name'}) is taken to be that GPU, as in a process pinned to it with "
            "CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES")
    return (replace(gpu, index=physical),), memory, line
