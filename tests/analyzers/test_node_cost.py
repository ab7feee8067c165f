"""The running cost of `gpuscope top`, counted by hand: a GPU's price over the time watched, split between its
processes by SM share where every share is known, evenly where one is not."""

from __future__ import annotations

import pytest

from gpuscope.analyzers.node_cost import accumulate, parts
from gpuscope.model.node import GpuNow, NodeSnapshot, ProcessNow

S = 10**9


def snap(ts_s: float, processes: tuple[ProcessNow, ...], *, mig: bool = False) -> NodeSnapshot:
    gpus = (GpuNow(index=0, name="NVIDIA H100 80GB HBM3", usd_per_hour=3.6),
            GpuNow(index=1, name="NVIDIA A10G", usd_per_hour=None))
    if mig:
        gpus += (GpuNow(index=1000, name="NVIDIA H100 80GB HBM3", mig_profile="1g.10gb", usd_per_hour=3.6 / 7),)
    return NodeSnapshot(ts_ns=int(ts_s * S), host="node", gpus=gpus, processes=processes)


def test_cost_by_sm_share() -> None:
    procs = (ProcessNow(gpu=0, pid=1, sm_share=0.3), ProcessNow(gpu=0, pid=2, sm_share=0.1))
    start = accumulate(None, snap(100, procs))
    assert start.total_usd == 0 and start.gpu_usd == {} and start.since_ns == 100 * S
    after = accumulate(start, snap(110, procs))  # 10 s at $3.60/h: one cent
    assert after.gpu_usd == {0: pytest.approx(0.01)} and after.total_usd == pytest.approx(0.01)
    assert after.process_usd == {(0, 1): pytest.approx(0.0075), (0, 2): pytest.approx(0.0025)}
    assert after.process_usd_per_hour == {(0, 1): pytest.approx(2.7), (0, 2): pytest.approx(0.9)}
    later = accumulate(after, snap(120, procs[:1]))  # pid 2 gone: pid 1 has the GPU alone
    assert later.process_usd[(0, 1)] == pytest.approx(0.0175) and later.process_usd[(0, 2)] == pytest.approx(0.0025)
    assert 1 not in later.gpu_usd  # no price, no cost: absent, not $0


def test_unknown_or_idle_shares_split_evenly() -> None:
    assert parts([ProcessNow(gpu=0, pid=1, sm_share=0.5), ProcessNow(gpu=0, pid=2, sm_share=None)]) == [0.5, 0.5]
    assert parts([ProcessNow(gpu=0, pid=1, sm_share=0.0), ProcessNow(gpu=0, pid=2, sm_share=0.0)]) == [0.5, 0.5]
    assert parts([]) == []


def test_a_mig_instance_is_not_counted_twice_in_the_total() -> None:
    first = accumulate(None, snap(0, (), mig=True))
    after = accumulate(first, snap(3600, (ProcessNow(gpu=1000, pid=5, sm_share=None),), mig=True))
    assert after.gpu_usd == {0: pytest.approx(3.6), 1000: pytest.approx(3.6 / 7)}
    assert after.total_usd == pytest.approx(3.6) and after.process_usd == {(1000, 5): pytest.approx(3.6 / 7)}
