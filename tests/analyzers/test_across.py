"""Collectives matched across ranks and the stragglers they show, on multi-rank jobs built in code: each rank's
steps, lead-ins and collectives are known by construction, so who is late, by how much and why is too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import gpuscope
from gpuscope.analyzers.across.stragglers import binomial_tail
from gpuscope.model.report import Report
from gpuscope.store.tracefile import load_trace, save_trace
from gpuscope.traces import read_trace
from tests import builders as b

EPOCH_US = 1_790_000_000_000_000.0
"""An epoch time (2026) in µs: traces that start here keep epoch clocks."""
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"

Lead = Callable[[int, int], tuple[float, float]]
"""(rank, step) -> (DataLoader µs, compute kernel µs) before the step's collective."""


def job(tmp_path: Path, lead: Lead, *, ranks: int = 4, steps: int = 12, t0_us: float = EPOCH_US,
        hosts: Callable[[int], str | None] = lambda r: "node0", shift_us: Callable[[int], float] = lambda r: 0.0,
        end_lag_us: Callable[[int], float] = lambda r: 0.0, seq: bool = False,
        models: Callable[[int], str] = lambda r: "NVIDIA H100 80GB HBM3",
        drop: Callable[[int, int], bool] = lambda r, i: False, per_step: int = 1,
        gap_us: Callable[[int, int, int], float] = lambda r, i, k: 0.0) -> Path:
    """A ranks x steps training loop: each step a DataLoader wait, one compute kernel, then ``per_step``
    all_reduces, each ending for every rank 100 µs after the last one reaches it (plus ``end_lag_us(rank)``: a rank
    let go later); before the k-th all_reduce of step i rank r spends ``gap_us(r, i, k)`` outside any profiled op;
    a rank's next step starts where its last all_reduce ends. ``shift_us`` moves a rank's clock; ``seq`` records
    the process group and sequence number on each collective; ``drop`` leaves a rank's collectives of a step out
    of its trace (a window that starts late)."""
    folder = tmp_path / "job"
    folder.mkdir(parents=True)
    releases = [t0_us] * ranks
    for_rank: list[list[b.Event]] = [[] for _ in range(ranks)]
    ids = per_step + 1
    for i in range(steps):
        begins = list(releases)
        cursor = [releases[r] + sum(lead(r, i)) for r in range(ranks)]
        for r in range(ranks):
            dl, compute = lead(r, i)
            if dl:
                for_rank[r].append(b.cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                                            begins[r], dl))
            for_rank[r].append(b.kernel(GEMM, begins[r] + dl, compute, 10_000 * r + ids * i, stream=7))
        for k in range(per_step):
            arrivals = [cursor[r] + gap_us(r, i, k) for r in range(ranks)]
            end = max(arrivals) + 100.0
            for r in range(ranks):
                cursor[r] = end + end_lag_us(r)
                if drop(r, i):
                    continue
                kernel = b.kernel(ALLREDUCE, arrivals[r], cursor[r] - arrivals[r], 10_000 * r + ids * i + 1 + k,
                                  stream=20)
                if seq:
                    kernel["args"].update({"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
                                           "Out msg nelems": 1024, "Group size": ranks, "Process Group Name": "0",
                                           "Seq": i * per_step + k + 1})
                for_rank[r].append(kernel)
        for r in range(ranks):
            for_rank[r].append(b.step(i, begins[r], cursor[r] - begins[r]))
            releases[r] = cursor[r]
    for r, events in enumerate(for_rank):
        for e in events:
            e["ts"] += shift_us(r)
        doc = b.trace(events, rank=r)
        doc["distributedInfo"]["world_size"] = ranks
        doc["deviceProperties"][0]["name"] = models(r)
        host = hosts(r)
        if host is not None:
            doc["host_name"] = host
        b.write(folder / f"rank{r}.json", doc)
    return folder


def analysed(folder: Path, **options: float) -> Report:
    return gpuscope.analyze(folder, **options)  # type: ignore[arg-type]


def test_a_rank_late_from_its_data_loading_is_the_straggler(tmp_path: Path) -> None:
    late_us = 3_000.0
    report = analysed(job(tmp_path, lambda r, i: (late_us if r == 2 else 200.0, 1_000.0)), usd_per_gpu_hour=3.0)
    (s,) = report.stragglers
    assert s.rank == 2 and s.last_in == s.collectives == 12 and s.late_share == 1.0
    # Each other rank reaches the all_reduce late_us - 200 µs before rank 2, by construction.
    assert s.wait_caused_us == pytest.approx(late_us - 200.0, abs=1.0)
    assert s.cause_part == "dataloader" and s.cause_us == pytest.approx(late_us - 200.0, abs=1.0)
    assert "data loading" in s.cause
    facts = report.analysis.facts
    assert facts is not None and facts.step_time_us is not None
    assert s.score == pytest.approx(s.wait_caused_us / facts.step_time_us)
    # The three others' waiting GPU time over the 12 steps, priced at $3/GPU-hour.
    assert s.usd == pytest.approx(3 * (late_us - 200.0) * 12 / 3.6e9 * 3.0, rel=1e-3)
    assert s.p_value == pytest.approx(0.25 ** 12)
    a = report.arrivals
    assert a is not None and a.matched == 12 and a.where == "gpu" and a.matched_by == "order" and a.clock == "shared"
    assert report.verdict.primary == "communication" and report.verdict.summary.startswith("Rank 2 holds the job back")


def test_a_slower_gpu_is_named(tmp_path: Path) -> None:
    folder = job(tmp_path, lambda r, i: (200.0, 4_000.0 if r == 1 else 1_000.0),
                 models=lambda r: "NVIDIA A100-SXM4-80GB" if r == 1 else "NVIDIA H100 80GB HBM3")
    (s,) = analysed(folder).stragglers
    assert s.rank == 1 and s.cause_part == "kernel"
    assert s.cause.startswith("a slower GPU (NVIDIA A100-SXM4-80GB; the others have NVIDIA H100 80GB HBM3)")


def test_clocks_of_other_hosts_are_aligned_from_collective_ends(tmp_path: Path) -> None:
    lead: Lead = lambda r, i: (2_500.0 if r == 3 else 200.0, 1_000.0)  # noqa: E731
    same = analysed(job(tmp_path / "a", lead))
    shifted = analysed(job(tmp_path / "b", lead, hosts=lambda r: f"node{r}", shift_us=lambda r: 5e6 * r))
    a = shifted.arrivals
    assert a is not None and a.clock == "estimated"
    offsets = {r.rank: r.offset_us for r in a.ranks}
    for r in range(4):  # relative to one another: rank r's clock runs 5 s ahead of rank r - 1's
        assert offsets[r] - offsets[0] == pytest.approx(5e6 * r, abs=1.0)  # type: ignore[operator]
    assert [(s.rank, round(s.wait_caused_us)) for s in shifted.stragglers] == \
        [(s.rank, round(s.wait_caused_us)) for s in same.stragglers] == [(3, 2300)]


def test_ranks_let_go_one_after_another_are_not_stragglers(tmp_path: Path) -> None:
    """A ring lets its ranks go one after another: the last one let go reaches the next collective last with no
    more work done, every time. It is last at every collective, and no straggler."""
    report = analysed(job(tmp_path, lambda r, i: (200.0, 1_000.0), end_lag_us=lambda r: 400.0 * r))
    a = report.arrivals
    assert a is not None and {r.rank: r.last_share for r in a.ranks}[3] == pytest.approx(11 / 12)
    assert report.stragglers == ()


def test_a_rank_late_by_chance_is_not_a_straggler(tmp_path: Path) -> None:
    report = analysed(job(tmp_path, lambda r, i: (2_000.0 if r == i % 4 else 200.0, 1_000.0)))
    a = report.arrivals
    assert a is not None and sorted(r.last_share for r in a.ranks) == [0.25] * 4
    assert report.stragglers == ()


def test_sequence_numbers_match_across_a_window_that_starts_late(tmp_path: Path) -> None:
    """Rank 1's window misses the first all_reduce: by order, its k-th would meet the others' (k+1)-th; by the
    sequence numbers the trace records, each meets its own."""
    folder = job(tmp_path, lambda r, i: (2_000.0 if r == 3 else 200.0, 1_000.0), seq=True, steps=6,
                 drop=lambda r, i: r == 1 and i == 0)
    report = analysed(folder)
    a = report.arrivals
    assert a is not None and a.matched_by == "seq" and a.matched == 6
    assert [(c.group, c.seq, c.ranks) for c in a.collectives][:2] == [("0", 1, 3), ("0", 2, 4)]
    (s,) = report.stragglers
    # Each other rank waits 1,800 µs at each all_reduce it is in: rank 1 is in 5 of the 6.
    assert s.rank == 3 and s.wait_caused_us == pytest.approx((6 + 6 + 5) * 1_800.0 / 3 / 6, abs=1.0)


def test_no_straggler_in_a_balanced_job_and_none_for_one_rank(tmp_path: Path) -> None:
    balanced = analysed(job(tmp_path / "a", lambda r, i: (200.0, 1_000.0)))
    assert balanced.stragglers == () and balanced.arrivals is not None
    one = analysed(job(tmp_path / "b", lambda r, i: (200.0, 1_000.0), ranks=1))
    assert one.stragglers == () and one.arrivals is None


def test_the_collectives_metadata_and_host_survive_the_store(tmp_path: Path) -> None:
    folder = job(tmp_path, lambda r, i: (200.0, 1_000.0), seq=True, steps=2)
    trace = read_trace(folder / "rank0.json")
    assert trace.host_name == "node0"
    assert trace.collectives.group == ("0", "0") and trace.collectives.seq.tolist() == [1, 2]
    save_trace(tmp_path / "rank0.npz", trace)
    again = load_trace(tmp_path / "rank0.npz")
    assert again.host_name == "node0" and again.collectives.group == ("0", "0")
    assert np.array_equal(again.collectives.seq, trace.collectives.seq)


@pytest.mark.parametrize(("k", "n", "p"), [(0, 5, 0.3), (3, 5, 0.25), (5, 5, 0.5), (6, 5, 0.5), (7, 40, 0.125)])
def test_binomial_tail_against_the_sum_of_its_terms(k: int, n: int, p: float) -> None:
    from math import comb

    expected = sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
    assert binomial_tail(k, n, p) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_a_rank_late_before_one_collective_in_four_is_the_straggler(tmp_path: Path) -> None:
    """Rank 1 spends 30 ms before the first of four all_reduces each step: it is last at a quarter of the
    collectives (as chance would have it), but the others wait 30 ms for it every step."""
    late_us = 30_000.0
    folder = job(tmp_path, lambda r, i: (200.0, 1_000.0), per_step=4,
                 gap_us=lambda r, i, k: late_us if r == 1 and k == 0 else 0.0)
    report = analysed(folder)
    (s,) = report.stragglers
    assert s.rank == 1 and (s.last_in, s.collectives) == (12, 48)
    assert s.wait_caused_us == pytest.approx(late_us, abs=1.0)
    assert (s.consistent_in, s.consistency_units, s.consistency_unit) == (12, 12, "step")
    assert s.p_value == pytest.approx(0.25 ** 12) and s.cause_part == "other"
    a = report.arrivals
    assert a is not None and len(a.worst) == 8
    top = a.worst[0]
    assert (top.op, top.nth, top.last_rank, top.waiting_ranks) == ("all_reduce", 1, 1, 3)
    assert sorted(w.rank for w in top.waits) == [0, 2, 3]
    assert all(w.wait_us == pytest.approx(late_us, abs=1.0) for w in top.waits)
    assert top.wait_caused_us == pytest.approx(late_us, abs=1.0)
    assert all(c.wait_caused_us == 0.0 for c in a.collectives if c.nth != 1)
    assert report.verdict.summary.startswith("Rank 1 holds the job back")


def test_the_same_wait_spread_over_every_collective_is_the_same_straggler(tmp_path: Path) -> None:
    folder = job(tmp_path, lambda r, i: (200.0, 1_000.0), per_step=4,
                 gap_us=lambda r, i, k: 7_500.0 if r == 1 else 0.0)
    (s,) = analysed(folder).stragglers
    assert s.rank == 1 and s.last_in == s.collectives == 48
    assert s.wait_caused_us == pytest.approx(30_000.0, abs=1.0)


def test_a_clock_days_off_under_one_host_name_is_estimated(tmp_path: Path) -> None:
    """Every trace names the same host, but rank 1's clock is 2 days ahead: its collectives' ends lie 2 days from
    the others', more than one clock allows, so the offsets are estimated and the straggler is still rank 2."""
    lead: Lead = lambda r, i: (2_500.0 if r == 2 else 200.0, 1_000.0)  # noqa: E731
    same = analysed(job(tmp_path / "a", lead))
    shifted = analysed(job(tmp_path / "b", lead, shift_us=lambda r: 2 * 86_400e6 if r == 1 else 0.0))
    a = shifted.arrivals
    assert a is not None and a.clock == "estimated" and "one host" in a.clock_note
    offsets = {r.rank: r.offset_us for r in a.ranks}
    assert offsets[1] - offsets[0] == pytest.approx(2 * 86_400e6, abs=1.0)  # type: ignore[operator]
    assert same.arrivals is not None and same.arrivals.clock == "shared" and same.arrivals.clock_note == ""
    assert [(s.rank, round(s.wait_caused_us)) for s in shifted.stragglers] == \
        [(s.rank, round(s.wait_caused_us)) for s in same.stragglers] == [(2, 2300)]


def test_one_step_is_tested_over_its_collectives(tmp_path: Path) -> None:
    """One step cannot tell a straggler from chance: the collectives are the units instead."""
    folder = job(tmp_path, lambda r, i: (200.0, 1_000.0), steps=1, per_step=8,
                 gap_us=lambda r, i, k: 2_000.0 if r == 3 else 0.0)
    (s,) = analysed(folder).stragglers
    assert s.rank == 3 and (s.consistent_in, s.consistency_units, s.consistency_unit) == (8, 8, "collective")
    assert s.p_value == pytest.approx(0.25 ** 8)
