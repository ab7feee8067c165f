"""Memory snapshots built in code, as ``torch.cuda.memory._dump_snapshot`` writes them: segments of blocks, and
per device a trace of allocator actions with their stack frames (innermost first)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

MIB = 2**20
T0_US = 1_780_000_000_000_000
TORCH = "/venv/lib/python3.12/site-packages/torch"


def frame(name: str, filename: str, line: int) -> dict[str, Any]:
    return {"name": name, "filename": filename, "line": line}


def forward(line: int) -> list[dict[str, Any]]:
    """A stack in a model's forward: the model's line, torch's module call, the training script."""
    return [frame("forward", "/work/model.py", line), frame("_call_impl", f"{TORCH}/nn/modules/module.py", 1750),
            frame("<module>", "/work/train.py", 40)]


def building(line: int) -> list[dict[str, Any]]:
    """Moving the model to the GPU: ``model.cuda()``."""
    return [frame("_apply", f"{TORCH}/nn/modules/module.py", 900), frame("<module>", "/work/train.py", line)]


def backward_python(line: int) -> list[dict[str, Any]]:
    return [frame("_engine_run_backward", f"{TORCH}/autograd/graph.py", 824),
            frame("backward", f"{TORCH}/_tensor.py", 625), frame("<module>", "/work/train.py", line)]


def accumulate_grad() -> list[dict[str, Any]]:
    """The autograd engine's thread: C++ frames only."""
    return [frame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "", 0),
            frame("torch::autograd::AccumulateGrad::apply", "??", 0),
            frame("torch::autograd::Engine::evaluate_function", "??", 0)]


def optimizer_step(line: int) -> list[dict[str, Any]]:
    return [frame("_single_tensor_adam", f"{TORCH}/optim/adam.py", line),
            frame("step", f"{TORCH}/optim/adam.py", 240), frame("<module>", "/work/train.py", 45)]


def action(kind: str, addr: int, size: int, t: int, frames: list[dict[str, Any]] | None = None,
           **extra: Any) -> dict[str, Any]:
    return {"action": kind, "addr": addr, "size": size, "stream": 0, "time_us": T0_US + t,
            "frames": frames or [], "compile_context": "N/A", "user_metadata": "", **extra}


def block(address: int, size: int, *, allocated: bool, frames: list[dict[str, Any]] | None = None,
          requested: int | None = None) -> dict[str, Any]:
    return {"address": address, "size": size, "requested_size": size if requested is None else requested,
            "state": "active_allocated" if allocated else "inactive", "frames": frames or []}


def segment(address: int, total: int, blocks: list[dict[str, Any]], *, device: int = 0) -> dict[str, Any]:
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": device, "address": address, "total_size": total, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}


def snapshot(segments: list[dict[str, Any]], traces: list[list[dict[str, Any]]], *,
             annotations: list[dict[str, Any]] | None = None, expandable: bool = False) -> dict[str, Any]:
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": expandable},
            "external_annotations": annotations or []}


def write(path: Path, doc: dict[str, Any], *, protocol: int = 4) -> Path:
    path.write_bytes(pickle.dumps(doc, protocol=protocol))
    return path


def forward_backward(path: Path) -> Path:
    """Segment A (8 MiB at 256 MiB) holds P (1 MiB, made before the recording) from the start. X (2 MiB, forward
    line 10) is made in A; segment B (4 MiB at 512 MiB) is reserved and Y (4 MiB, forward line 11) made in it: the
    peak, 7 MiB allocated of 12 MiB reserved. X is freed; Z (1 MiB, backward) is made where X was; Y is freed and
    B given back. At the end A holds P and Z."""
    a, b = 256 * MIB, 512 * MIB
    trace = [action("alloc", a + MIB, 2 * MIB, 0, forward(10)), action("segment_alloc", b, 4 * MIB, 1),
             action("alloc", b, 4 * MIB, 2, forward(11)), action("free_requested", a + MIB, 2 * MIB, 3),
             action("free_completed", a + MIB, 2 * MIB, 4), action("alloc", a + MIB, MIB, 5, backward_python(44)),
             action("free_requested", b, 4 * MIB, 6), action("free_completed", b, 4 * MIB, 7),
             action("segment_free", b, 4 * MIB, 8)]
    blocks = [block(a, MIB, allocated=True), block(a + MIB, MIB, allocated=True),
              block(a + 2 * MIB, 6 * MIB, allocated=False)]
    return write(path, snapshot([segment(a, 8 * MIB, blocks)], [trace]))
