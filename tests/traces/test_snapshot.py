"""Reading memory snapshots: the real ones as the standard unpickler reads them (gzipped or not, any protocol),
a stated memory bound however many actions, and one line for anything that is not a snapshot."""

from __future__ import annotations

import gzip
import os
import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory
from gpuscope.model.snapshot import ACTION_NAMES, NO_STACK
from gpuscope.traces import TraceError
from gpuscope.traces.snapshot import ACTION_BYTES, READ_BYTES_PER_ACTION, read_snapshot
from tests import memory_builders as mb
from tests import reference
from tests.conftest import SAMPLES

REAL = SAMPLES / "memory_snapshots" / "cs336_medium_training_step.pickle.gz"


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
        read_snapshot(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_held_grows_by_the_stated_bytes_per_action(tmp_path: Path) -> None:
    """Three times the actions costs at most ``READ_BYTES_PER_ACTION`` more per action: entries are folded into
    columns as they are read, never held as objects."""
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
