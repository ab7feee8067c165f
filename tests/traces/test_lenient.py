"""Fields of the wrong type cost the field or the event, counted in one warning, never the whole file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpuscope.model.trace import Kind
from gpuscope.traces import TraceError, read_trace
from tests import builders as b
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

DEV_TRACES = SAMPLES / "dev"


def _memcpy_bytes(value: object, ts: float) -> b.Event:
    event = b.memcpy(ts, 5, 50 + int(ts))
    event["args"]["bytes"] = value
    return event


def test_string_numbers_are_used_and_bad_ones_dropped_as_a_field(tmp_path: Path, chunked: bool) -> None:
    events = [*b.simple_training(2), _memcpy_bytes("4096", 3000), _memcpy_bytes("lots", 3100),
              _memcpy_bytes([1], 3200), _memcpy_bytes(None, 3300), _memcpy_bytes(2048, 3400)]
    t = read_trace(b.write(tmp_path / "rocm.json", b.trace(events)))
    copies = t.events.kind == Kind.MEMCPY
    assert t.events.bytes[copies].tolist() == [4096, -1, -1, -1, 2048]
    assert len(t.events) == 10 + 5
    (line,) = t.warnings
    assert "4 events" in line and "`args.bytes` in 3 (left out)" in line
    assert "`args.bytes` in 1 (numbers in strings, used)" in line and "\n" not in line


@pytest.mark.parametrize(
    ("field", "value", "kept"),
    [
        ("ts", "1000.5", True),  # a number in a string
        ("ts", None, False),
        ("ts", [1000], False),
        ("dur", "7", True),
        ("dur", {"us": 7}, False),
        ("name", 12, False),
        ("tid", 3.5, True),
        ("tid", [3], True),  # loses its thread, keeps the event
        ("args", [1, 2], True),
    ],
)
def test_wrong_typed_event_fields(tmp_path: Path, field: str, value: object, kept: bool) -> None:
    odd = b.cpu_op("aten::odd", 1000, 9)
    odd[field] = value
    t = read_trace(b.write(tmp_path / "t.json", b.trace([*b.simple_training(2), odd])))
    names = [t.names[i] for i in t.events.name_id.tolist()]
    assert ("aten::odd" in names) is kept and len(t.events) == 10 + kept
    (line,) = t.warnings
    assert line.startswith(f"{tmp_path / 't.json'}: 1 event had fields of the wrong type") and f"`{field}`" in line


def test_string_timestamps_read_like_numbers(tmp_path: Path) -> None:
    plain = read_trace(b.write(tmp_path / "a.json", b.trace(b.simple_training(2))))
    as_strings = [{**e, "ts": repr(e["ts"]), "dur": str(e["dur"])} for e in b.simple_training(2)]
    t = read_trace(b.write(tmp_path / "b.json", b.trace(as_strings)))
    assert np.array_equal(t.events.ts_ns, plain.events.ts_ns) and np.array_equal(t.events.dur_ns, plain.events.dur_ns)
    assert "10 events" in t.warnings[0]


def test_odd_top_level_parts_are_left_out(tmp_path: Path) -> None:
    doc = b.trace(b.simple_training(2), rank=1)
    doc["deviceProperties"] = {"id": "zero"}
    t = read_trace(b.write(tmp_path / "t.json", doc))
    assert t.gpus == () and t.rank == 1 and len(t.events) == 10
    assert any("deviceProperties" in w for w in t.warnings)


def test_a_file_with_no_usable_event_is_an_error(tmp_path: Path) -> None:
    path = b.write(tmp_path / "t.json", b.trace([{"ph": "X", "ts": "soon", "dur": 1}, 7]))
    with pytest.raises(TraceError, match="no usable events.*2 events had fields of the wrong type"):
        read_trace(path)


def test_well_formed_traces_have_no_warnings() -> None:
    for folder in ("resnet50_dataloader_bound", "resnet50_old_schema"):
        assert read_trace(next((SAMPLES / folder).glob("*.json.gz"))).warnings == ()


def test_every_development_trace_reads() -> None:
    for path in sorted(DEV_TRACES.glob("*.json.gz")):
        t = read_trace(path)
        assert len(t.events) > 0, path


def test_vllm_trace_with_string_bytes_is_analysed_with_one_warning(tmp_path: Path) -> None:
    path = DEV_TRACES / "vllm_decode_graph_capture.json.gz"
    result = gpuscope("analyze", str(path), "--json", "--no-save", home=tmp_path)
    assert result.returncode == 0, result.stderr
    warning_lines = [line for line in result.stderr.splitlines() if line.startswith("gpuscope: warning: ")]
    (typed,) = [line for line in warning_lines if "wrong type" in line]  # the other: its unnamed GPU, identified
    assert "`args.bytes` in 3" in typed and len(warning_lines) == 2
    report = json.loads(result.stdout)
    assert report["warnings"] == [line.removeprefix("gpuscope: warning: ") for line in warning_lines]
    assert report["ranks"][0]["gpu_busy"] is not None


def test_numbers_past_int64_are_left_out(tmp_path: Path) -> None:
    events = [*b.simple_training(1), _memcpy_bytes("1e30", 3000), _memcpy_bytes(2.0**70, 3100)]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    assert t.events.bytes[t.events.kind == Kind.MEMCPY].tolist() == [-1, -1]
    assert "`args.bytes` in 2 (left out)" in t.warnings[0]


def test_a_long_blank_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "blank.json"
    path.write_bytes(b" \n" * 10_000)
    with pytest.raises(TraceError, match="empty"):
        read_trace(path)
