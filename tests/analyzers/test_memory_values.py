"""What the memory analysis makes of the values it is given: epoch times from a trace's own clock, the device's size
from an out-of-memory event, impossible sizes and devices that are not GPUs left out and named, and the one
decision of headroom and batch size that `gpuscope analyze` and `gpuscope memory` share."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.advice import headroom
from gpuscope.analyzers.advice.batch import batch_room
from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory, trace_memory
from gpuscope.analyzers.trace.memory import device_memory
from gpuscope.figures.memory import memory_timeline
from gpuscope.model.diagnosis import JobFacts
from gpuscope.model.memory import MAX_DEVICE_BYTES
from gpuscope.traces import read_trace
from gpuscope.traces.snapshot import read_snapshot
from tests import builders as kb
from tests import memory_builders as mb
from tests.memory_builders import MIB

BASE_NS = 1_751_410_836_000_000_000  # 2025-07-01, as TraceLens's MI300X traces record it
TS_US = 2_241_346_141_047.0  # relative to it: read as an epoch time, 1970-01-26


def _trace(tmp_path: Path, events: list[kb.Event], **extra: object) -> Path:
    return kb.write(tmp_path / "rank0.json", kb.trace(events, **extra))


def test_a_traces_peak_is_dated_by_its_base_time(tmp_path: Path) -> None:
    events = [kb.memory(TS_US, MIB, MIB), kb.memory(TS_US + 10, 2 * MIB, 3 * MIB), kb.memory(TS_US + 20, -MIB, 2 * MIB)]
    trace = read_trace(_trace(tmp_path, events, baseTimeNanoseconds=BASE_NS))
    (d,) = trace_memory([trace], source="t").devices
    assert d.peak_time_us == BASE_NS // 1000 + int(TS_US) + 10
    assert d.timeline.time_us[0] == BASE_NS // 1000 + int(TS_US)
    # Moving the base time moves every time by exactly as much, and nothing else.
    later = read_trace(_trace(tmp_path, events, baseTimeNanoseconds=BASE_NS + 3_600 * 10**9))
    (e,) = trace_memory([later], source="t").devices
    assert e.peak_time_us == d.peak_time_us + 3_600 * 10**6
    assert e.peak_allocated_bytes == d.peak_allocated_bytes and e.timeline.allocated_bytes == d.timeline.allocated_bytes


def test_a_trace_that_does_not_say_when_it_was_recorded_has_no_peak_time(tmp_path: Path) -> None:
    trace = read_trace(_trace(tmp_path, [kb.memory(TS_US, MIB, MIB), kb.memory(TS_US + 5, MIB, 2 * MIB)]))
    (d,) = trace_memory([trace], source="t").devices
    assert d.peak_allocated_bytes == 2 * MIB and d.peak_time_us is None
    fig = memory_timeline(d)
    assert not isinstance(fig, str) and "1970" not in str(fig.to_dict()) and "UTC" not in str(fig.layout.xaxis.title)


def test_epoch_times_are_kept_as_they_are(tmp_path: Path) -> None:
    epoch_us = 1_669_783_687_464_300.0  # HTA's traces: ts since the epoch, no base time
    trace = read_trace(_trace(tmp_path, [kb.memory(epoch_us, MIB, MIB)], baseTimeNanoseconds=BASE_NS))
    (d,) = trace_memory([trace], source="t").devices
    assert d.peak_time_us == int(epoch_us)


def _oom_snapshot(tmp_path: Path, free: int) -> Path:
    base = 4096 * MIB
    trace = [mb.action("segment_alloc", base, 8 * MIB, 0), mb.action("alloc", base, 6 * MIB, 1, mb.forward(50)),
             mb.action("oom", 0, 8 * MIB, 2, device_free=free), mb.action("free_requested", base, 6 * MIB, 3)]
    return mb.write(tmp_path / "s.pickle", mb.snapshot([mb.segment(base, 8 * MIB, [])], [trace]))


def test_an_oom_event_gives_the_device_size_it_shows_as_a_lower_bound(tmp_path: Path) -> None:
    snap = read_snapshot(_oom_snapshot(tmp_path, free=3 * MIB))
    (d,) = snapshot_memory(snap).devices
    # Free 3 MiB by the driver's word, 8 MiB reserved by the allocator then: at least 11 MiB.
    assert d.device_bytes == 11 * MIB and d.device_bytes_source is not None
    assert d.device_bytes_source.startswith("at least") and d.headroom_bytes == 3 * MIB
    given = snapshot_memory(snap, MemoryOptions(device_bytes=80 * MIB, device_bytes_source="--device-gib")).devices
    assert given[0].device_bytes == 80 * MIB  # what the user says wins


def test_without_an_oom_or_a_gpu_the_device_size_stays_unknown(tmp_path: Path) -> None:
    (d,) = snapshot_memory(read_snapshot(mb.forward_backward(tmp_path / "s.pickle"))).devices
    assert d.device_bytes is None and d.headroom_bytes is None


def test_impossible_snapshot_sizes_and_a_device_minus_one_are_left_out_and_named(tmp_path: Path) -> None:
    base = 4096 * MIB
    huge = 2**62
    trace = [mb.action("alloc", base, 2 * MIB, 0, mb.forward(10)), mb.action("alloc", base + 4 * MIB, huge, 1),
             mb.action("alloc", base + 2 * MIB, MIB, 2, mb.forward(11)), mb.action("oom", 0, 64 * MIB, 3,
                                                                                   device_free=MIB)]
    live = [mb.block(base, 2 * MIB, allocated=True), mb.block(base + 2 * MIB, MIB, allocated=True)]
    segments = [mb.segment(base, 8 * MIB, live), mb.segment(2**40, huge, [], device=0),
                mb.segment(2**41, 4 * MIB, [], device=-1)]
    snap = read_snapshot(mb.write(tmp_path / "s.pickle", mb.snapshot(segments, [trace])))
    report = snapshot_memory(snap)
    (d,) = report.devices
    assert d.device == 0 and d.peak_allocated_bytes == 3 * MIB and d.peak_reserved_bytes == 8 * MIB
    (oom,) = d.oom  # renumbered past the action left out: still the oom, with what was live before it
    assert oom.requested_bytes == 64 * MIB and oom.allocated_bytes == 3 * MIB
    text = " ".join(report.warnings)
    assert "device -1 (not a GPU" in text
    assert "1 allocator action (a size of 4,611,686,018,427,387,904 bytes)" in text and "1 segment" in text
    assert "impossible sizes" in text


def test_impossible_trace_memory_events_and_device_minus_one_are_left_out_and_named(tmp_path: Path) -> None:
    events = [kb.memory(10, MIB, MIB), kb.memory(20, 4 * MIB, 5 * MIB, device_id=-1),
              kb.memory(30, 2**62, 2**62), kb.memory(40, MIB, 2 * MIB), kb.memory(50, 3, 7, device_type=0,
                                                                                 device_id=-1)]
    trace = read_trace(_trace(tmp_path, events, baseTimeNanoseconds=BASE_NS))
    line = next(w for w in trace.warnings if "GPU memory events left out" in w)
    assert "2 GPU memory events left out" in line and "1 of device -1 (not a GPU" in line
    assert "impossible Bytes (4,611,686,018,427,387,904 bytes" in line
    report = trace_memory([trace], source="t")
    assert [d.device for d in report.devices] == [0] and report.devices[0].peak_allocated_bytes == 2 * MIB
    assert line in report.warnings
    assert device_memory(trace).peak_allocated_bytes == 2 * MIB  # analyze's peak: the same events, the same peak
    assert len(trace.memory.ts_ns) == 3  # the CPU's event (device type 0) is kept: it is no GPU's


def test_one_rule_for_headroom_and_batch_size() -> None:
    # analyze, from the peak alone: a doubled batch fits while doubling the whole peak stays in the usable share.
    assert headroom.DOUBLING_SHARE == pytest.approx(headroom.USABLE_SHARE / 2)
    for share, fits in ((0.40, True), (0.47, True), (0.48, False), (0.6, False)):
        facts = JobFacts(peak_memory_share=share, peak_memory_bytes=int(share * 10**10), peak_memory_all_known=True)
        assert batch_room(facts).fits is fits, share
        assert ((headroom.surely_fitting_multiplier(share) or 0) >= headroom.DOUBLED) is fits
    # gpuscope memory, from the makeup: the same arithmetic with what does not grow held fixed; all of it growing
    # gives exactly analyze's figure.
    assert headroom.fitting_multiplier(100.0, 0.0, 20.0) == pytest.approx(headroom.surely_fitting_multiplier(0.2))
    assert headroom.fitting_multiplier(100.0, [10.0, 30.0], [20.0, 10.0]) == pytest.approx(min(85 / 20, 65 / 10))
    assert headroom.fitting_multiplier(100.0, 10.0, 0.0) is None and headroom.fitting_multiplier(10.0, 20.0, 1.0) == 0
    assert headroom.advised(headroom.MIN_MULTIPLIER) and not headroom.advised(1.2) and not headroom.advised(None)
    assert MAX_DEVICE_BYTES == 2**50
