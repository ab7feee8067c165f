"""The benchmark's large-trace generator writes real, readable multi-rank traces of the scaled-up sample."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.trace import Kind, RankTrace
from gpuscope.traces import load, read_trace
from tests.conftest import SAMPLES, load_benchmark

RESNET = SAMPLES / "resnet50_dataloader_bound"
DLRM_RANK0 = next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz"))


def _generator() -> ModuleType:
    return load_benchmark("make_large_trace")


mlt = _generator()


@pytest.fixture(scope="module")
def resnet_x2(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two ranks, each two copies of the 6-step resnet50 sample, gzipped."""
    paths: list[Path] = mlt.make_large_trace(tmp_path_factory.mktemp("large"), sample_path=RESNET, ranks=2,
                                             copies=2, gzip_level=1)
    return paths


@pytest.fixture(scope="module")
def sample() -> RankTrace:
    return read_trace(next(RESNET.glob("*.json.gz")))


@pytest.fixture(scope="module")
def big(resnet_x2: list[Path]) -> RankTrace:
    return read_trace(resnet_x2[1])


def _kind_counts(trace: RankTrace) -> np.ndarray:
    return np.bincount(trace.events.kind, minlength=len(Kind))


def test_ranks_are_distinct_files_with_distributed_info(resnet_x2: list[Path]) -> None:
    assert [p.name for p in resnet_x2] == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    loaded = load(resnet_x2[0].parent)
    assert loaded.errors == ()
    assert [(t.rank, t.world_size, t.backend) for t in loaded.traces] == [(0, 2, "nccl"), (1, 2, "nccl")]


def test_every_event_is_repeated_once_per_copy(sample: RankTrace, big: RankTrace) -> None:
    timed = np.arange(len(Kind)) != Kind.OTHER  # OTHER holds the whole-recording "PyTorch Profiler" span, kept once
    assert (_kind_counts(big)[timed] == 2 * _kind_counts(sample)[timed]).all()
    assert _kind_counts(sample)[Kind.OTHER] == _kind_counts(big)[Kind.OTHER] == 1
    assert _kind_counts(big)[Kind.STEP] == 12 and _kind_counts(big)[Kind.KERNEL] == 2 * 8772
    assert len(big.memory.ts_ns) == 2 * len(sample.memory.ts_ns)
    steps = sorted(n for n in big.names if n.startswith("ProfilerStep#"))
    assert len(steps) == 12  # the copy's steps are renumbered, not repeated


def test_copies_get_fresh_ids_so_kernels_still_find_their_launches(big: RankTrace) -> None:
    e = big.events
    kernel_corr = e.correlation[e.kind == Kind.KERNEL]
    assert len(np.unique(kernel_corr)) == len(kernel_corr)
    assert np.isin(kernel_corr, e.correlation[e.kind == Kind.RUNTIME]).all()
    ops = e.external_id[e.kind == Kind.CPU_OP]
    assert len(np.unique(ops)) == len(ops)


def test_the_second_copy_follows_the_first_in_time(big: RankTrace) -> None:
    span_ns = int(mlt.read_sample(RESNET).span_us * 1000)
    events = big.events
    ts = np.sort(events.ts_ns[events.kind != Kind.OTHER])  # less the one whole-recording span
    half = len(ts) // 2
    assert ts[half - 1] <= ts[half]
    # gpuscope keeps ns as float64 µs x 1000: at 2021 epoch times that is exact only to a few hundred ns.
    assert np.abs(ts[half:] - ts[:half] - span_ns).max() <= 1024


def test_analysis_sees_twelve_steps_of_the_same_job(sample: RankTrace, big: RankTrace) -> None:
    one = analyze_rank(sample)
    two = analyze_rank(big)
    assert one.steps == 6 and two.steps == 12
    assert two.step_time_us == pytest.approx(one.step_time_us, rel=0.02)
    assert two.gpu_busy == pytest.approx(one.gpu_busy, abs=0.02)
    assert two.step_breakdown_us.dataloader == pytest.approx(one.step_breakdown_us.dataloader, rel=0.05)


def test_plain_json_is_valid_json_with_the_rank_where_hta_looks(tmp_path: Path) -> None:
    paths = mlt.make_large_trace(tmp_path, sample_path=DLRM_RANK0, ranks=3, copies=3)
    text = paths[2].read_bytes()
    assert text.endswith(b"\n]}")  # as the sample ends
    doc = json.loads(text)
    assert doc["distributedInfo"] == {"backend": "nccl", "rank": 2, "world_size": 3}
    one = json.loads(gzip.decompress(DLRM_RANK0.read_bytes()))
    assert len(doc["traceEvents"]) == len(one["traceEvents"]) + 2 * sum(
        1 for e in one["traceEvents"] if e.get("ph") != "M" and e.get("cat") != "Trace" and e.get("s") != "g")
    # Holistic Trace Analysis reads a file's rank line by line with this pattern, before parsing the JSON.
    with paths[2].open() as f:
        ranks = [m.group(1) for line in f if (m := re.search(r'"rank":\s+(\d+)', line))]
    assert ranks[:1] == ["2"]


def test_size_target_picks_the_number_of_copies(tmp_path: Path) -> None:
    sample = mlt.read_sample(DLRM_RANK0)
    one = mlt.write_ranks(sample, mlt.repeat_events(sample, 1), tmp_path / "one", ranks=1)[0].stat().st_size
    assert mlt.copies_for(sample, 1) == 1
    assert mlt.copies_for(sample, 4 * one) == 4
    four = mlt.make_large_trace(tmp_path / "four", sample_path=DLRM_RANK0, ranks=1, target_bytes=4 * one)[0]
    assert four.stat().st_size == pytest.approx(4 * one, rel=0.05)


@pytest.mark.parametrize("level", [None, 1])
def test_info_last_files_hold_the_same_events_and_their_own_rank(tmp_path: Path, level: int | None) -> None:
    usual = mlt.make_large_trace(tmp_path / "usual", sample_path=DLRM_RANK0, ranks=3, copies=2, gzip_level=level)
    last = mlt.make_large_trace(tmp_path / "last", sample_path=DLRM_RANK0, ranks=3, copies=2, gzip_level=level,
                                info_last=True)
    for a, b in zip(usual, last):
        text_a, text_b = (gzip.decompress(p.read_bytes()) if level else p.read_bytes() for p in (a, b))
        doc_a, doc_b = json.loads(text_a), json.loads(text_b)
        assert doc_a == doc_b  # the same document, keys in another order
        assert list(doc_b)[-1] == "distributedInfo"
    assert [t.rank for t in load(tmp_path / "last").traces] == [0, 1, 2]
    if level:  # each file one gzip member whose trailer holds the whole size, as the profiler writes it
        for p in last:
            data = p.read_bytes()
            assert int.from_bytes(data[-4:], "little") == len(gzip.decompress(data))
            assert zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data) == gzip.decompress(data)
