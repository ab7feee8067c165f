"""The memory analysis on snapshots and traces built in code, whose every figure is known by construction: the
peak, what was live then and what it held, reserved bytes, fragmentation, an out-of-memory event, and the advice's
numbers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory, trace_memory
from gpuscope.analyzers.memory.makeup import categories
from gpuscope.analyzers.memory.snapshot_replay import replay_snapshot
from gpuscope.analyzers.trace.memory import device_memory
from gpuscope.model.memory import CATEGORIES, DeviceMemory
from gpuscope.traces import read_trace
from gpuscope.traces.snapshot import read_snapshot
from tests import builders as kb
from tests import memory_builders as mb
from tests.memory_builders import MIB


def _one(path: Path, options: MemoryOptions = MemoryOptions()) -> DeviceMemory:
    (device,) = snapshot_memory(read_snapshot(path), options).devices
    return device


def test_peak_start_reserved_and_fragmentation(tmp_path: Path) -> None:
    d = _one(mb.forward_backward(tmp_path / "s.pickle"))
    assert d.absolute and d.start_allocated_bytes == MIB
    assert d.peak_allocated_bytes == 7 * MIB and d.peak_time_us == mb.T0_US + 2
    assert d.reserved_at_peak_bytes == 12 * MIB and d.peak_reserved_bytes == 12 * MIB
    f = d.fragmentation
    assert f.reserved_unallocated_bytes == 5 * MIB and f.share_of_reserved == pytest.approx(5 / 12)
    assert f.largest_free_block_bytes == 5 * MIB  # A's last 5 MiB; B is full at the peak
    assert d.timeline.allocated_bytes == tuple(m * MIB for m in (3, 3, 7, 5, 5, 6, 2, 2, 2))
    assert d.timeline.reserved_bytes == tuple(m * MIB for m in (8, 12, 12, 12, 12, 12, 12, 12, 8))


def test_the_batch_estimate_stops_at_8x(tmp_path: Path) -> None:
    d = _one(mb.forward_backward(tmp_path / "s.pickle"), MemoryOptions(device_bytes=2**30))
    batch = next(a for a in d.advice if a.code == "larger_batch")
    assert batch.batch_multiplier == 8.0 and "8x or more" in batch.title


def test_at_the_peak_by_place_and_category(tmp_path: Path) -> None:
    """X is freed before backward begins (a temporary), Y after (an activation); P was there before."""
    d = _one(mb.forward_backward(tmp_path / "s.pickle"))
    groups = {g.label: (g.bytes, g.count, g.category) for g in d.at_peak}
    assert groups == {"forward (model.py:11)": (4 * MIB, 1, "activations"),
                      "forward (model.py:10)": (2 * MIB, 1, "temporaries"),
                      "allocated before the recording began": (MIB, 1, "unknown")}
    top = d.at_peak[0]
    assert top.frames is not None and [(f.name, f.line) for f in top.frames] == [
        ("forward", 11), ("_call_impl", 1750), ("<module>", 40)]
    assert {m.category: m.bytes for m in d.makeup} == {"parameters": 0, "gradients": 0, "optimizer_state": 0,
                                                       "activations": 4 * MIB, "temporaries": 2 * MIB,
                                                       "unknown": MIB}


def _training_step(path: Path, *, segment_mib: int = 20) -> Path:
    """W (4 MiB) is the model moved to the GPU; forward makes A (2 MiB, kept for backward) and T (1 MiB, freed in
    forward); backward makes G (3 MiB, AccumulateGrad: kept) and B (0.5 MiB, freed in backward) and frees A;
    the optimizer makes S (8 MiB, its state: kept) and O (1.5 MiB, freed in the step). Allocated after each
    action: 4, 6, 7, 6, 9, 9.5, 7.5, 7, 15, 16.5 (the peak), 15 MiB."""
    base = 1024 * MIB
    w, a, t, g, b, s, o = (base + k * 16 * MIB for k in range(7))
    sizes = {w: 4 * MIB, a: 2 * MIB, t: MIB, g: 3 * MIB, b: MIB // 2, s: 8 * MIB, o: 3 * MIB // 2}
    trace = [mb.action("alloc", w, sizes[w], 0, mb.building(30)), mb.action("alloc", a, sizes[a], 1, mb.forward(12)),
             mb.action("alloc", t, sizes[t], 2, mb.forward(13)), mb.action("free_requested", t, sizes[t], 3),
             mb.action("alloc", g, sizes[g], 4, mb.accumulate_grad()),
             mb.action("alloc", b, sizes[b], 5, mb.backward_python(44)), mb.action("free_requested", a, sizes[a], 6),
             mb.action("free_requested", b, sizes[b], 7), mb.action("alloc", s, sizes[s], 8, mb.optimizer_step(100)),
             mb.action("alloc", o, sizes[o], 9, mb.optimizer_step(101)), mb.action("free_requested", o, sizes[o], 10)]
    kept = [mb.block(x, sizes[x], allocated=True) for x in (w, g, s)]
    free = segment_mib * MIB - 15 * MIB
    blocks = [*kept, mb.block(base + 200 * MIB, free, allocated=False)]
    return mb.write(path, mb.snapshot([mb.segment(base, segment_mib * MIB, blocks)], [trace]))


def test_each_allocation_is_classed_by_its_phase_and_lifetime(tmp_path: Path) -> None:
    (h,), _ = replay_snapshot(read_snapshot(_training_step(tmp_path / "s.pickle")))
    made = h.allocations.start >= 0
    by_size = {int(size): CATEGORIES[c] for size, c in zip(h.allocations.size_bytes[made], categories(h)[made])}
    assert by_size == {4 * MIB: "parameters", 2 * MIB: "activations", MIB: "temporaries", 3 * MIB: "gradients",
                       MIB // 2: "temporaries", 8 * MIB: "optimizer_state", 3 * MIB // 2: "temporaries"}


def test_the_advice_numbers_worked_out_by_hand(tmp_path: Path) -> None:
    """Device 32 MiB, 20 MiB reserved at the 16.5 MiB peak. The batch that fits is set by the optimizer step
    (fixed 15 MiB, growing 1.5 MiB): k = (0.95 x 32 / (20 / 16.5) - 15) / 1.5 = 6.72. With 3/4 of the optimizer
    state freed, the end of forward binds instead (fixed 4, growing 3): k = (25.08 - 4) / 3 = 7.03."""
    options = MemoryOptions(device_bytes=32 * MIB, fixed_step_share=0.5, usd_per_gpu_hour=4.0, job_hours=10.0,
                            world_size=4)
    d = _one(_training_step(tmp_path / "s.pickle"), options)
    assert d.peak_allocated_bytes == 33 * MIB // 2
    assert {m.category: m.bytes for m in d.makeup} == {
        "parameters": 4 * MIB, "gradients": 3 * MIB, "optimizer_state": 8 * MIB, "activations": 0,
        "temporaries": 3 * MIB // 2, "unknown": 0}
    advice = {a.code: a for a in d.advice}
    room = 0.95 * 32 / (20 / 16.5)
    k = (room - 15) / 1.5
    batch = advice["larger_batch"]
    assert batch.batch_multiplier == pytest.approx(k)
    assert batch.est_saving_fraction == pytest.approx(0.5 * (1 - 1 / k))
    assert batch.est_saving_usd == pytest.approx(0.5 * (1 - 1 / k) * 4.0 * 10.0)
    for code in ("eight_bit_optimizer", "optimizer_sharding"):  # both keep a quarter of the state here
        assert advice[code].frees_bytes == 6 * MIB
        assert advice[code].batch_multiplier == pytest.approx((room - 4) / 3)
    assert advice["expandable_segments"].frees_bytes == 7 * MIB // 2
    assert advice["headroom"].title.startswith("Headroom: 12.0 MiB of 32.0 MiB")
    assert d.headroom_bytes == 12 * MIB
    assert "activation_checkpointing" not in advice  # no activations live at the peak


def test_checkpointing_is_advised_when_activations_fill_the_peak_and_its_cost_is_priced(tmp_path: Path) -> None:
    """Sixteen layers each keep a 1 MiB activation (line 20) and the forward peaks with them: 16 of 17 MiB.
    sqrt(16)-checkpointing keeps a quarter of them: 12 MiB freed, and an extra third of compute per step: with
    80% of the step in compute and 10% fixed per step, the larger batch it allows does not pay for it."""
    base = 2048 * MIB
    trace = [mb.action("alloc", base + k * MIB, MIB, k, mb.forward(20)) for k in range(16)]
    trace += [mb.action("alloc", base + 64 * MIB, 64 * 1024, 20, mb.backward_python(44))]
    trace += [mb.action("free_requested", base + k * MIB, MIB, 30 + k) for k in range(16)]
    blocks = [mb.block(base + 100 * MIB, MIB, allocated=True), mb.block(base + 64 * MIB, 64 * 1024, allocated=True)]
    path = mb.write(tmp_path / "s.pickle", mb.snapshot([mb.segment(base, 128 * MIB, blocks)], [trace]))
    d = _one(path, MemoryOptions(device_bytes=64 * MIB, fixed_step_share=0.1, compute_share=0.8))
    ckpt = next(a for a in d.advice if a.code == "activation_checkpointing")
    assert ckpt.frees_bytes == 12 * MIB
    assert ckpt.est_saving_fraction is not None and ckpt.batch_multiplier is not None
    k = ckpt.batch_multiplier
    assert ckpt.est_saving_fraction == pytest.approx(0.1 * (1 - 1 / k) - 0.8 / 3)  # it costs here


def test_an_oom_is_reported_with_what_was_live(tmp_path: Path) -> None:
    base = 4096 * MIB
    trace = [mb.action("alloc", base, 6 * MIB, 0, mb.forward(50)),
             mb.action("oom", 0, 8 * MIB, 1, device_free=MIB),
             mb.action("free_requested", base, 6 * MIB, 2)]
    path = mb.write(tmp_path / "s.pickle", mb.snapshot([mb.segment(base, 8 * MIB, [])], [trace]))
    (oom,) = _one(path).oom
    assert (oom.requested_bytes, oom.device_free_bytes, oom.allocated_bytes) == (8 * MIB, MIB, 6 * MIB)
    assert oom.time_us == mb.T0_US + 1
    assert [(g.label, g.bytes) for g in oom.live] == [("forward (model.py:50)", 6 * MIB)]


def test_a_trace_names_each_allocation_by_its_op_and_phase(tmp_path: Path) -> None:
    """10 MiB live before the trace; aten::linear makes 1 MiB in forward (freed in backward: an activation);
    MmBackward0 makes 0.5 MiB (freed in backward: a temporary); AccumulateGrad 3 MiB (a gradient); the optimizer
    step's zeros_like 2 MiB (kept: optimizer state), which is the peak, 15 MiB."""
    before = 10 * MIB

    def mem(ts: float, nbytes: int, total: int, addr: int, tid: int) -> kb.Event:
        e = kb.memory(ts, nbytes, total)
        e["tid"] = tid
        e["args"] |= {"Addr": addr, "Total Reserved": 32 * MIB}
        return e

    events = [kb.step(1, 0, 1000), kb.cpu_op("aten::linear", 10, 90), kb.cpu_op("aten::empty", 15, 10),
              kb.cpu_op("autograd::engine::evaluate_function: MmBackward0", 200, 60, tid=2),
              kb.cpu_op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 262, 20, tid=2),
              kb.cpu_op("Optimizer.step#Adam.step", 500, 100, cat="user_annotation"),
              kb.cpu_op("aten::zeros_like", 510, 10),
              mem(20, MIB, before + MIB, 1, 1), mem(250, MIB // 2, before + 3 * MIB // 2, 2, 2),
              mem(265, 3 * MIB, before + 9 * MIB // 2, 3, 2), mem(280, -MIB, before + 7 * MIB // 2, 1, 2),
              mem(290, -MIB // 2, before + 3 * MIB, 2, 2), mem(515, 2 * MIB, before + 5 * MIB, 4, 1)]
    path = kb.write(tmp_path / "t.json", kb.trace(events, device_memory=64 * MIB))
    (d,) = trace_memory([read_trace(path)], source="t").devices
    assert d.peak_allocated_bytes == 15 * MIB and d.start_allocated_bytes == before and d.absolute
    groups = {(g.op, g.label): (g.bytes, g.category) for g in d.at_peak}
    assert groups == {
        (None, "allocated before the recording began"): (before, "unknown"),
        ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
         "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"): (3 * MIB, "gradients"),
        ("aten::zeros_like", "aten::zeros_like"): (2 * MIB, "optimizer_state")}
    assert d.reserved_at_peak_bytes == 32 * MIB and d.device_bytes == 64 * MIB


def test_a_trace_without_totals_is_relative_and_says_so(tmp_path: Path) -> None:
    events = [kb.cpu_op("aten::empty", 0, 100)]
    for k, nbytes in enumerate((MIB, 2 * MIB, -MIB)):
        e = kb.memory(10 + k, nbytes, -1)
        del e["args"]["Total Allocated"]
        e["args"]["Addr"] = 1 if nbytes == -MIB else k + 1
        events.append(e)
    (d,) = trace_memory([read_trace(kb.write(tmp_path / "t.json", kb.trace(events)))], source="t").devices
    assert not d.absolute and d.peak_allocated_bytes == 3 * MIB and d.headroom_bytes is None and not d.advice


@pytest.mark.parametrize("device_type", [1, 6, 12, 13], ids=["CUDA", "HIP", "XPU", "MPS"])
def test_every_gpu_device_type_is_a_gpu_and_the_host_is_not(tmp_path: Path, device_type: int) -> None:
    """Memory events of each GPU device type give their device's history, with the peak the analysis reports for
    the rank; the host's allocations (device type 0), larger still, are no GPU's."""
    events = [kb.cpu_op("aten::mm", 0, 100), kb.launch(10, 5, 1), kb.kernel("gemm", 20, 50, 1),
              kb.memory(1, 3 * MIB, 3 * MIB, device_type=device_type),
              kb.memory(2, -MIB, 2 * MIB, device_type=device_type),
              kb.memory(3, 9 * MIB, 9 * MIB, device_type=0, device_id=-1)]
    trace = read_trace(kb.write(tmp_path / "t.json", kb.trace(events)))
    (d,) = trace_memory([trace], source="t").devices
    assert (d.device, d.absolute, d.peak_allocated_bytes) == (0, True, 3 * MIB)
    assert device_memory(trace).peak_allocated_bytes == 3 * MIB
