"""Reading memory snapshots: the real ones as the standard unpickler reads them (gzipped or not, any protocol),
a stated memory bound however many actions, and one line for anything that is not a snapshot."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import tracemalloc
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory
from gpuscope.model.snapshot import ACTION_NAMES, NO_STACK, MemorySnapshot
from gpuscope.traces import TraceError
from gpuscope.traces.limits import PickleBudget, pickle_budget
from gpuscope.traces.plain_data import load_plain
from gpuscope.traces.snapshot import ACTION_BYTES, READ_BYTES_PER_ACTION, read_snapshot
from gpuscope.traces.snapshot_fold import fold
from gpuscope.traces.snapshot_layout import Rows
from gpuscope.traces.snapshot_stream import read_streaming
from tests import memory_builders as mb
from tests import reference
from tests.conftest import SAMPLES

REAL = SAMPLES / "memory_snapshots" / "cs336_medium_training_step.pickle.gz"
BUDGET = PickleBudget(inflated_bytes=2**32, inflation=100, memory_bytes=2**32)
STREAMED = replace(BUDGET, in_process_bytes=2**40)
"""Every snapshot read by the streaming reader, in this process."""
C_UNPICKLER = replace(BUDGET, in_process_bytes=0)
"""Every snapshot read by the C unpickler, in a child process."""


def test_a_real_snapshot_reads_as_its_raw_entries_say(tmp_path: Path) -> None:
    doc = reference.snapshot(REAL)
    snap = read_snapshot(REAL)
    (trace,) = doc["device_traces"]
    (d,) = snap.devices
    assert [ACTION_NAMES[e["action"]] for e in trace] == d.actions.action.tolist()
    assert [e["size"] for e in trace] == d.actions.size_bytes.tolist()
    assert [e["addr"] for e in trace] == d.actions.addr.tolist()
    for k in (0, len(trace) // 2, len(trace) - 1):  # frames interned and given back whole
        frames = [(f["name"], f["filename"], f["line"]) for f in trace[k]["frames"]]
        sid = int(d.actions.stack_id[k])
        assert [tuple(vars(snap.frames[i]).values()) for i in snap.stacks[sid]] == frames if frames else True
    assert len(snap.frames) == len({(f["name"], f["filename"], f["line"]) for e in trace for f in e["frames"]}
                                   | {(f["name"], f["filename"], f["line"]) for s in doc["segments"]
                                      for b in s["blocks"] for f in b["frames"]})
    assert d.segments.total_bytes.sum() == sum(s["total_size"] for s in doc["segments"])
    assert snap.expandable_segments is False and [a.stage for a in snap.annotations] == ["START", "END"]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_any_protocol_gzipped_or_not_reads_the_same(tmp_path: Path, protocol: int) -> None:
    doc = reference.snapshot(REAL)
    plain = tmp_path / f"p{protocol}.pickle"
    plain.write_bytes(pickle.dumps(doc, protocol=protocol))
    zipped = tmp_path / f"p{protocol}.bin"  # told by its content, whatever its name
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    first, second, base = read_snapshot(plain), read_snapshot(zipped), read_snapshot(REAL)
    for snap in (first, second):
        assert snap.frames == base.frames and snap.stacks == base.stacks
        assert np.array_equal(snap.devices[0].actions.time_us, base.devices[0].actions.time_us)


def _synthetic(path: Path, actions: int) -> None:
    """A snapshot of ``actions`` alloc/free pairs, each with a 20-frame stack out of 50 (shared, as PyTorch's are)."""
    frames = [{"name": f"f{i}", "filename": f"/src/m{i % 7}.py", "line": i} for i in range(200)]
    stacks = [[frames[(j * 7 + k) % 200] for k in range(20)] for j in range(50)]
    trace = [{"action": "alloc" if i % 2 == 0 else "free_requested", "addr": 0x7000_0000 + (i // 2) * 4096,
              "size": 4096, "stream": 0, "time_us": 1_700_000_000_000_000 + i, "frames": stacks[i % 50],
              "compile_context": "N/A", "user_metadata": ""} for i in range(actions)]
    doc = {"segments": [{"device": 0, "address": 0x7000_0000, "total_size": 1 << 30, "allocated_size": 0,
                         "requested_size": 0, "stream": 0, "is_expandable": False, "frames": [],
                         "blocks": [{"address": 0x7000_0000, "size": 1 << 30, "requested_size": 0,
                                     "state": "inactive", "frames": []}]}],
           "device_traces": [trace], "allocator_settings": {}, "external_annotations": []}
    path.write_bytes(pickle.dumps(doc, protocol=4))


def _peak_bytes(path: Path) -> int:
    tracemalloc.start()
    try:
        read_snapshot(path, budget=STREAMED)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_held_grows_by_the_stated_bytes_per_action(tmp_path: Path) -> None:
    """Read by the streaming reader (as a snapshot too large for the C unpickler's memory is), three times the
    actions costs at most ``READ_BYTES_PER_ACTION`` more per action: entries are folded into columns as they are
    read, never held as objects."""
    small, large = tmp_path / "small.pickle", tmp_path / "large.pickle"
    _synthetic(small, 10_000)
    _synthetic(large, 30_000)
    growth = _peak_bytes(large) - _peak_bytes(small)
    assert ACTION_BYTES * 20_000 <= growth <= READ_BYTES_PER_ACTION * 20_000
    tracemalloc.start()
    pickle.loads(large.read_bytes())  # what the standard unpickler holds for the same file: several times more
    whole = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert _peak_bytes(large) < whole / 2


def _write(path: Path, value: Any) -> Path:
    path.write_bytes(pickle.dumps(value, protocol=4))
    return path


@pytest.mark.parametrize(("content", "words"), [
    (b"", "the file is empty"),
    (pickle.dumps({"segments": []}, protocol=4)[:-3], "not a valid pickle"),
    (pickle.dumps([1, 2, 3], protocol=4), "not a PyTorch memory snapshot"),
    (pickle.dumps({"traceEvents": []}, protocol=4), "not a PyTorch memory snapshot"),
    (gzip.compress(b"\x80\x04", mtime=0)[:-4], "cannot read|not a valid pickle"),
])
def test_what_is_not_a_snapshot_is_one_line(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "snap.pickle"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=words) as caught:
        read_snapshot(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_pipe_or_a_folder_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.pickle"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="named pipe"):
        read_snapshot(fifo)
    with pytest.raises(TraceError, match="directory"):
        read_snapshot(tmp_path)
    with pytest.raises(TraceError, match="cannot read"):
        read_snapshot(tmp_path / "missing.pickle")


def test_entries_of_the_wrong_form_are_left_out_and_said(tmp_path: Path) -> None:
    entry = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1, "frames": []}
    doc = {"segments": [], "device_traces": [[entry, {**entry, "size": "512"}, {**entry, "action": "teleport"}]]}
    snap = read_snapshot(_write(tmp_path / "s.pickle", doc))
    assert len(snap.devices[0].actions) == 1 and snap.devices[0].actions.stack_id.tolist() != [NO_STACK - 1]
    assert any("1 trace entries with a field of the wrong type" in w for w in snap.warnings)
    assert any("unknown actions" in w and "teleport" in w for w in snap.warnings)


def test_a_snapshot_without_history_says_only_its_end_is_known(tmp_path: Path) -> None:
    doc = {"segments": [{"device": 0, "address": 0, "total_size": 2048, "blocks": [
        {"address": 0, "size": 1024, "requested_size": 1000, "state": "active_allocated", "frames": []}]}]}
    snap = read_snapshot(_write(tmp_path / "s.pickle", doc))
    assert snap.devices[0].segments.allocated_bytes.tolist() == [1000]
    assert any("without _record_memory_history" in w for w in snap.warnings)


_SEED_DOC = pickle.dumps(mb.snapshot([mb.segment(0, 8 * mb.MIB, [mb.block(0, mb.MIB, allocated=True)])], [[
    mb.action("alloc", mb.MIB, 2 * mb.MIB, 0, mb.forward(10)), mb.action("oom", 0, 9 * mb.MIB, 1, device_free=0),
    mb.action("free_requested", mb.MIB, 2 * mb.MIB, 2, mb.forward(11))]]), protocol=4)


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=len(_SEED_DOC) - 1), st.integers(0, 255)),
                min_size=1, max_size=6), st.integers(min_value=1, max_value=len(_SEED_DOC)))
@settings(max_examples=400, deadline=None)
def test_a_damaged_snapshot_is_one_line_or_read(tmp_path_factory: pytest.TempPathFactory,
                                                changes: list[tuple[int, int]], keep: int) -> None:
    """Bytes of a snapshot changed or cut: a TraceError of one line, or a snapshot the analysis reads through."""
    data = bytearray(_SEED_DOC)
    for at, value in changes:
        data[at] = value
    path = tmp_path_factory.mktemp("fuzz") / "s.pickle"
    path.write_bytes(bytes(data[:keep]))
    try:
        snap = read_snapshot(path)
    except TraceError as exc:
        assert "\n" not in str(exc)
        return
    snapshot_memory(snap, MemoryOptions(device_bytes=2**30, fixed_step_share=0.5))


def _same(a: MemorySnapshot, b: MemorySnapshot) -> None:
    """Two readings of one snapshot hold the same: frames, stacks, every column (and its dtype), out-of-memory
    events, settings, annotations and warnings."""
    assert (a.source, a.frames, a.stacks, a.expandable_segments, a.annotations, a.warnings) == \
        (b.source, b.frames, b.stacks, b.expandable_segments, b.annotations, b.warnings)
    assert [d.device for d in a.devices] == [d.device for d in b.devices]
    for x, y in zip(a.devices, b.devices):
        assert x.ooms == y.ooms
        for part in ("actions", "segments", "blocks"):
            for f in fields(getattr(x, part)):
                first, second = getattr(getattr(x, part), f.name), getattr(getattr(y, part), f.name)
                assert first.dtype == second.dtype and np.array_equal(first, second), (part, f.name)


def _built(tmp_path: Path) -> list[Path]:
    """The snapshots the suite builds: the documented forward and backward, entries of every form, many shared
    stacks, several devices, an out-of-memory event, protocols 2 to 5."""
    entry = mb.action("alloc", 4096, 512, 0, mb.forward(3))
    odd = mb.snapshot([mb.segment(0, 8 * mb.MIB, [mb.block(0, mb.MIB, allocated=True, frames=mb.building(9))]),
                       mb.segment(2**30, 4 * mb.MIB, [], device=1)],
                      [[entry, {**entry, "size": "512"}, {**entry, "action": "teleport"}, {**entry, "size": 2**70},
                        {**entry, "frames": mb.backward_python(5)}, mb.action("oom", 0, 9 * mb.MIB, 1, device_free=0),
                        {**entry, "addr": True}, 7, {"frames": mb.optimizer_step(2)}],
                       [], [mb.action("alloc", 0, 64, 9)]],
                      annotations=[{"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": 5}])
    paths = [mb.forward_backward(tmp_path / "fb.pickle"), mb.write(tmp_path / "odd.pickle", odd)]
    _synthetic(tmp_path / "synthetic.pickle", 3_000)
    paths.append(tmp_path / "synthetic.pickle")
    for protocol in (2, 3, 5):
        paths.append(mb.write(tmp_path / f"p{protocol}.pickle", odd, protocol=protocol))
    (tmp_path / "seed.pickle").write_bytes(_SEED_DOC)
    return [*paths, tmp_path / "seed.pickle"]


def test_the_c_unpickler_reads_every_snapshot_as_the_streaming_reader_does(tmp_path: Path) -> None:
    """The bundled real snapshots and the ones the suite builds: the same snapshot from either reader (the streaming
    one reads as the standard unpickler does: test_pickle_stream.py)."""
    for path in [*sorted((SAMPLES / "memory_snapshots").glob("*.pickle.gz")), *_built(tmp_path)]:
        _same(read_snapshot(path, budget=C_UNPICKLER), read_snapshot(path, budget=STREAMED))


frames_pool = [mb.frame(f"f{i}", f"/src/m{i % 3}.py", i) for i in range(6)] + [mb.frame("g", "??", 0),
                                                                                {"name": "x", "line": 1}]
frames_lists = st.lists(st.sampled_from(frames_pool), max_size=4)
stacks_pool = [[frames_pool[0], frames_pool[1]], [], [frames_pool[2]]]
some_frames = st.one_of(st.sampled_from(stacks_pool), frames_lists)
"""A stack shared with other entries (one object in the pickle), or one of its own."""
an_entry = st.builds(lambda kind, size, frames, t: mb.action(kind, 4096 * (t % 5), size, t, frames),
                     st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc", "oom", "snapshot"]),
                     st.integers(0, 2**20), some_frames, st.integers(0, 50)) | st.sampled_from(
    [{"action": "teleport"}, {"action": "alloc", "size": -1}, {"action": "alloc", "addr": 1.5}, {"frames": []}, 3])
a_block = st.builds(lambda size, on, frames: mb.block(0, size, allocated=on, frames=frames),
                    st.integers(1, 2**20), st.booleans(), some_frames)
a_segment = st.builds(lambda device, blocks: {**mb.segment(0, 2**22, blocks, device=device), "frames": stacks_pool[2]},
                      st.integers(0, 3), st.lists(a_block, max_size=3))


@given(st.lists(a_segment, max_size=3), st.lists(st.lists(an_entry, max_size=12), max_size=3),
       st.sampled_from([2, 4, 5]))
@settings(max_examples=60, deadline=None)
def test_either_reader_folds_any_snapshot_of_pytorchs_layout_alike(segments: list[Any], traces: list[Any],
                                                                  protocol: int) -> None:
    """The C unpickler's fold (in this process: the child is the same code) against the streaming reader."""
    data = pickle.dumps(mb.snapshot(segments, traces), protocol=protocol)
    fast = fold(load_plain(io.BytesIO(data)), Rows(10**6, len(data)))
    _same(fast, read_streaming(io.BytesIO(data), size_bytes=len(data), rows=Rows(10**6, len(data))))


def test_the_c_unpickler_falls_back_to_the_streaming_reader_where_its_memory_does_not_fit() -> None:
    """The real snapshot inflates to 3 MiB: the C unpickler may take 12 times that and 256 MiB, past a budget of
    260 MiB, so the streaming reader reads it in the child."""
    _same(read_snapshot(REAL, budget=replace(C_UNPICKLER, memory_bytes=260 * 2**20)),
          read_snapshot(REAL, budget=STREAMED))


def _gzip_of(data: bytes, path: Path) -> Path:
    path.write_bytes(gzip.compress(data, compresslevel=9))
    return path


@pytest.mark.parametrize("budget", [STREAMED, C_UNPICKLER])
def test_each_budget_spent_is_one_line_naming_it(tmp_path: Path, budget: PickleBudget) -> None:
    ints = b"\x80\x04}(\x8c\x08segments](" + b"K\x01" * (1 << 20) + b"eu."  # 2 MiB of a list of small ints
    shared = pickle.dumps({"segments": [{"device": 0, "address": 0, "total_size": 1, "blocks": [
        {"address": 0, "size": 1}] * 400}] * 400}, protocol=4)  # 160,000 block rows from 4 KB
    cases = [
        (_gzip_of(ints, tmp_path / "bomb.pickle.gz"), budget,
         r"inflates past \d+ KiB: 100 times its size, the reader's limit for a gzip stream \(a gzip bomb\?\); set "
         "GPUSCOPE_MAX_PICKLE_GIB to read it"),
        (_gzip_of(ints, tmp_path / "big.pickle.gz"), replace(budget, inflated_bytes=2**20, inflation=None),
         r"inflates past 1 MiB: 1 MiB, the reader's limit \(set GPUSCOPE_MAX_PICKLE_GIB to raise it\)"),
        (mb.write(tmp_path / "big.pickle", {"segments": [], "x": "y" * (2 << 20)}),
         replace(budget, inflated_bytes=2**20, inflation=None), r"2 MiB of pickle: past 1 MiB, the reader's limit"),
        (mb.write(tmp_path / "shared.pickle", pickle.loads(shared)), budget,
         r"more than 100,000 rows \(allocator actions, segments and blocks\) in [\d.]+ KiB of pickle: past the "
         r"reader's limit of one row per 16 bytes \(a reference repeated many times\?\)"),
    ]
    for path, spent, words in cases:
        with pytest.raises(TraceError, match=words) as caught:
            read_snapshot(path, budget=spent)
        assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_the_budget_is_set_by_the_environment_and_a_bad_setting_is_one_line(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """(README: GPUSCOPE_MAX_PICKLE_GIB, GPUSCOPE_PICKLE_MEMORY_GIB.)"""
    assert pickle_budget({}).inflation == 100 and pickle_budget({}).inflated_bytes >= 4 * 2**30
    set_ = pickle_budget({"GPUSCOPE_MAX_PICKLE_GIB": "0.5", "GPUSCOPE_PICKLE_MEMORY_GIB": "2"})
    assert (set_.inflated_bytes, set_.inflation, set_.memory_bytes) == (2**29, None, 2 * 2**30)
    monkeypatch.setenv("GPUSCOPE_MAX_PICKLE_GIB", str(1 / 1024))
    with pytest.raises(TraceError, match=r"2 MiB of pickle: past 1 MiB, the reader's limit \(set "
                                         r"GPUSCOPE_MAX_PICKLE_GIB to raise it\)"):
        read_snapshot(mb.write(tmp_path / "big.pickle", {"segments": [], "x": "y" * (2 << 20)}))
    monkeypatch.setenv("GPUSCOPE_PICKLE_MEMORY_GIB", "lots")
    with pytest.raises(TraceError, match="^GPUSCOPE_PICKLE_MEMORY_GIB: expected a number of GiB above 0, got 'lots'$"):
        read_snapshot(REAL)


def test_the_c_unpickler_in_its_child_is_held_to_its_memory(tmp_path: Path) -> None:
    path = tmp_path / "sets.pickle"
    # 216 bytes a byte: 430 MB, far past what a test worker's freed heap lets the child reuse under its cap
    path.write_bytes(b"\x80\x04}(\x8c\x08segments](" + b"\x8f" * 2_000_000 + b"eu.")
    with pytest.raises(TraceError, match=r"reading it needs more memory than the reader's limit of 9.91 MiB"):
        read_snapshot(path, budget=replace(C_UNPICKLER, memory_per_byte=1, memory_floor_bytes=8 * 2**20))


@pytest.mark.parametrize("budget", [STREAMED, C_UNPICKLER])
def test_devices_past_the_first_64_are_counted_not_read(tmp_path: Path, budget: PickleBudget) -> None:
    """(A 3.1 MB snapshot of 100,000 devices took the terminal view past 120 s.)"""
    doc = mb.snapshot([mb.segment(0, 1024, [], device=d) for d in range(0, 200, 2)],
                      [[mb.action("alloc", 0, 64, d)] for d in range(150)])
    snap = read_snapshot(mb.write(tmp_path / "many.pickle", doc), budget=budget)
    assert [d.device for d in snap.devices] == list(range(64))
    assert "175 devices: the first 64 by index are read, 111 left out" in snap.warnings


def test_out_of_memory_events_past_the_first_20_are_counted(tmp_path: Path) -> None:
    trace = [mb.action("alloc", 0, mb.MIB, 0, mb.forward(1))] + [
        mb.action("oom", 0, 9 * mb.MIB, 1 + i, device_free=i) for i in range(25)]
    path = mb.write(tmp_path / "oom.pickle", mb.snapshot([mb.segment(0, 8 * mb.MIB, [])], [trace]))
    snap = read_snapshot(path)
    (device,) = snapshot_memory(snap, MemoryOptions(device_bytes=2**30)).devices
    assert len(snap.devices[0].ooms) == 25 and [o.device_free_bytes for o in device.oom] == list(range(20))
    assert "GPU 0: 25 out-of-memory events, the first 20 described" in snap.warnings
