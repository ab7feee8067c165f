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

GENERIC_NAMES = frozenset({"amd radeon graphics"})
"""What ROCm names a GPU whose product it cannot look up (libdrm's amdgpu.ids lacks it, as in many containers):
no model."""
AMD_BY_PROPERTIES: dict[tuple[str, int, int], str] = {
    ("9.4", 304, 192): "AMD Instinct MI300X",
    ("9.4", 304, 256): "AMD Instinct MI325X",
}
"""AMD GPUs that one (gfx target as HIP's major.minor, compute units, GiB of memory) names alone, from AMD's
datasheets (MI300X: gfx942, 304 CUs, 192 GB HBM3; MI325X: gfx942, 304 CUs, 256 GB HBM3E). Others share theirs
with another model (an MI210 and one die of an MI250 are both gfx90a with 104 CUs and 64 GB) and stay unnamed."""
MEMORY_SLACK = 0.03
"""How far below its datasheet size a GPU's reported memory may be (the driver and a virtual function keep some:
an MI300X VF reports 191.5 GiB)."""


def gpu_info(dev: Device) -> GpuInfo:
    """One ``deviceProperties`` entry; an empty or blank name is unknown (None), like a missing one."""
    cc = f"{dev.computeMajor}.{dev.computeMinor}" if dev.computeMajor is not None else None
    name = dev.name.strip() if dev.name is not None else None
    return GpuInfo(index=dev.id, name=name or None, memory_bytes=dev.totalGlobalMem, sm_count=dev.numSms,
                   compute_capability=cc)


def name_unnamed(gpus: tuple[GpuInfo, ...], devices: tuple[Device, ...]) -> tuple[tuple[GpuInfo, ...], str | None]:
    """``gpus`` (``gpu_info`` of ``devices``) with each one that has no model name (blank, or ROCm's generic
    "AMD Radeon Graphics") named by its properties where only one model has them (``AMD_BY_PROPERTIES``, for a
    GPU with 64-wide wavefronts: AMD's), and the line that says so; unchanged (and None) otherwise."""
    named: list[GpuInfo] = []
    said: dict[str, tuple[str, int, int]] = {}
    for gpu, dev in zip(gpus, devices):
        key = _amd_key(gpu, dev)
        if key is None:
            named.append(gpu)
            continue
        model = AMD_BY_PROPERTIES[key]
        named.append(replace(gpu, name=model))
        said.setdefault(model, key)
    if not said:
        return gpus, None
    parts = [f"gfx target {k[0]}, {k[1]} compute units and {k[2]} GiB are an {m.removeprefix('AMD ')}'s alone"
             for m, k in said.items()]
    return tuple(named), (f"deviceProperties gives no model name; {'; '.join(parts)}, so "
                          f"{'they are' if len(gpus) > 1 else 'it is'} taken to be {' and '.join(said)}")


def _amd_key(gpu: GpuInfo, dev: Device) -> tuple[str, int, int] | None:
    """The ``AMD_BY_PROPERTIES`` key of an unnamed GPU with AMD's 64-wide wavefronts whose gfx target, compute
    units and memory (up to ``MEMORY_SLACK`` below the datasheet's) match one; None for any other."""
    if gpu.name is not None and gpu.name.lower() not in GENERIC_NAMES:
        return None
    if dev.warpSize != 64 or gpu.memory_bytes is None:
        return None
    gib = gpu.memory_bytes / 2**30
    return next((key for key in AMD_BY_PROPERTIES if key[:2] == (gpu.compute_capability, gpu.sm_count)
                 and key[2] * (1 - MEMORY_SLACK) <= gib <= key[2] * 1.001), None)


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
