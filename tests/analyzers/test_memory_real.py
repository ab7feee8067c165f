"""``gpuscope memory`` on real recordings, against replays of their raw events that share nothing with gpuscope's
readers (``tests/reference.py``): three memory snapshots of transformer training committed to public course
repositories, and real ROCm (HIP, Device Type 6) and CUDA traces with memory events."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpuscope import analyze
from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory, trace_memory
from gpuscope.analyzers.memory.history import Phase
from gpuscope.analyzers.memory.sites import MAX_FRAMES
from gpuscope.analyzers.memory.snapshot_replay import replay_snapshot
from gpuscope.api.memory import memory
from gpuscope.model.memory import DeviceMemory
from gpuscope.traces import read_trace
from gpuscope.traces.snapshot import read_snapshot
from tests import reference
from tests.conftest import SAMPLES

SNAPSHOTS = sorted((SAMPLES / "memory_snapshots").glob("*.pickle.gz"))
ROCM_TRACES = [SAMPLES / "dev" / f"{name}.json.gz" for name in ("sglang_decode_cudagraph_bs32",
                                                                 "vllm_decode_graph_capture")]
CUDA_TRACES = [SAMPLES / "h200" / v for v in ("transformer_bf16", "pageable_h2d", "decode_bs4")]


def _device(path: Path) -> DeviceMemory:
    (device,) = snapshot_memory(read_snapshot(path)).devices
    return device


def test_the_three_snapshots_are_here() -> None:
    assert [p.name for p in SNAPSHOTS] == ["cs336_forward_backward_windows.pickle.gz",
                                           "cs336_medium_training_step.pickle.gz", "cs336_training_step.pickle.gz"]


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name.split(".")[0])
def test_the_absolute_peak_is_the_one_replayed_from_the_raw_actions(path: Path) -> None:
    expected = reference.snapshot_replay(reference.snapshot(path))
    d = _device(path)
    assert d.absolute and d.peak_allocated_bytes is not None
    assert d.peak_allocated_bytes == pytest.approx(expected["peak"], rel=0.01)
    assert d.start_allocated_bytes == expected["start"]
    assert d.peak_allocated_bytes > d.start_allocated_bytes  # the trace's own allocations are in it
    assert sum(m.bytes for m in d.makeup) == d.peak_allocated_bytes  # every byte live at the peak is in one part


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name.split(".")[0])
def test_what_was_live_at_the_peak_is_named_by_its_source_lines(path: Path) -> None:
    expected = reference.snapshot_replay(reference.snapshot(path))
    by_place: dict[tuple[tuple[str, str, int], ...], list[int]] = {}
    for entry in expected["live"].values():
        key = reference.python_frames(entry, MAX_FRAMES)
        if key:
            by_place.setdefault(key, []).append(entry["size"])
    for block in expected["blocks_before"]:  # made before the trace, named by the frames the snapshot kept
        key = reference.python_frames(block, MAX_FRAMES)
        if key:
            by_place.setdefault(key, []).append(block.get("requested_size", block["size"]))
    d = _device(path)
    named = [g for g in d.at_peak if g.frames and any(".py" in f.filename for f in g.frames)]
    assert named, "no allocation live at the peak is named by a source line"
    for g in named:
        assert g.frames is not None
        key = tuple((f.name, f.filename, f.line) for f in g.frames)
        assert (g.bytes, g.count) == (sum(by_place[key]), len(by_place[key]))
        assert g.label.endswith(")") and ":" in g.label and g.frames[0].line > 0  # "forward (model.py:54)"
    largest = max(by_place.items(), key=lambda kv: sum(kv[1]))
    top = next(g for g in named if g.frames is not None
               and tuple((f.name, f.filename, f.line) for f in g.frames) == largest[0])
    assert top.bytes == sum(largest[1])
    before = next(g for g in d.at_peak if g.label == "allocated before the recording began")
    assert before.bytes == expected["before"]


def test_a_batch_estimate_over_mostly_earlier_memory_is_not_priced() -> None:
    """73% of this step's peak was allocated before the recording began: the batch that fits is estimated (the
    earlier memory counted as fixed) but not priced."""
    options = MemoryOptions(device_bytes=80 * 2**30, fixed_step_share=0.5, usd_per_gpu_hour=2.0, job_hours=10.0)
    (d,) = snapshot_memory(read_snapshot(SAMPLES / "memory_snapshots" / "cs336_medium_training_step.pickle.gz"),
                           options).devices
    batch = next(a for a in d.advice if a.code == "larger_batch")
    assert batch.batch_multiplier is not None and batch.est_saving_fraction is None and batch.est_saving_usd is None
    assert "allocated before the recording began" in batch.basis


def test_a_training_step_holds_its_optimizer_state_and_activations() -> None:
    """One step of forward, zero_grad, backward and the course's own AdamW, recorded after warm-up: at the peak
    the optimizer's new moments (made in ``step``, kept past it) and the forward's activations (kept for
    backward) are live, as the script's code says (adapters.py: the step's ``exp_avg``/``exp_avg_sq``)."""
    d = _device(SAMPLES / "memory_snapshots" / "cs336_training_step.pickle.gz")
    parts = {m.category: m.bytes for m in d.makeup}
    assert parts["optimizer_state"] > 0 and parts["activations"] > 0
    optimizer = [g for g in d.at_peak if g.category == "optimizer_state"]
    assert optimizer and all(g.frames and g.frames[0].name == "step" for g in optimizer[:2])


def test_a_windows_snapshot_without_frames_in_backward_keeps_its_activations_named() -> None:
    """Python frames only (Windows): backward's allocations carry none, and are read as backward's (every
    allocation without frames after the first one in forward). At the peak, the end of forward, the activations
    are 88% of what was live, named by the model's lines, one per layer (24)."""
    path = SAMPLES / "memory_snapshots" / "cs336_forward_backward_windows.pickle.gz"
    allocs = [e for e in reference.snapshot(path)["device_traces"][0] if e["action"] == "alloc"]
    first = next(i for i, e in enumerate(allocs) if any(f["name"] == "forward" for f in e["frames"]))
    frameless = [i for i, e in enumerate(allocs) if not e["frames"] and i > first]
    (h,), _ = replay_snapshot(read_snapshot(path))
    backward = {i for i, p in enumerate(h.alloc_phase.tolist()) if p == Phase.BACKWARD}
    assert frameless and backward >= set(frameless)
    assert all(any(f["name"] == "backward" for f in allocs[i]["frames"]) for i in backward - set(frameless))
    d = _device(path)
    shares = {m.category: m.share for m in d.makeup}
    assert shares["activations"] > 0.8
    assert any(g.count == 24 and g.category == "activations" and "model.py" in g.label for g in d.at_peak)


@pytest.mark.parametrize("path", ROCM_TRACES, ids=lambda p: p.name.split(".")[0])
def test_rocm_memory_events_give_the_peak_allocated(path: Path) -> None:
    """HIP's memory events (Device Type 6): the peak is the largest "Total Allocated" they record."""
    expected = reference.trace_memory_replay(reference.memory_events(path, (6,)))
    trace = read_trace(path)
    report = trace_memory([trace], source=str(path))
    (d,) = report.devices
    assert d.absolute and d.peak_allocated_bytes == pytest.approx(expected["peak"], rel=0.01)
    made_before = next(g.bytes for g in d.at_peak if g.label == "allocated before the recording began")
    assert made_before == expected["peak"] - expected["live_made_in_trace"]


def test_a_cuda_trace_relabelled_as_hip_reads_the_same(tmp_path: Path) -> None:
    """The same CUDA trace with its memory events' Device Type changed to 6 gives the same peak and makeup."""
    source = next((SAMPLES / "h200" / "transformer_bf16").glob("*.json.gz"))
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1:
            e["args"]["Device Type"] = 6
    hip = tmp_path / "hip.json.gz"
    hip.write_bytes(gzip.compress(json.dumps(doc).encode()))
    cuda_d, hip_d = (trace_memory([read_trace(p)], source="x").devices[0] for p in (source, hip))
    assert hip_d.peak_allocated_bytes == cuda_d.peak_allocated_bytes
    assert hip_d.peak_allocated_bytes == max(e["args"]["Total Allocated"]
                                             for e in reference.memory_events(hip, (6,)))
    assert hip_d.makeup == cuda_d.makeup


@pytest.mark.parametrize("folder", CUDA_TRACES, ids=lambda p: p.name)
def test_cuda_traces_peak_and_what_the_trace_made(folder: Path) -> None:
    path = next(folder.glob("*.json.gz"))
    expected = reference.trace_memory_replay(reference.memory_events(path, (1,)))
    (d,) = trace_memory([read_trace(path)], source=str(path)).devices
    assert d.peak_allocated_bytes == expected["peak"]
    made_in_trace = sum(g.bytes for g in d.at_peak if g.label != "allocated before the recording began")
    if len(d.at_peak) < 50:  # every place listed
        assert made_in_trace == expected["live_made_in_trace"]
    props = json.loads(gzip.decompress(path.read_bytes()))["deviceProperties"]
    assert d.peak_reserved_bytes is not None and d.device_bytes == props[0]["totalGlobalMem"]


def test_a_pinned_rocm_process_memory_is_its_gpus_and_the_analysis_peak(gpuscope_home: Path) -> None:
    """The real MI300X trace of a process pinned to one GPU: its HIP memory events (logical device 0) are the GPU
    its kernels ran on, sized by its one deviceProperties entry, and ``gpuscope memory``'s peak is the one
    ``gpuscope analyze`` reports for the rank: the largest "Total Allocated" of the raw events."""
    path = ROCM_TRACES[0]
    raw = json.loads(gzip.decompress(path.read_bytes()))
    kernel_devices = {e["args"]["device"] for e in raw["traceEvents"] if e.get("cat") == "kernel"}
    largest = max(e["args"]["Total Allocated"] for e in reference.memory_events(path, (6,)))
    (d,) = memory(path, save=False).devices
    assert {d.device} == kernel_devices and d.device != 0  # pinned: the physical id, not the logical 0
    assert d.device_bytes == raw["deviceProperties"][0]["totalGlobalMem"]
    assert d.peak_allocated_bytes == largest
    assert analyze(path).analysis.ranks[0].memory.peak_allocated_bytes == largest
