"""The memory peak, checked against a count of our own: every bundled trace's [memory] events and every bundled
snapshot recomputed here from the raw file (parsed as plain JSON; pickle.load: these are our own files) with nothing of
gpuscope's, and compared with what `gpuscope memory --json` reports (``trace_memory`` / ``snapshot_memory``, as
JSON) and with `gpuscope analyze`'s rank peak (``analyzers.trace.memory.device_memory``).

The recomputation, per GPU (device type CUDA, HIP, XPU or MPS; device id 0 or more):
- a trace: the largest "Total Allocated" (the allocator's own total after each event) where every event records
  it, else the largest running sum of "Bytes"; the peak's time is the first event that reaches it, made an epoch
  time by "baseTimeNanoseconds" where "ts" counts from it;
- a snapshot: what the allocated blocks hold at the end ("requested_size") less the trace's net allocations is what
  was live when the recording began; from there +size at each "alloc", -size at each "free_requested"; the peak is
  the most after any action.

The same checks run over any folder of traces by hand: ``python -m tests.accuracy.test_memory_peak PATH...`` prints
how many devices were checked and the largest difference (docs/memory.md, "Tested on", has the figures).
"""

from __future__ import annotations

import gzip
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpuscope.analyzers.memory import snapshot_memory, trace_memory
from gpuscope.analyzers.trace.memory import device_memory
from gpuscope.model.codec import to_json
from gpuscope.specs import lookup_spec
from gpuscope.traces import read_trace
from gpuscope.traces.snapshot import read_snapshot
from tests.conftest import SAMPLES

GPU_TYPES = (1, 6, 12, 13)  # c10's CUDA, HIP, XPU, MPS
EPOCH_2000_US = 946_684_800 * 10**6


class _Devices(msgspec.Struct):
    deviceProperties: list[dict[str, Any]] = []  # noqa: N815 (Kineto's name)


class _Event(msgspec.Struct):
    name: str = ""
    ph: str = ""
    ts: float = 0.0
    args: msgspec.Raw = msgspec.Raw()


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815
    baseTimeNanoseconds: Any = None  # noqa: N815


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def raw_memory_events(path: Path) -> tuple[list[tuple[float, dict[str, Any]]], Any]:
    """The file's [memory] events as (ts, args), and its baseTimeNanoseconds: msgspec parses the JSON, leaving every
    other event's args unparsed (a faster json.loads of the same text)."""
    doc = msgspec.json.decode(_text(path), type=_Trace)
    events = [(e.ts, msgspec.json.decode(e.args)) for e in doc.traceEvents
              if e.name == "[memory]" and e.ph == "i" and len(e.args)]
    return events, doc.baseTimeNanoseconds


def trace_peaks(path: Path) -> list[tuple[int, float]]:
    """(peak bytes, peak time in epoch µs or -1 where the file does not say when) per GPU, largest first."""
    events, base = raw_memory_events(path)
    by_device: dict[tuple[int, int], list[tuple[float, dict[str, Any]]]] = {}
    for ts, args in events:
        if args.get("Device Type") in GPU_TYPES and args.get("Device Id", -1) >= 0:
            by_device.setdefault((args["Device Type"], args["Device Id"]), []).append((ts, args))
    out = []
    for mine in by_device.values():
        mine.sort(key=lambda e: e[0])
        if all("Total Allocated" in args for _, args in mine):
            totals = [args["Total Allocated"] for _, args in mine]
        else:
            running, totals = 0, []
            for _, args in mine:
                running += args.get("Bytes", 0)
                totals.append(running)
        peak = max(totals)
        ts = mine[totals.index(peak)][0]
        when = ts if ts >= EPOCH_2000_US else ts + base / 1000 if isinstance(base, int) and base > 0 else -1.0
        out.append((max(peak, 0), when))
    return sorted(out, reverse=True)


def snapshot_peaks(doc: Any) -> list[int]:
    """The peak allocated bytes of each device with an allocator trace, by device."""
    held: dict[int, int] = {}
    for seg in doc.get("segments", []):
        for b in seg.get("blocks", []):
            if b.get("state") == "active_allocated":
                held[seg["device"]] = held.get(seg["device"], 0) + b.get("requested_size", b["size"])
    peaks = []
    for device, actions in enumerate(doc.get("device_traces", [])):
        if not actions:
            continue
        sign = {"alloc": 1, "free_requested": -1}
        net = sum(sign.get(a["action"], 0) * a["size"] for a in actions)
        allocated, peak = held.get(device, 0) - net, None
        for a in actions:
            allocated += sign.get(a["action"], 0) * a["size"]
            peak = allocated if peak is None else max(peak, allocated)
        peaks.append(peak or 0)
    return peaks


def ours_of_trace(path: Path) -> tuple[list[tuple[int, float]], int | None]:
    """What gpuscope memory --json reports per GPU (peak, time), and gpuscope analyze's rank peak."""
    trace = read_trace(path)
    report = msgspec.json.decode(to_json(trace_memory([trace], source=str(path))))
    found = [(d["peak_allocated_bytes"], d["peak_time_us"] if d["peak_time_us"] is not None else -1.0)
             for d in report["devices"]]
    return sorted(found, reverse=True), device_memory(trace).peak_allocated_bytes


def ours_of_snapshot(path: Path) -> list[int]:
    report = msgspec.json.decode(to_json(snapshot_memory(read_snapshot(path))))
    return [d["peak_allocated_bytes"] for d in report["devices"]]


def _bundled(suffixes: tuple[str, ...], needle: bytes) -> list[Path]:
    return [path for path in sorted(SAMPLES.rglob("*"))
            if path.is_file() and path.name.endswith(suffixes) and needle in _text(path)]


TRACES = _bundled((".json", ".json.gz"), b'"[memory]"')
SNAPSHOTS = _bundled((".pickle", ".pickle.gz", ".pkl", ".pkl.gz"), b"device_traces")


def test_the_bundled_recordings_with_memory_data_are_all_here() -> None:
    # Fails closed: a sample with memory data that this check stopped finding would go unchecked.
    assert len(TRACES) >= 13 and len(SNAPSHOTS) == 3


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_a_traces_peak_and_its_time_are_the_raw_events(path: Path) -> None:
    expected = trace_peaks(path)
    found, analyzed = ours_of_trace(path)
    assert [p for p, _ in found] == [p for p, _ in expected]
    for (_, when), (_, ours) in zip(expected, found):
        assert (ours == -1) == (when == -1) and abs(ours - when) <= 1  # µs: the file's times have fractions
    assert analyzed == (expected[0][0] if expected else None)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_a_snapshots_peak_is_its_raw_actions(path: Path) -> None:
    with gzip.open(path) if path.suffix == ".gz" else path.open("rb") as f:
        doc = pickle.load(f)  # our own bundled file: the standard unpickler is safe here
    assert ours_of_snapshot(path) == snapshot_peaks(doc)


def test_the_spec_tables_driver_sizes_are_what_the_bundled_recordings_report() -> None:
    # Every bundled trace whose GPU the table has a driver-reported size for reports that size (to 0.1%: the
    # driver and ECC move it by a few MiB), so `gpuscope memory --gpu` and a trace's deviceProperties agree.
    checked = 0
    for path in _bundled((".json", ".json.gz"), b"totalGlobalMem"):
        for device in msgspec.json.decode(_text(path), type=_Devices).deviceProperties:
            spec = lookup_spec(device.get("name")).found
            if spec is not None and spec.device_bytes is not None and device.get("totalGlobalMem"):
                assert abs(device["totalGlobalMem"] / spec.device_bytes - 1) < 1e-3, (path, device["name"])
                checked += 1
    assert checked >= 10


def sweep(paths: list[Path]) -> Iterator[str]:
    """The trace check over every trace under ``paths``: one line per file with memory events."""
    worst, devices = 0, 0
    for root in paths:
        for path in sorted(p for p in (root.rglob("*") if root.is_dir() else [root]) if p.name.endswith(
                (".json", ".json.gz"))):
            try:
                expected = trace_peaks(path)
            except (OSError, ValueError, EOFError, msgspec.DecodeError):
                continue
            if not expected:
                continue
            found, analyzed = ours_of_trace(path)
            diff = max([abs(a[0] - b[0]) for a, b in zip(expected, found)] + [abs((analyzed or 0) - expected[0][0])])
            late = max(abs(a[1] - b[1]) for a, b in zip(expected, found))
            devices += len(expected)
            worst = max(worst, diff)
            yield (f"{path}: {len(expected)} GPU(s), peak {expected[0][0]:,} bytes, difference {diff:,} bytes, "
                   f"time {late:.0f} µs{'' if len(found) == len(expected) else ', DEVICES DIFFER'}")
    yield f"{devices} GPU(s) checked; largest peak difference {worst:,} bytes"


if __name__ == "__main__":
    for line in sweep([Path(p) for p in sys.argv[1:]]):
        print(line)
