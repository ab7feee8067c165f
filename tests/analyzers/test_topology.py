"""Topology advice from the GPU peer paths NVML reports: a job whose GPUs meet only at the host bridge or across CPU
sockets is told which GPUs to use together (or NCCL_P2P_LEVEL), with a gain derived from the link speeds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuscope.analyzers.diagnosis.links import Link
from gpuscope.analyzers.diagnosis.rules.comm_topology import _saving
from gpuscope.analyzers.diagnosis.topology import placement
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.report import Report
from tests import builders as b
from tests.analyzers.test_collectives import comms_op

# Two PCIe switches, one per CPU socket: GPUs 0 and 1 under the first, 2 and 3 under the second.
SWITCH = {0: 1, 1: 0, 2: 3, 3: 2}


def machine(*, nvlink_links: int | None = 0, name: str = "NVIDIA L40S") -> dict[int, GpuInfo]:
    def peers(i: int) -> tuple[tuple[int, str], ...]:
        return tuple((j, "pcie_switch" if SWITCH[i] == j else "across_sockets") for j in range(4) if j != i)
    return {i: GpuInfo(index=i, name=name, pcie_gen=4, pcie_width=16, nvlink_links=nvlink_links,
                       peers=peers(i)) for i in range(4)}


def test_a_job_across_sockets_is_told_the_gpus_that_share_a_switch() -> None:
    gpus = machine()
    place = placement([gpus[0], gpus[2]])
    assert place is not None
    assert (place.path, place.pair, place.closer) == ("across_sockets", (0, 2), (0, 1))


def test_a_job_under_one_switch_nvlink_or_one_gpu_gets_nothing() -> None:
    gpus = machine()
    assert placement([gpus[2], gpus[3]]) is None
    assert placement([gpus[0]]) is None
    linked = machine(nvlink_links=4)
    assert placement([linked[0], linked[2]]) is None
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 NVL", "a GPU of no known model"):
        unknown = machine(nvlink_links=None, name=name)  # NVML did not say, and NVLink may be there
        assert placement([unknown[0], unknown[2]]) is None, name


@pytest.mark.parametrize("name", ["NVIDIA L40S", "NVIDIA A100 80GB PCIe", "NVIDIA H100 PCIe"])
def test_pcie_cards_whose_links_nvml_did_not_read_are_placed_by_their_name(name: str) -> None:
    unknown = machine(nvlink_links=None, name=name)
    place = placement([unknown[0], unknown[2]])
    assert place is not None and place.closer == (0, 1)


def test_no_closer_set_when_no_two_gpus_share_a_switch() -> None:
    far = {i: GpuInfo(index=i, nvlink_links=0, peers=tuple((j, "host_bridge") for j in range(2) if j != i))
           for i in range(2)}
    place = placement(list(far.values()))
    assert place is not None and place.path == "host_bridge" and place.closer is None


def test_the_gain_follows_the_link_speeds() -> None:
    # docs/diagnosis.md's example: PCIe 4.0 x16 is 16 x 1.969 = 31.504 GB/s; 70% of it is 22.05 GB/s; collectives
    # at 8 GB/s take 8 / 22.05 = 0.363 of today's time, so 30% of exposed communication becomes 10.9%: 19.1% saved.
    saving = _saving(0.30, 8.0, Link("PCIe 4.0 x16", 31.504))
    assert saving is not None and saving.fraction == pytest.approx(0.30 * (1 - 8.0 / (0.7 * 31.504)))
    assert round(saving.fraction, 3) == 0.191
    assert _saving(0.30, 25.0, Link("PCIe 4.0 x16", 31.504)).fraction == 0.0  # type: ignore[union-attr]
    assert _saving(0.30, None, Link("PCIe 4.0 x16", 31.504)) is None


def _report(tmp_path: Path, gpus: tuple[GpuInfo, ...]) -> Report:
    """A 10 ms step in which two GPUs all-reduce 100 MB in 10 ms: 10 GB/s of bus bandwidth (x 2(2-1)/2)."""
    from gpuscope.analyzers.report import build_report
    from gpuscope.api.analysis import trace_run_meta
    from gpuscope.model.run import Run
    from gpuscope.traces import load

    events: list[b.Event] = [b.step(0, 0, 12_000), comms_op("record_param_comms", 100, 1000, collective="allreduce",
                                                             dtype="Float", in_n=25_000_000, out_n=25_000_000, group=2),
                             b.launch(102, 2, 1000, ext=1000),
                             b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 105, 10_000, 1000, ext=1000)]
    loaded = load(b.write(tmp_path / "t.json", b.trace(events)))
    meta = replace(trace_run_meta(loaded.traces, name="t"), gpus=gpus)
    return build_report(Run(meta=meta, traces=loaded.traces))


def test_a_live_job_across_sockets_gets_placement_advice_through_nvml(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.collectors.nvml import NvmlSampler
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    levels = {i: {j: "SINGLE" if SWITCH[i] == j else "SYSTEM" for j in range(4) if j != i} for i in range(4)}
    FakeNvml([FakeGpu(name="NVIDIA L40S", nvlink_links=0, pcie_gen=4, pcie_width=16, topology=levels[i])
              for i in range(4)], monkeypatch)
    sampler = NvmlSampler.open()
    try:
        every = sampler.gpus()
    finally:
        sampler.close()
    report = _report(tmp_path, (every[0], every[2]))  # the job ran on GPUs 0 and 2: across the sockets
    (found,) = [f for f in report.findings if f.code == "comm_topology"]
    (rec,) = [r for r in report.recommendations if r.code == "gpu_placement"]
    assert found.evidence["path"] == "across_sockets" and found.evidence["closer_gpus"] == "0,1"
    assert "CUDA_VISIBLE_DEVICES=0,1" in rec.detail
    share = found.evidence["communication_share"]
    assert isinstance(share, float)
    # 100 MB in 10 ms is 10 GB/s; P2P under one switch reaches 0.7 x 31.504 GB/s.
    assert rec.est_step_saving == pytest.approx(share * (1 - 10.0 / (0.7 * 16 * 1.969)), rel=1e-3)


def test_a_job_that_cannot_move_is_told_nccl_p2p_level_without_a_made_up_gain(tmp_path: Path) -> None:
    far = tuple(GpuInfo(index=i, name="NVIDIA L40S", pcie_gen=4, pcie_width=16, nvlink_links=0,
                        peers=((1 - i, "cpu_socket"),)) for i in range(2))
    report = _report(tmp_path, far)
    (rec,) = [r for r in report.recommendations if r.code == "gpu_placement"]
    assert "NCCL_P2P_LEVEL=PHB" in rec.title and rec.est_step_saving is None


def test_trace_runs_have_no_peer_paths_and_get_no_topology_advice(tmp_path: Path) -> None:
    report = _report(tmp_path, (GpuInfo(index=0, name="NVIDIA L40S"), GpuInfo(index=1, name="NVIDIA L40S")))
    assert "comm_topology" not in {f.code for f in report.findings}
