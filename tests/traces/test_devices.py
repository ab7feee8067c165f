"""The GPU a trace describes is matched to the device its work ran on, as a pinned process numbers them; an empty
device name is unknown."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuscope.model.gpu import GpuInfo
from gpuscope.traces import read_trace
from tests import builders as b
from tests.conftest import SAMPLES

MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9,
          "computeMinor": 4, "numSms": 304}


def pinned_work(device: int = 3) -> list[b.Event]:
    """A launch and a kernel on ``device`` (the physical id), and HIP allocations on logical device 0."""
    return [b.cpu_op("aten::mm", 0, 100), b.launch(10, 5, 1), b.kernel("Cijk_gemm", 20, 50, 1, device=device),
            b.memory(5, 2**30, 2**30, device_type=6, device_id=0), b.memory(8, -2**29, 2**29, device_type=6),
            b.memory(9, 4096, 4096, device_type=0, device_id=-1)]


def doc(events: list[b.Event], devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {**b.trace(events, device_memory=None), "deviceProperties": devices}


def test_the_one_device_of_a_pinned_process_is_the_gpu_its_kernels_ran_on(tmp_path: Path, chunked: bool) -> None:
    trace = read_trace(b.write(tmp_path / "t.json", doc(pinned_work(3), [MI300X])))
    assert trace.gpus == (GpuInfo(index=3, name="AMD Instinct MI300X", memory_bytes=206141652992, sm_count=304,
                                  compute_capability="9.4"),)
    assert trace.main_gpu() == trace.gpus[0]
    gpu_memory = trace.memory.device_type == 6
    assert trace.memory.device_id[gpu_memory].tolist() == [3, 3]
    assert trace.memory.device_id[~gpu_memory].tolist() == [-1]  # the host's allocations keep their id
    (line,) = trace.warnings
    assert "GPU work ran on device 3" in line and "id 0, AMD Instinct MI300X" in line and "HIP_VISIBLE_DEVICES" in line


@pytest.mark.parametrize("case", ["two described", "the described one used too", "two unlisted"])
def test_anything_else_is_left_as_the_trace_says(tmp_path: Path, case: str) -> None:
    events, devices = pinned_work(3), [MI300X]
    if case == "two described":
        devices = [MI300X, {**MI300X, "id": 1}]
    elif case == "the described one used too":
        events.append(b.kernel("Cijk_gemm", 80, 50, 2, device=0))
    else:
        events.append(b.kernel("Cijk_gemm", 80, 50, 2, device=5))
    trace = read_trace(b.write(tmp_path / "t.json", doc(events, devices)))
    assert [g.index for g in trace.gpus] == [d["id"] for d in devices] and trace.warnings == ()
    assert trace.memory.device_id[trace.memory.device_type == 6].tolist() == [0, 0]


@pytest.mark.parametrize("name", ["", "   ", None])
def test_an_empty_device_name_is_unknown(tmp_path: Path, name: str | None) -> None:
    device = {**MI300X, "name": name} if name is not None else {k: v for k, v in MI300X.items() if k != "name"}
    trace = read_trace(b.write(tmp_path / "t.json", doc(pinned_work(0), [device])))
    assert trace.gpus[0].name is None and trace.gpus[0].memory_bytes == MI300X["totalGlobalMem"]


def test_a_real_rocm_trace_of_a_pinned_process_finds_its_gpu(tmp_path: Path) -> None:
    """The MI210 trace's kernels run on device 1; with deviceProperties cut to device 0 alone, as a process that
    sees one GPU writes it, that device is the one."""
    raw = json.loads(gzip.decompress((SAMPLES / "dev" / "mi210_gpu_only.json.gz").read_bytes()))
    devices = {d["id"] for d in raw["deviceProperties"]}
    kernel_devices = {e["args"]["device"] for e in raw["traceEvents"] if e.get("cat") == "kernel"}
    assert kernel_devices == {1} and 0 in devices
    raw["deviceProperties"] = [d for d in raw["deviceProperties"] if d["id"] == 0]
    trace = read_trace(b.write(tmp_path / "mi210.json", raw))
    assert [(g.index, g.name) for g in trace.gpus] == [(1, "AMD Instinct MI210")]
    assert np.unique(trace.events.device[trace.events.device >= 0]).tolist() == [1]
    assert any("GPU work ran on device 1" in w for w in trace.warnings)
