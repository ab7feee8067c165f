"""NVLink as NVML reports it: version codes, not versions, mapped to NVLink versions and per-link speeds; checked
against the constants of the installed nvidia-ml-py and through the NVML fake at the binding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscope.analyzers.diagnosis.links import measured_link, nvlink_gbps_per_link, nvlink_version
from gpuscope.model.gpu import GpuInfo
from tests.conftest import SAMPLES

pynvml = pytest.importorskip("pynvml")

# NVIDIA's per-link, per-direction figures by NVLink generation (P100, V100, A100, H100, B200 datasheets: 80, 150,
# 300, 450, 900 GB/s per direction over 4, 6, 12, 18, 18 links), written out here apart from the code's table.
PER_LINK_GBPS = {"1": 20.0, "2": 25.0, "3": 25.0, "4": 25.0, "5": 50.0}


def binding_versions() -> dict[int, str]:
    """What the binding names each code: NVML_NVLINK_VERSION_4_0 = 6 -> "4.0"."""
    prefix = "NVML_NVLINK_VERSION_"
    return {int(getattr(pynvml, name)): name.removeprefix(prefix).replace("_", ".")
            for name in dir(pynvml) if name.startswith(prefix) and name != prefix + "INVALID"}


def test_every_code_the_binding_knows_maps_to_its_version_and_speed() -> None:
    versions = binding_versions()
    assert len(versions) >= 7  # 1.0 to 5.0 at least
    for code, version in versions.items():
        assert nvlink_version(code) == version, code
        assert nvlink_gbps_per_link(code) == PER_LINK_GBPS.get(version.split(".")[0]), code
    assert nvlink_version(int(pynvml.NVML_NVLINK_VERSION_INVALID)) is None


@pytest.mark.parametrize(("code_name", "links", "name", "gbps"), [
    ("NVML_NVLINK_VERSION_3_0", 12, "NVLink 3.0 x12", 300.0),   # A100 SXM
    ("NVML_NVLINK_VERSION_4_0", 18, "NVLink 4.0 x18", 450.0),   # H100 / H200 SXM
    ("NVML_NVLINK_VERSION_5_0", 18, "NVLink 5.0 x18", 900.0),   # B200
    ("NVML_NVLINK_VERSION_2_2", 6, "NVLink 2.2 x6", 150.0),
])
def test_codes_4_6_and_7_are_nvlink_3_4_and_5(code_name: str, links: int, name: str, gbps: float) -> None:
    code = int(getattr(pynvml, code_name))
    link = measured_link(GpuInfo(index=0, nvlink_links=links, nvlink_version=code, pcie_gen=5, pcie_width=16))
    assert link is not None and (link.name, link.gbps) == (name, pytest.approx(gbps))


def test_nvlink_of_an_unknown_speed_is_not_read_as_pcie() -> None:
    gpu = GpuInfo(index=0, nvlink_links=18, nvlink_version=99, pcie_gen=5, pcie_width=16)
    assert measured_link(gpu) is None  # the model table decides, never PCIe's 63 GB/s


def test_the_h200_that_answered_not_supported_to_every_nvlink_call_is_a_pcie_5_x16_card(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.collectors.nvml import NvmlSampler
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    facts = json.loads((SAMPLES / "h200" / "live" / "nvml_facts.json").read_text())["devices"][0]
    assert all("NotSupported" in link["state"]["error"] for link in facts["nvlink"])
    FakeNvml([FakeGpu(name=facts["nvmlDeviceGetName"]["ok"], nvlink_links=0,
                      pcie_gen=facts["nvmlDeviceGetCurrPcieLinkGeneration"]["ok"],
                      pcie_width=facts["nvmlDeviceGetCurrPcieLinkWidth"]["ok"])], monkeypatch)
    sampler = NvmlSampler.open()
    try:
        (gpu,) = sampler.gpus()
    finally:
        sampler.close()
    link = measured_link(gpu)
    assert gpu.nvlink_links == 0 and link is not None
    assert (link.name, link.gbps) == ("PCIe 5.0 x16", pytest.approx(16 * 3.938))


def fake_h100_gpus(monkeypatch: pytest.MonkeyPatch, count: int = 2) -> tuple[GpuInfo, ...]:
    """The GPUs NVML (faked at the binding) reports for SXM H100s: 18 active NVLink links, NVLink 4.0's code."""
    from gpuscope.collectors.nvml import NvmlSampler
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    FakeNvml([FakeGpu(nvlink_links=18) for _ in range(count)], monkeypatch)
    sampler = NvmlSampler.open()
    try:
        return sampler.gpus()
    finally:
        sampler.close()


def _report_with(gpus: tuple[GpuInfo, ...], tmp_path: Path, *, kernel_us: float) -> set[str]:
    """One 10 ms step of 8-GPU all-reduces of 100 MB each, on a run whose GPUs are ``gpus``."""
    from dataclasses import replace

    from gpuscope.analyzers.report import build_report
    from gpuscope.api.analysis import trace_run_meta
    from gpuscope.model.run import Run
    from gpuscope.traces import load
    from tests import builders as b
    from tests.analyzers.test_collectives import comms_op

    events: list[b.Event] = [b.step(0, 0, 10_000)]
    for i in range(10):
        t = 100 + i * 800
        events.append(comms_op("record_param_comms", t, 1000 + i, collective="allreduce", dtype="Float",
                               in_n=25_000_000, out_n=25_000_000, group=8))
        events += [b.launch(t + 2, 2, 1000 + i, ext=1000 + i),
                   b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 5, kernel_us, 1000 + i, ext=1000 + i)]
    loaded = load(b.write(tmp_path / "t.json", b.trace(events)))
    meta = replace(trace_run_meta(loaded.traces, name="t"), gpus=gpus)
    report = build_report(Run(meta=meta, traces=loaded.traces))
    return {f.code for f in report.findings}


def test_a_fake_h100_at_half_its_nvlink_is_not_called_link_bound(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = fake_h100_gpus(monkeypatch)
    assert gpus[0].nvlink_version == pynvml.NVML_NVLINK_VERSION_4_0  # the fake answers NVML's code, 6
    # 100 MB in 777.8 µs is 128.6 GB/s of algorithm bandwidth; x 2(8-1)/8 = 225 GB/s of bus bandwidth, half of
    # NVLink 4.0 x18's 450 GB/s (read as PCIe 5.0 x16, as the code 6 once was, it is 357% of the link).
    assert "comm_link_bound" not in _report_with(gpus, tmp_path, kernel_us=100e6 / (225e9 * 8 / 14) * 1e6)
    # At 97% of it, it is.
    assert "comm_link_bound" in _report_with(gpus, tmp_path, kernel_us=100e6 / (437.5e9 * 8 / 14) * 1e6)

