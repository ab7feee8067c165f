"""Real Nsight Systems exports (sample_traces/nsys/) against figures computed here from their own tables with plain
SQL and a plain interval merge, never from gpuscope's output:

- ``ddp53_profile.sqlite``: DDP on 2x GeForce RTX 3090 (nsys 2026.3), NCCL all-reduce and broadcast;
- ``nvfuser_matmul_h200.sqlite``: one process on one H200 (nsys 2024.6), an nvFuser C++ test, no PyTorch.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

import gpuscope
from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.traces.nsys.exports import training_job

DDP = SAMPLES / "nsys" / "ddp53_profile.sqlite"
NVFUSER = SAMPLES / "nsys" / "nvfuser_matmul_h200.sqlite"
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
BUSY_TOLERANCE = 0.02


def rows(path: Path, sql: str) -> list[tuple[int, ...]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    start = 0
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += (end - start) if end is not None else 0
            start, end = s, e
        else:
            end = max(end, e)
    return total + ((end - start) if end is not None else 0)


def busy_by_gpu(path: Path) -> dict[tuple[int, int], int]:
    """(pid, device) -> ns of the union of its kernels, copies and memsets."""
    found: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for table in GPU_TABLES:
        for gpid, device, start, end in rows(path, f"SELECT globalPid, deviceId, start, end FROM {table}"):
            found[((gpid >> 24) & 0xFFFFFF, device)].append((start, end))
    return {k: union_ns(v) for k, v in found.items()}


def nccl_ns(path: Path) -> dict[tuple[int, int], int]:
    """(pid, device) -> ns of its NCCL kernels."""
    out = rows(path, "SELECT (k.globalPid >> 24) & 16777215, k.deviceId, sum(k.end - k.start) "
                     "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                     "WHERE s.value LIKE 'nccl%Kernel%' GROUP BY 1, 2")
    return {(p, d): ns for p, d, ns in out}


@cache
def analysed(path: Path) -> Report:
    return gpuscope.analyze(path, save=False).analysis


def test_ddp_two_ranks_each_on_its_named_rtx_3090(gpuscope_home: Path) -> None:
    report = analysed(DDP)
    assert [r.rank for r in report.ranks] == [0, 1]
    assert [r.device for r in report.ranks] == ["NVIDIA GeForce RTX 3090"] * 2
    assert [g.model for g in report.run.gpus] == ["NVIDIA GeForce RTX 3090"] * 2
    # NCCL's communicator init says which process is which rank, on which CUDA device
    claimed = rows(DDP, "SELECT (globalTid >> 24) & 16777215, json_extract(jsonText, '$.Rank'), "
                        "json_extract(jsonText, '$.\"CUDA device\"') FROM NVTX_EVENTS "
                        "WHERE jsonText LIKE '%No. of ranks%' GROUP BY 1")
    assert sorted((rank, device) for _, rank, device in claimed) == [(0, 0), (1, 1)]


@pytest.mark.parametrize("path", [DDP, NVFUSER], ids=["ddp", "nvfuser"])
def test_each_gpus_busy_time_is_the_union_of_its_work(path: Path, gpuscope_home: Path) -> None:
    report = analysed(path)
    busy = busy_by_gpu(path)
    assert len(report.ranks) == len(busy)
    for rank, (_, want_ns) in zip(report.ranks, sorted(busy.items(), key=lambda kv: (kv[0][1], kv[0][0]))):
        t = rank.temporal
        assert t is not None
        assert (t.compute_us + t.non_compute_us) * 1000 == pytest.approx(want_ns, rel=BUSY_TOLERANCE)
        assert rank.gpu_busy * rank.steady_window_us * 1000 <= want_ns * (1 + 1e-9)  # the steady part of it


def test_ddp_nccl_time_is_communication(gpuscope_home: Path) -> None:
    report = analysed(DDP)
    want = nccl_ns(DDP)
    for rank, ((pid, device), ns) in zip(report.ranks, sorted(want.items(), key=lambda kv: kv[0][1])):
        assert rank.communication is not None
        assert rank.communication.total_us * 1000 == pytest.approx(ns, rel=BUSY_TOLERANCE)
        assert rank.communication.kernels == rows(
            DDP, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                 f"WHERE s.value LIKE 'nccl%Kernel%' AND (k.globalPid >> 24) & 16777215 = {pid} "
                 f"AND k.deviceId = {device}")[0][0]
        # the collectives' bytes: NCCL's own message sizes
        sizes = dict(rows(DDP, "SELECT coalesce(n.text, s.value), sum(json_extract(n.jsonText, "
                               "'$.\"Message size [bytes]\"')) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON "
                               f"s.id = n.textId WHERE (n.globalTid >> 24) & 16777215 = {pid} "
                               "AND n.jsonText LIKE '%Message size%' GROUP BY 1"))
        by_op: dict[str, int] = defaultdict(int)
        for c in rank.communication.collectives:
            by_op[c.op] += c.bytes
        assert by_op == {"all_reduce": sizes["ncclAllReduce"], "broadcast": sizes["ncclBroadcast"]}
    assert report.verdict.primary in ("host_overhead", "communication")
    assert {"host_overhead", "communication"} == {report.verdict.primary, *report.verdict.secondary} & {
        "host_overhead", "communication"}


def test_ddp_cost_is_priced_or_says_why_not(gpuscope_home: Path) -> None:
    cost = analysed(DDP).cost
    assert cost is not None and cost.gpu_count == 2
    if cost.usd_per_gpu_hour is None:  # the catalog has no RTX 3090: n/a, with the reason
        assert cost.total_usd is None and cost.note is not None and "NVIDIA GeForce RTX 3090" in cost.note
    else:
        assert cost.total_usd == pytest.approx(cost.gpu_hours * cost.usd_per_gpu_hour)


def test_nvfuser_one_h200_priced_and_host_bound(gpuscope_home: Path) -> None:
    report = analysed(NVFUSER)
    ((pid, device),) = busy_by_gpu(NVFUSER)
    (rank,) = report.ranks
    assert (rank.rank, rank.device) == (0, "NVIDIA H200")
    assert report.verdict.primary == "host_overhead"
    cost = report.cost
    assert cost is not None and cost.usd_per_gpu_hour is not None and cost.total_usd is not None
    assert cost.total_usd == pytest.approx(cost.gpu_hours * cost.usd_per_gpu_hour)
    assert report.efficiency is not None and report.efficiency.mfu is None and report.efficiency.mfu_note


def test_without_steps_the_window_is_the_whole_capture(tmp_path: Path, gpuscope_home: Path) -> None:
    """NVTX ranges that cover a part of the capture only do not make the window: every GPU event counts."""
    b = training_job(ranks=1, steps=3, step_names="train_step", nccl=False)
    b.launch(100, 0, 60_000_000, 4_000_000, "after_every_range")  # launched and run after the last NVTX range
    path = b.write(tmp_path / "job.sqlite")
    (rank,) = gpuscope.analyze(path, save=False).analysis.ranks
    t = rank.temporal
    assert t is not None and rank.steps == 0
    assert (t.compute_us + t.non_compute_us) * 1000 == pytest.approx(busy_by_gpu(path)[(100, 0)], rel=1e-9)
    ends = rows(path, "SELECT min(start), max(end) FROM (SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                      "SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL SELECT start, end FROM NVTX_EVENTS "
                      "WHERE end IS NOT NULL UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)")
    assert rank.window_us * 1000 == pytest.approx(ends[0][1] - ends[0][0], rel=1e-9)
