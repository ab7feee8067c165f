"""The reader's stated limits: number ranges, nesting, the size of a trace's JSON, and files that are not files."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuscope.model.trace import RankTrace
from gpuscope.traces import TraceError, load, read_trace
from gpuscope.traces.events import DUR_LIMIT_US, TS_MAX_US
from gpuscope.traces.limits import DEFAULT_MAX_TRACE_GIB, ENV_MAX_TRACE_GIB, max_trace_bytes
from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line

BIG = 123456789012345678901234567890  # past 64 bits


def same_events(a: RankTrace, b: RankTrace) -> bool:
    return all(np.array_equal(getattr(a.events, f), getattr(b.events, f), equal_nan=f.endswith("per_sm"))
               for f in ("ts_ns", "dur_ns", "kind", "name_id", "stream", "correlation", "bytes", "blocks_per_sm"))


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def odd_kernel(field: str, value: object) -> b.Event:
    event = b.kernel("odd_kernel", 3000, 10, 9000)
    if field.startswith("args."):
        event["args"][field.removeprefix("args.")] = value
    else:
        event[field] = value
    return event


@pytest.mark.parametrize(("field", "value"), [("dur", 1e308), ("dur", -5.0), ("dur", DUR_LIMIT_US * 2),
                                              ("ts", 1e300), ("ts", TS_MAX_US * 1.01), ("ts", -1e20)])
def test_a_time_out_of_range_drops_its_event_with_the_warning(tmp_path: Path, chunked: bool, field: str,
                                                                value: float) -> None:
    plain = read_trace(b.write(tmp_path / "plain.json", b.trace(b.simple_training(2))))
    t = read_trace(b.write(tmp_path / "odd.json", b.trace([*b.simple_training(2), odd_kernel(field, value)])))
    assert same_events(t, plain), "the event is dropped, nothing else changes"
    (line,) = t.warnings
    assert f"`{field}` in 1 (events dropped)" in line and "out of range" in line


def test_dur_1e308_is_not_a_report_with_nonsense_shares(tmp_path: Path) -> None:
    """The report of a trace with the bad event equals the report of the trace without it, plus one warning."""
    odd = b.write(tmp_path / "odd.json", b.trace([*b.simple_training(3), odd_kernel("dur", 1e308)]))
    plain = b.write(tmp_path / "plain.json", b.trace(b.simple_training(3)))
    runs = [gpuscope("analyze", str(p), "--json", "--no-save", home=tmp_path) for p in (odd, plain)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    odd_report, plain_report = (json.loads(r.stdout) for r in runs)
    drop_source = [[{k: v for k, v in r.items() if k != "source"} for r in rep["ranks"]]
                   for rep in (odd_report, plain_report)]
    assert drop_source[0] == drop_source[1]
    assert odd_report["ranks"][0]["gpu_busy"] == pytest.approx(0.4)  # 400 µs of kernel in each 1 ms step
    assert "`dur` in 1 (events dropped)" in runs[0].stderr and "Traceback" not in runs[0].stderr


@pytest.mark.parametrize(("field", "value"), [(name, BIG) for name in (
    "args.correlation", "args.External id", "args.stream", "args.device", "args.bytes", "pid", "tid")]
    + [("args.blocks per SM", 10**40)])  # a float32 column
def test_an_integer_past_64_bits_costs_its_field(tmp_path: Path, chunked: bool, field: str, value: int) -> None:
    t = read_trace(b.write(tmp_path / "t.json", b.trace([*b.simple_training(2), odd_kernel(field, value)])))
    names = [t.names[i] for i in t.events.name_id.tolist()]
    assert "odd_kernel" in names and len(t.events) == 11
    (line,) = t.warnings
    assert f"`{field}` in 1 (left out)" in line


def test_stream_and_device_fit_their_32_bit_columns(tmp_path: Path) -> None:
    t = read_trace(b.write(tmp_path / "t.json", b.trace([*b.simple_training(1), odd_kernel("args.stream", 2**40)])))
    odd = t.events.name_id == t.names.index("odd_kernel")
    assert t.events.stream[odd].tolist() == [-1] and "`args.stream` in 1 (left out)" in t.warnings[0]


def test_a_device_id_at_the_top_of_its_column_costs_no_memory(tmp_path: Path) -> None:
    """Found by fuzzing a saved trace: the GPU most events ran on was counted with a bincount as long as the largest
    device id (16 GiB for 2**31 - 1)."""
    t = read_trace(b.write(tmp_path / "t.json", b.trace([*b.simple_training(2), odd_kernel("args.device", 2**31 - 1)])))
    tracemalloc.start()
    try:
        assert t.main_device == 0
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


def test_numbers_past_64_bits_or_float64_where_nothing_reads_them_cost_nothing(tmp_path: Path) -> None:
    text = json.dumps(b.trace(b.simple_training(2), junk=[1, 2]))
    text = text.replace('"junk": [1, 2]', f'"junk": [{BIG}, 1e400, -1e999]')
    text = text.replace('"args": {', f'"args": {{"unused": {BIG}, "also": 1e400, ', 1)
    t = read_trace(write_text(tmp_path / "t.json", text))
    assert len(t.events) == 10 and t.warnings == ()


def test_top_level_parts_out_of_range_are_left_out(tmp_path: Path) -> None:
    doc = b.trace(b.simple_training(2), rank=1)
    text = json.dumps(doc).replace('"totalGlobalMem": 17179869184', f'"totalGlobalMem": {BIG}')
    text = text.replace('"world_size": 2', '"world_size": 1e400')
    t = read_trace(write_text(tmp_path / "t.json", text))
    assert t.gpus == () and t.world_size is None and len(t.events) == 10
    assert any("deviceProperties" in w for w in t.warnings) and any("distributedInfo" in w for w in t.warnings)


def test_a_float_past_float64_in_an_event_costs_the_field(tmp_path: Path) -> None:
    text = json.dumps(b.trace([*b.simple_training(2), odd_kernel("args.bytes", 7)]))
    text = text.replace('"bytes": 7', '"bytes": 1e400')
    t = read_trace(write_text(tmp_path / "t.json", text))
    assert len(t.events) == 11 and "`args.bytes` in 1 (left out)" in t.warnings[0]


@pytest.mark.parametrize("where", ["top", "event"])
def test_deep_nesting_is_one_clear_line(tmp_path: Path, where: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    text = json.dumps(b.trace(b.simple_training(1)))
    if where == "top":
        text = text.replace('"traceEvents"', f'"deep": {deep}, "traceEvents"', 1)
    else:
        text = text.replace('"args": {', f'"args": {{"deep": {deep}, ', 1)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(TraceError, match="nested too deeply"):
        read_trace(path)
    line = one_clean_error_line(gpuscope("analyze", str(path), "--no-save", home=tmp_path))
    assert "nested too deeply" in line and "RecursionError" not in line


def bomb(path: Path, n_bytes: int) -> Path:
    """A gzip stream of a valid trace padded with spaces: ~1000x smaller than its JSON."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(b'{"traceEvents": [' + json.dumps(b.simple_training(1))[1:-1].encode())]
    pad = b" " * (1 << 20)
    parts += [packer.compress(pad) for _ in range(n_bytes // len(pad))]
    parts += [packer.compress(b"]}"), packer.flush()]
    path.write_bytes(b"".join(parts))
    return path


def test_a_gzip_that_inflates_past_the_cap_stops_at_the_cap(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = bomb(tmp_path / "bomb.json.gz", 64 << 20)
    assert path.stat().st_size < 200_000
    monkeypatch.setenv(ENV_MAX_TRACE_GIB, str(4 / 1024))  # 4 MiB
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match=r"inflates to more than 4 MiB of JSON.*GPUSCOPE_MAX_TRACE_GIB"):
            read_trace(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, "never more than the cap and a piece held"
    monkeypatch.setenv(ENV_MAX_TRACE_GIB, str(128 / 1024))
    assert len(read_trace(path).events) == 5  # raised, the same file reads


def test_a_plain_file_past_the_cap_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = b.write(tmp_path / "t.json", b.trace(b.simple_training(50)))
    monkeypatch.setenv(ENV_MAX_TRACE_GIB, str(1 / 1024**2))  # 1 KiB
    with pytest.raises(TraceError, match="on disk, over the limit of"):
        read_trace(path)


def test_the_cap_is_stated_and_a_bad_setting_is_one_line(tmp_path: Path) -> None:
    assert max_trace_bytes({}) == DEFAULT_MAX_TRACE_GIB * 2**30 == 2 * 2**30
    assert max_trace_bytes({ENV_MAX_TRACE_GIB: "8"}) == 8 * 2**30
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"{ENV_MAX_TRACE_GIB}" in readme and "2 GiB" in readme
    path = b.write(tmp_path / "t.json", b.trace(b.simple_training(1)))
    for bad in ("lots", "0", "-1", "nan", "inf"):
        line = one_clean_error_line(gpuscope("analyze", str(path), "--no-save", home=tmp_path,
                                             **{ENV_MAX_TRACE_GIB: bad}))
        assert line == f"gpuscope: error: {ENV_MAX_TRACE_GIB}: expected a number of GiB above 0, got {bad!r}"


def rank_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        b.write(folder / f"rank{rank}.json", b.trace(b.simple_training(2), rank=rank))
    return folder


def test_special_files_among_rank_files_are_named_and_skipped(tmp_path: Path) -> None:
    folder = rank_dir(tmp_path)
    os.mkfifo(folder / "rank2.json")
    (folder / "rank3.json.gz").symlink_to("/dev/zero")
    (folder / "rank4.json").symlink_to(tmp_path / "nowhere")
    loaded = load(folder)
    assert [t.rank for t in loaded.traces] == [0, 1] and loaded.errors == ()
    assert loaded.warnings == (f"{folder / 'rank2.json'}: a named pipe (FIFO), not a trace file: skipped",
                               f"{folder / 'rank3.json.gz'}: a character device, not a trace file: skipped",
                               f"{folder / 'rank4.json'}: a link to nothing, not a trace file: skipped")
    result = gpuscope("analyze", str(folder), "--no-save", "--json", home=tmp_path, timeout=60)
    assert result.returncode == 0 and "rank2.json: a named pipe (FIFO)" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_special_file_named_alone_is_one_line_and_never_blocks(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "trace.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    line = one_clean_error_line(gpuscope("analyze", str(path), "--no-save", home=tmp_path, timeout=60))
    assert line.endswith("not a trace file or a directory")


def test_reading_a_fifo_directly_never_waits_for_a_writer(tmp_path: Path) -> None:
    """``read_trace`` on a named pipe (say, a profiler's output path someone replaced) returns at once."""
    fifo = tmp_path / "rank0.pt.trace.json"
    os.mkfifo(fifo)
    outcome: list[Any] = []

    def read() -> None:
        try:
            read_trace(fifo)
        except TraceError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # blocked in open(): give it a writer so the thread can end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("read_trace blocked on a named pipe")
    (error,) = outcome
    assert "a named pipe (FIFO), not a trace file" in str(error)


@pytest.mark.parametrize(("where", "kept"), [("name", 9), ("unused", 10)])
def test_a_string_that_is_not_utf8_costs_its_event_at_most(tmp_path: Path, chunked: bool, where: str,
                                                           kept: int) -> None:
    """Found by benchmarks/fuzz_readers.py: a name that is not UTF-8 failed the whole file ("cannot be read:
    DecodeError") in the chunked path, and "not valid JSON" in the whole one."""
    text = json.dumps(b.trace(b.simple_training(2))).encode()
    if where == "name":
        text = text.replace(b'"aten::conv2d"', b'"aten::conv\xff2d"', 1)
    else:
        text = text.replace(b'"args": {', b'"args": {"unused": "\xff\xfe", ', 1)
    path = tmp_path / "t.json"
    path.write_bytes(text)
    t = read_trace(path)
    assert len(t.events) == kept
    assert t.warnings == (() if where == "unused" else
                          (f"{path}: 1 event had fields of the wrong type or out of range: `event` in 1 "
                           "(text not UTF-8, dropped)",))
