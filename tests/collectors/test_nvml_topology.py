"""The link between a run's GPUs, read once at open through NVML (mocked at the binding with autospec)."""

from __future__ import annotations

import pytest

from gpuscope.collectors.nvml import NvmlSampler
from tests.collectors.nvml_fake import FakeGpu, FakeNvml, pynvml


def test_nvlink_pcie_and_the_path_between_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([FakeGpu(topology={1: "SINGLE", 2: "SYSTEM"}), FakeGpu(topology={0: "SINGLE", 2: "NODE"}),
                     FakeGpu(name="NVIDIA L4", nvlink_links=0, pcie_gen=4, pcie_width=16,
                             topology={0: "SYSTEM", 1: "NODE"})], monkeypatch)
    sampler = NvmlSampler.open()
    try:
        h100, _, l4 = sampler.gpus()
    finally:
        sampler.close()
    assert (h100.nvlink_links, h100.pcie_gen, h100.pcie_width) == (18, 5, 16)
    assert h100.nvlink_version == pynvml.NVML_NVLINK_VERSION_4_0  # NVML's code, 6; the analysis maps it
    assert h100.peers == ((1, "pcie_switch"), (2, "across_sockets"))
    assert (l4.nvlink_links, l4.nvlink_version, l4.pcie_gen) == (0, None, 4)
    assert l4.peers == ((0, "across_sockets"), (1, "cpu_socket"))
    assert fake.calls("nvmlDeviceGetTopologyCommonAncestor") == 6  # once per ordered pair, at open only
    assert (2, "nvlink") in sampler.unsupported


def test_a_driver_without_topology_answers_leaves_them_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(fail={"nvmlDeviceGetCurrPcieLinkGeneration": pynvml.NVMLError_NotSupported,
                        "nvmlDeviceGetTopologyCommonAncestor": pynvml.NVMLError_NotSupported})
    FakeNvml([gpu, FakeGpu()], monkeypatch)
    sampler = NvmlSampler.open()
    try:
        info = sampler.gpus()[0]
    finally:
        sampler.close()
    assert info.pcie_gen is None and info.peers == ()


def test_the_topology_survives_the_store(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from gpuscope.model.run import RunMeta
    from gpuscope.store import Store

    FakeNvml([FakeGpu(topology={1: "SINGLE"}), FakeGpu(topology={0: "SINGLE"})], monkeypatch)
    sampler = NvmlSampler.open()
    gpus = sampler.gpus()
    sampler.close()
    with Store(Path(str(tmp_path))) as store:
        store.create_run(RunMeta(id="t", name="t", kind="attach", status="complete", started_ns=0, gpus=gpus))
        assert store.get_meta("t").gpus == gpus
