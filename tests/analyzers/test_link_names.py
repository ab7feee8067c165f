"""Which link a GPU model's name says its GPUs talk over: PCIe cards (A100 PCIe 40/80GB, H100 PCIe) never read as
NVLink, NVL cards have their bridge only within it; figures from the vendors' datasheets, written out here apart from
the code's table."""

from __future__ import annotations

import pytest

from gpuscope.analyzers.diagnosis.links import has_nvlink, link_of


@pytest.mark.parametrize(("name", "gpus", "link", "gbps"), [
    # PCIe cards are PCIe whatever the rest of the name says (the SXM modules' names carry no "PCIe").
    ("NVIDIA A100 80GB PCIe", 8, "PCIe 4.0 x16", 32.0),
    ("NVIDIA A100-PCIE-40GB", 8, "PCIe 4.0 x16", 32.0),
    ("NVIDIA H100 PCIe", 8, "PCIe 5.0 x16", 64.0),
    ("NVIDIA A100-SXM4-80GB", 8, "NVLink 3", 300.0),
    ("NVIDIA H100 80GB HBM3", 8, "NVLink 4", 450.0),
    # NVL cards: an NVLink bridge joins 2 (H100 NVL) or up to 4 (H200 NVL) cards; more cross PCIe 5.0.
    ("NVIDIA H100 NVL", 2, "NVLink bridge", 300.0),
    ("NVIDIA H100 NVL", 4, "PCIe 5.0 x16", 64.0),
    ("NVIDIA H200 NVL", 4, "NVLink bridge", 450.0),
    ("NVIDIA H200 NVL", 8, "PCIe 5.0 x16", 64.0),
    ("NVIDIA H200", 8, "NVLink 4", 450.0),
    ("AMD Instinct MI300X VF", 8, "Infinity Fabric", 448.0),
])
def test_pcie_and_nvl_cards_are_told_from_their_names(name: str, gpus: int, link: str, gbps: float) -> None:
    found = link_of(name, gpus)
    assert found is not None and (found.name, found.gbps) == (link, gbps)


@pytest.mark.parametrize(("name", "nvlink"), [
    ("NVIDIA A100 80GB PCIe", False), ("NVIDIA H100 PCIe", False), ("NVIDIA L4", False),
    ("NVIDIA H100 NVL", True), ("NVIDIA H200 NVL", True), ("NVIDIA A100-SXM4-40GB", True), ("Foo 9000", None),
])
def test_pcie_cards_are_never_read_as_nvlink(name: str, nvlink: bool | None) -> None:
    assert has_nvlink(name) is nvlink
