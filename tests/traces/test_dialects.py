"""Dialects of Kineto that real traces from other projects are written in, built in code with the values those
traces hold (kineto's 2020-21 tb_plugin samples, TraceLens' and HTA's ROCm and CUDA test traces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuscope.model.trace import Kind
from gpuscope.traces import TraceError, read_trace
from tests import builders as b


def _old_thread(e: dict[str, Any], tid: str) -> dict[str, Any]:
    return {**e, "tid": tid}


def test_thread_ids_written_as_strings_past_int32_are_threads_not_streams(tmp_path: Path, chunked: bool) -> None:
    # Kineto of 2020-21 wrote host thread ids as strings of their number ("4093687616", past int32) and GPU rows
    # as "stream 7" without args.stream.
    host = "4093687616"
    kernel = b.kernel("volta_sgemm_128x64_nn", 20, 30, 1)
    del kernel["args"]["stream"]
    events = [_old_thread(b.cpu_op("aten::mm", 0, 50), host), _old_thread(b.launch(10, 5, 1), host),
              _old_thread(kernel, "stream 7")]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    ev = t.events
    host_rows = ev.mask(Kind.CPU_OP, Kind.RUNTIME)
    assert (ev.tid[host_rows] == 4093687616).all()  # one thread, by its own number
    assert (ev.stream[host_rows] == -1).all()
    assert ev.stream[ev.kind == Kind.KERNEL].tolist() == [7]


def test_rocm_hex_stream_text_is_read_as_a_number(tmp_path: Path, chunked: bool) -> None:
    # ROCm writes a runtime call's stream as hex text: "0x0" is the default stream.
    rt = b.launch(10, 5, 1, name="hipLaunchKernel")
    rt["args"]["stream"] = "0x0"
    rt2 = b.launch(20, 5, 2, name="hipLaunchKernel")
    rt2["args"]["stream"] = "0x1f"
    events = [b.cpu_op("aten::mm", 0, 50), rt, rt2, b.kernel("Cijk_Ailk_Bljk_HHS_BH_MT64x64", 30, 10, 1)]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    runtime = t.events.kind == Kind.RUNTIME
    assert t.events.stream[runtime].tolist() == [0, 31]
    assert not any("left out" in w for w in t.warnings)


def test_cuptis_unsigned_no_stream_reads_as_none_without_a_warning(tmp_path: Path, chunked: bool) -> None:
    # A context-wide sync (cat cuda_sync) carries stream 4294967295: CUPTI's unsigned -1.
    sync = {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": -1, "ts": 60, "dur": 9,
            "args": {"cuda_sync_kind": "Context Sync", "stream": 4294967295, "correlation": 3, "device": 0}}
    events = [b.cpu_op("aten::mm", 0, 50), b.launch(10, 5, 1), b.kernel("k", 20, 30, 1), sync]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    assert t.warnings == ()
    assert (t.events.stream[t.events.kind == Kind.OTHER] == -1).all()
    assert np.isin(t.events.stream, [-1, 7]).all()


def test_intel_and_private_use_runtime_calls_are_runtime_calls(tmp_path: Path) -> None:
    events = [b.cpu_op("aten::mm", 0, 50)]
    for i, cat in enumerate(("xpu_runtime", "xpu_driver", "privateuse1_runtime", "privateuse1_driver")):
        call = b.launch(10 * i, 5, i + 1, name="urEnqueueKernelLaunch")
        events += [{**call, "cat": cat}, b.kernel("gemm_kernel", 10 * i + 6, 3, i + 1)]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events, device_memory=None)))
    assert (t.events.kind == Kind.RUNTIME).sum() == 4 and t.warnings == ()


def test_an_accelerator_that_is_not_a_gpu_is_named_as_unread(tmp_path: Path, chunked: bool) -> None:
    # HTA's MTIA traces: host ops, runtime calls in mtia_runtime, device events in mtia_ccp_events.
    events = [b.cpu_op("aten::mm", 0, 50),
              {**b.cpu_op("runFunction", 5, 10), "cat": "mtia_runtime"},
              {**b.cpu_op("dma_request", 20, 10), "cat": "mtia_ccp_events", "pid": 17},
              {**b.cpu_op("pe_exe", 30, 10), "cat": "mtia_ccp_events", "pid": 17}]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events, device_memory=None)))
    (line,) = t.warnings
    assert "3 events of the MTIA accelerator, not a GPU" in line
    assert not t.gpu_active


def test_a_chrome_trace_of_another_tool_is_not_a_profiler_trace(tmp_path: Path) -> None:
    # As kineto's own TensorFlow trace-viewer sample: complete events, none of a category Kineto writes.
    events = [{"ph": "X", "cat": "PREF", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
              for i in range(4)]
    with pytest.raises(TraceError, match="not a PyTorch profiler trace: none of its 4 complete events") as err:
        read_trace(b.write(tmp_path / "t.json", {"traceEvents": events}))
    assert err.value.not_a_trace


def test_gpus_under_compute_properties_of_early_2021_are_read(tmp_path: Path, chunked: bool) -> None:
    # kineto's tb_plugin test input of 2021: CUDA's own field names under `computeProperties`.
    legacy = {"id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34084028416, "major": 7, "minor": 0,
              "multiProcessorCount": 80, "warpSize": 32}
    events = [b.cpu_op("aten::mm", 0, 50), b.launch(10, 5, 1), b.kernel("volta_sgemm_128x64_nn", 20, 30, 1)]
    doc = {**b.trace(events, device_memory=None), "computeProperties": [legacy, {**legacy, "id": 1}]}
    t = read_trace(b.write(tmp_path / "t.json", doc))
    assert [(g.index, g.name, g.memory_bytes, g.compute_capability, g.sm_count) for g in t.gpus] == [
        (0, "Tesla V100-DGXS-32GB", 34084028416, "7.0", 80), (1, "Tesla V100-DGXS-32GB", 34084028416, "7.0", 80)]
    newer = {**doc, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}]}
    assert [g.name for g in read_trace(b.write(tmp_path / "n.json", newer)).gpus] == ["NVIDIA A100-SXM4-80GB"]
