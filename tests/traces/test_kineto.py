"""The Kineto reader: every sample, schema variants built in code, and what it refuses."""

from __future__ import annotations

import gzip
import json
from operator import attrgetter
from pathlib import Path

import numpy as np
import pytest

from gpuscope.model.trace import Kind
from gpuscope.traces import TraceError, load, read_trace
from tests import builders as b
from tests.conftest import SAMPLES


def test_reads_v100_sample_with_device_properties_and_memory() -> None:
    t = read_trace(next((SAMPLES / "resnet50_dataloader_bound").glob("*.json.gz")))
    kinds = np.bincount(t.events.kind, minlength=len(Kind))
    assert kinds[Kind.KERNEL] == 8772 and kinds[Kind.MEMCPY] == 12 and kinds[Kind.MEMSET] == 312
    assert kinds[Kind.STEP] == 6
    assert t.gpus[0].name == "Tesla V100-DGXS-32GB" and t.gpus[0].memory_bytes == 34084028416
    assert t.gpus[0].compute_capability == "7.0" and t.gpus[0].sm_count == 80
    assert len(t.memory.ts_ns) == 12838
    # GPU events all carry their stream; host events none.
    gpu = t.events.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    assert (t.events.stream[gpu] >= 0).all() and (t.events.stream[~gpu] == -1).all()
    assert (np.diff(t.events.ts_ns) >= 0).all()


def test_old_schema_capitalised_categories_and_stream_names() -> None:
    t = read_trace(next((SAMPLES / "resnet50_old_schema").glob("*.json.gz")))
    kinds = np.bincount(t.events.kind, minlength=len(Kind))
    assert kinds[Kind.KERNEL] == 9564 and kinds[Kind.RUNTIME] == 10920 and kinds[Kind.CPU_OP] > 0
    assert t.gpus == ()  # no deviceProperties in 2021-02 traces
    assert (t.events.stream[t.events.kind == Kind.KERNEL] == 7).all()


def test_distributed_info_gives_the_rank() -> None:
    loaded = load(SAMPLES / "dlrm_8rank")
    assert [t.rank for t in loaded.traces] == list(range(8))
    assert {t.world_size for t in loaded.traces} == {8} and loaded.traces[0].backend == "nccl"


def test_fractional_microseconds_are_kept_to_the_nanosecond(tmp_path: Path) -> None:
    events = [b.kernel("k", 1_700_000_000.125, 2.5, 1), b.launch(1_700_000_000.0, 0.1, 1)]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events, displayTimeUnit="ns")))
    k = t.events.kind == Kind.KERNEL
    assert t.events.ts_ns[k][0] == 1_700_000_000_125 and t.events.dur_ns[k][0] == 2500


def test_bare_event_array_without_profiler_step_or_device_properties(tmp_path: Path) -> None:
    events = [b.cpu_op("aten::mm", 0, 100), b.launch(10, 5, 1), b.kernel("Cijk_Ailk_Bljk_HHS_BH_MT64x64", 20, 50, 1)]
    t = read_trace(b.write(tmp_path / "rocm.json", events))
    assert t.gpus == () and t.world_size is None
    assert (t.events.kind == Kind.KERNEL).sum() == 1 and (t.events.kind == Kind.STEP).sum() == 0


def test_cpu_only_trace(tmp_path: Path) -> None:
    t = read_trace(b.write(tmp_path / "cpu.json", b.trace([b.step(1, 0, 100), b.cpu_op("aten::add", 10, 20)],
                                                          device_memory=None)))
    assert not t.events.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET).any()


def test_rank_from_file_name_when_the_trace_does_not_say(tmp_path: Path) -> None:
    t = read_trace(b.write(tmp_path / "rank3.pt.trace.json", b.trace(b.simple_training(1))))
    assert t.rank == 3


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"this is not json", "not valid JSON"),
        (b'{"schemaVersion": 1}', "no `traceEvents`"),
        (b'{"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]}', "wrong type"),
        (b'{"traceEvents": 7}', "wrong type"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}', "not valid JSON"),
    ],
)
def test_bad_files_raise_one_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert problem in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": []}' * 1000)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="gzip stream is corrupt or truncated"):
        read_trace(path)


def test_directory_with_a_bad_rank_reads_the_others(tmp_path: Path) -> None:
    b.write(tmp_path / "rank0.json", b.trace(b.simple_training(), rank=0))
    b.write(tmp_path / "rank1.json.gz", b.trace(b.simple_training(), rank=1), gz=True)
    (tmp_path / "rank2.json").write_text("{not json")
    loaded = load(tmp_path)
    assert [t.rank for t in loaded.traces] == [0, 1]
    assert len(loaded.errors) == 1 and loaded.errors[0].path.endswith("rank2.json")


def test_a_bad_rank_read_in_a_worker_process_is_skipped_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The error comes back from the worker pickled: it must arrive whole, as the serial read reports it.
    b.write(tmp_path / "rank0.json", b.trace(b.simple_training(), rank=0))
    (tmp_path / "rank1.json").write_text("{not json")
    serial = load(tmp_path, jobs=1)
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    parallel = load(tmp_path, jobs=2)
    assert [t.rank for t in parallel.traces] == [0]
    assert [(e.path, e.problem) for e in parallel.errors] == [(e.path, e.problem) for e in serial.errors]
    assert parallel.errors[0].path.endswith("rank1.json") and "not valid JSON" in parallel.errors[0].problem


def test_parallel_and_serial_reads_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(3):
        b.write(tmp_path / f"rank{r}.json", b.trace(b.simple_training(4), rank=r))
    serial = load(tmp_path, jobs=1)
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    parallel = load(tmp_path, jobs=2)
    for s, p in zip(serial.traces, parallel.traces):
        assert s.rank == p.rank and s.names == p.names
        assert np.array_equal(s.events.ts_ns, p.events.ts_ns) and np.array_equal(s.events.kind, p.events.kind)



def test_gzipped_ranks_are_sized_by_their_json_when_choosing_workers(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiler traces shrink 10 to 30 times in gzip: a folder of small .gz files can hold hundreds of MB of JSON,
    which worker processes read faster than this process alone."""
    import gzip

    from gpuscope.traces import loader
    texts = [json.dumps(b.trace(b.simple_training(4), rank=r)).encode() for r in (0, 1)]
    (tmp_path / "rank0.json.gz").write_bytes(gzip.compress(texts[0]))
    (tmp_path / "rank1.json").write_bytes(texts[1])
    sources = loader.find_sources(tmp_path)
    assert sorted(loader._json_bytes(s) for s in sources) == sorted(len(t) for t in texts)
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", sum(len(t) for t in texts) - 1)
    pools: list[int] = []
    real_pool = loader.worker_pool
    monkeypatch.setattr(loader, "worker_pool", lambda workers: pools.append(workers) or real_pool(workers))
    assert [t.rank for t in load(tmp_path, jobs=2).traces] == [0, 1]
    assert pools == [2]

def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load(tmp_path / "nope")
    with pytest.raises(TraceError, match="no trace files"):
        load(tmp_path)


def test_epoch_microseconds_convert_to_nanoseconds_exactly(tmp_path: Path) -> None:
    events = [b.kernel("k", 1_623_142_623_460_111, 3, 1), b.launch(1_623_142_623_460_100, 1.5, 1)]
    t = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    assert sorted(t.events.ts_ns.tolist()) == [1_623_142_623_460_100_000, 1_623_142_623_460_111_000]


def test_chunked_decoding_gives_the_same_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    path = next((SAMPLES / "resnet50_workers4").glob("*.json.gz"))
    whole = read_trace(path)
    monkeypatch.setattr("gpuscope.traces.kineto.CHUNKED_MIN_BYTES", 0)
    monkeypatch.setattr("gpuscope.traces.split.CHUNK_EVENTS", 7_777)
    chunked = read_trace(path)
    assert chunked.names == whole.names and chunked.gpus == whole.gpus
    for field in ("ts_ns", "dur_ns", "kind", "name_id", "tid", "stream", "correlation", "external_id", "bytes"):
        assert np.array_equal(getattr(chunked.events, field), getattr(whole.events, field)), field
    assert np.array_equal(chunked.memory.total_allocated_bytes, whole.memory.total_allocated_bytes)


def test_chunked_decoding_drops_bad_events_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpuscope.traces.kineto.CHUNKED_MIN_BYTES", 0)
    path = b.write(tmp_path / "t.json", b.trace([b.cpu_op("a", 0, 1), {"ph": "X", "ts": "late"}]))
    t = read_trace(path)
    assert t.names == ("a",) and "`ts` in 1 (events dropped)" in t.warnings[0]


def test_per_rank_work_runs_where_each_rank_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.analyzers.trace.rank import analyze_rank

    for r in range(3):
        b.write(tmp_path / f"rank{r}.json", b.trace(b.simple_training(r + 2), rank=r))
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    loaded = load(tmp_path, jobs=2, per_rank=analyze_rank)
    assert list(loaded.per_rank) == [analyze_rank(read_trace(tmp_path / f"rank{r}.json")) for r in range(3)]
    assert [r.steps for r in loaded.per_rank] == [2, 3, 4]
    assert loaded.traces == ()  # only what per_rank returned came back: no rank's events
    assert [(f.rank, Path(f.source).name) for f in loaded.ranks] == [(r, f"rank{r}.json") for r in range(3)]


def test_files_that_nothing_tells_apart_stop_the_read(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):  # neither says its rank; one process id, one GPU
        b.write(tmp_path / name, b.trace(b.simple_training()))
    with pytest.raises(TraceError, match=r"a\.json and b\.json both say no rank, and nothing in them"):
        load(tmp_path, per_rank=attrgetter("rank"))


def test_per_rank_results_read_under_one_number_are_analysed_under_the_new_one(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.analyzers.trace.rank import analyze_rank

    for name, pid in (("a.json", 100), ("b.json", 200)):  # neither says its rank; their processes tell them apart
        events = b.simple_training()
        for e in events:
            if e["cat"] != "kernel":
                e["pid"] = pid
        b.write(tmp_path / name, b.trace(events))
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    loaded = load(tmp_path, jobs=2, per_rank=analyze_rank)
    assert [f.rank for f in loaded.ranks] == [r.rank for r in loaded.per_rank] == [0, 1]
    assert [Path(f.source).name for f in loaded.ranks] == ["a.json", "b.json"] and loaded.traces == ()


def test_kind_and_name_masks_select_what_isin_and_unique_would() -> None:
    t = read_trace(next((SAMPLES / "resnet50_workers4").glob("*.json.gz")))
    for kinds in ((), (Kind.KERNEL,), (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET), (Kind.CPU_OP, Kind.STEP)):
        assert np.array_equal(t.events.mask(*kinds), np.isin(t.events.kind, np.asarray(kinds, dtype=np.uint8)))
    names = np.asarray(t.names, dtype=object)[t.events.name_id]
    is_conv = np.array(["conv" in n for n in names]) & (t.events.kind == Kind.CPU_OP)
    assert np.array_equal(t.name_mask(lambda n: "conv" in n, Kind.CPU_OP), is_conv) and is_conv.any()
