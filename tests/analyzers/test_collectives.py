"""Collective bandwidth from the trace's own fields, checked against a hand computation (nccl-tests' definitions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.trace.collectives import bus_factor, op_kind
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.store.tracefile import load_traces, save_traces
from gpuscope.traces import read_trace
from tests import builders as b


def comms_op(name: str, ts: float, ext: int, *, collective: str, dtype: str, in_n: int, out_n: int,
             group: int) -> b.Event:
    op = b.cpu_op(name, ts, 20, ext=ext)
    op["args"].update({"Collective name": collective, "dtype": dtype, "In msg nelems": in_n, "Out msg nelems": out_n,
                       "Group size": group})
    return op


def comm_trace(tmp_path: Path) -> Path:
    events: list[b.Event] = [b.step(0, 0, 10_000)]
    # An all-reduce of 25M floats (100 MB) whose kernel runs 1 ms, twice; an all-gather to 8 x 1M bf16 (16 MB)
    # in 400 µs; a tiny all-reduce with no sizes recorded (an older torch): left out.
    for i, t in enumerate((100.0, 3_000.0)):
        events.append(comms_op("record_param_comms", t, 70 + i, collective="allreduce", dtype="Float",
                               in_n=25_000_000, out_n=25_000_000, group=8))
        events += [b.launch(t + 5, 5, 70 + i, ext=70 + i),
                   b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 20, 1_000, 70 + i, ext=70 + i)]
    events.append(comms_op("record_param_comms", 6_000, 80, collective="_allgather_base", dtype="BFloat16",
                           in_n=1_000_000, out_n=8_000_000, group=8))
    events += [b.launch(6_005, 5, 80, ext=80), b.kernel("ncclDevKernel_AllGather_RING_LL", 6_020, 400, 80, ext=80)]
    events += [b.cpu_op("record_param_comms", 8_000, 10, ext=90), b.launch(8_005, 5, 90, ext=90),
               b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 8_020, 10, 90, ext=90)]
    return b.write(tmp_path / "comms.json", b.trace(events, rank=0))


def test_bus_bandwidth_per_collective_equals_the_hand_computation(tmp_path: Path) -> None:
    trace = read_trace(comm_trace(tmp_path))
    stats = {(s.op, s.size_bucket): s for s in analyze_rank(trace).communication.collectives}
    assert set(stats) == {("all_reduce", "16 - 256 MiB"), ("all_gather", "1 - 16 MiB")}
    ar = stats[("all_reduce", "16 - 256 MiB")]
    assert (ar.count, ar.bytes, ar.group_size) == (2, 2 * 100_000_000, 8)
    assert ar.time_us == pytest.approx(2_000)
    assert ar.algbw_gbps == pytest.approx(100.0)  # 100 MB in 1 ms
    assert ar.busbw_gbps == pytest.approx(100.0 * 2 * 7 / 8)  # all-reduce: 2(n-1)/n
    ag = stats[("all_gather", "1 - 16 MiB")]
    assert ag.bytes == 16_000_000 and ag.algbw_gbps == pytest.approx(40.0)  # the gathered 16 MB in 400 µs
    assert ag.busbw_gbps == pytest.approx(40.0 * 7 / 8)


def test_collectives_survive_the_store(tmp_path: Path) -> None:
    trace = read_trace(comm_trace(tmp_path))
    save_traces(tmp_path, [trace])
    (back,) = load_traces(tmp_path)
    assert back.collectives.op == trace.collectives.op and back.collectives.dtype == trace.collectives.dtype
    assert analyze_rank(back).communication == analyze_rank(trace).communication


@pytest.mark.parametrize(("name", "kind", "factor"), [
    ("allreduce", "all_reduce", 2 * 3 / 4), ("all_reduce_coalesced", "all_reduce", 2 * 3 / 4),
    ("_allgather_base", "all_gather", 3 / 4), ("allgather_into_tensor_coalesced", "all_gather", 3 / 4),
    ("_reduce_scatter_base", "reduce_scatter", 3 / 4), ("alltoall_base", "all_to_all", 3 / 4),
    ("broadcast", "broadcast", 1.0), ("send", "send", 1.0), ("nccl:recv", "recv", 1.0), ("barrier", None, None),
])
def test_op_names_and_bus_factors(name: str, kind: str | None, factor: float | None) -> None:
    assert op_kind(name) == kind
    if kind is not None:
        assert bus_factor(kind, 4) == pytest.approx(factor)


def _allreduces(tmp_path: Path, *, count: int, nelems: int, kernel_us: float) -> set[str]:
    """One 10 ms step on an H100 (NVLink 4: 450 GB/s per direction) spent mostly in all-reduces."""
    from tests.analyzers.test_trace_rules import analyse, codes

    events: list[b.Event] = [b.step(0, 0, 10_000)]
    gap = 8_000 / count
    for i in range(count):
        t = 100 + i * gap
        events.append(comms_op("record_param_comms", t, 1000 + i, collective="allreduce", dtype="Float",
                               in_n=nelems, out_n=nelems, group=8))
        events += [b.launch(t + 2, 2, 1000 + i, ext=1000 + i),
                   b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 5, kernel_us, 1000 + i, ext=1000 + i)]
    return codes(analyse(tmp_path, events))


def test_large_collectives_near_the_link_are_told_to_send_fewer_bytes(tmp_path: Path) -> None:
    # 100 MB in 400 µs: algbw 250 GB/s, busbw 437.5 GB/s, 97% of NVLink 4.
    got = _allreduces(tmp_path, count=10, nelems=25_000_000, kernel_us=400)
    assert "comm_link_bound" in got and "fewer_comm_bytes" in got and "bucket_collectives" not in got


def test_small_collectives_far_under_the_link_are_told_to_coalesce(tmp_path: Path) -> None:
    # 4 KB in 20 µs: 0.2 GB/s algbw, a sliver of the link.
    got = _allreduces(tmp_path, count=200, nelems=1024, kernel_us=20)
    assert "comm_latency_bound" in got and "bucket_collectives" in got and "fewer_comm_bytes" not in got


def test_a_measured_pcie_link_beats_the_model_table(tmp_path: Path) -> None:
    """An H100 PCIe card that NVML says runs PCIe 4.0 x16 and no NVLink: 100 MB in 4 ms is 43.75 GB/s of bus
    bandwidth, far under NVLink 4 but 111% of what PCIe 4.0 x16 carries."""
    from dataclasses import replace

    from gpuscope.analyzers.report import build_report
    from gpuscope.api.analysis import trace_run_meta
    from gpuscope.model.run import Run
    from gpuscope.traces import load

    events: list[b.Event] = [b.step(0, 0, 10_000)]
    for i in range(2):
        t = 100 + i * 4_500
        events.append(comms_op("record_param_comms", t, 500 + i, collective="allreduce", dtype="Float",
                               in_n=25_000_000, out_n=25_000_000, group=8))
        events += [b.launch(t + 2, 2, 500 + i, ext=500 + i),
                   b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 5, 4_000, 500 + i, ext=500 + i)]
    loaded = load(b.write(tmp_path / "pcie.json", b.trace(events)))
    meta = trace_run_meta(loaded.traces, name="pcie")
    pcie = replace(meta, gpus=tuple(replace(g, pcie_gen=4, pcie_width=16, nvlink_links=0) for g in meta.gpus))
    on_table = build_report(Run(meta=meta, traces=loaded.traces))
    measured = build_report(Run(meta=pcie, traces=loaded.traces))
    assert "comm_link_bound" not in {f.code for f in on_table.findings}
    (f,) = [f for f in measured.findings if f.code == "comm_link_bound"]
    assert f.evidence["link"] == "PCIe 4.0 x16" and f.evidence["link_gbps"] == pytest.approx(31.504)
