"""The shipped price catalog: every price traceable to a source, and device names mapped to entries."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from gpuscope.pricing import CatalogError, load_catalog, match_model, normalize
from gpuscope.pricing.catalog import parse_catalog
from gpuscope.pricing.resolve import resolve_price


def test_every_catalog_price_has_a_source_a_date_and_an_address() -> None:
    catalog = load_catalog()
    priced = [e for e in catalog.gpus if e.usd_per_gpu_hour is not None]
    assert len(priced) >= 10
    for entry in priced:
        assert entry.usd_per_gpu_hour is not None and entry.usd_per_gpu_hour > 0
        assert entry.source and entry.date and entry.url and entry.instance, entry.model
        assert entry.memory_bytes > 0
    unpriced = [e for e in catalog.gpus if e.usd_per_gpu_hour is None]
    assert all(e.source is None for e in unpriced)
    assert 0 < catalog.grid.kg_co2_per_kwh < 1 and "Ember" in catalog.grid.source and catalog.grid.url


def test_reference_prices_are_the_ones_shipped() -> None:
    prices = {e.model: e.usd_per_gpu_hour for e in load_catalog().gpus}
    assert prices["H100 SXM 80GB"] == 6.88
    assert prices["A100 80GB"] == 3.43
    assert prices["A10G"] == 1.006
    assert prices["L4"] == 0.80
    assert prices["T4"] == 0.526
    assert prices["H100 PCIe"] is None
    assert prices["A100 80GB PCIe"] == 3.67  # Azure NC A100 v4: one A100 80GB PCIe card


@pytest.mark.parametrize(("device_name", "model", "usd_per_gpu_hour"), [
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 3.67),
    ("NVIDIA H100 PCIe", "H100 PCIe", None),
    ("NVIDIA H100 NVL", "H100 NVL", 6.98),  # Azure NC40ads H100 v5: one H100 NVL card
    ("NVIDIA H200 NVL", "H200 NVL", None),
    ("AMD Instinct MI300X VF", "MI300X", 6.0),  # an SR-IOV virtual function of the card is billed as the card
])
def test_pcie_nvl_and_vf_cards_get_their_own_entry_and_price(device_name: str, model: str,
                                                             usd_per_gpu_hour: float | None) -> None:
    price = resolve_price(device_name, home=Path(tempfile.mkdtemp()), env={})
    assert price.catalog_model == model and price.usd_per_gpu_hour == usd_per_gpu_hour
    if usd_per_gpu_hour is None:  # never a neighbour's price: unknown until the user sets one
        assert price.note is not None and model in price.note


@pytest.mark.parametrize(
    ("device_name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A100-PCIE-80GB", "A100 80GB PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("Tesla V100-SXM2-32GB", "V100 32GB"),
        ("Tesla V100-DGXS-32GB", "V100 32GB"),
        ("Tesla V100-SXM2-16GB", "V100 16GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10G", "A10G"),
        ("Tesla T4", "T4"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA B200", "B200"),
        ("AMD Instinct MI300X", "MI300X"),
        ("a10g", "A10G"),
        ("H100 SXM 80GB", "H100 SXM 80GB"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA GH200 480GB", "GH200 96GB"),
        ("NVIDIA H800", "H800"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe 32GB"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe 32GB"),
        ("NVIDIA A100-PG509-200", "A100 40GB"),
    ],
)
def test_device_names_map_to_catalog_entries(device_name: str, model: str) -> None:
    entry = match_model(device_name)
    assert entry is not None and entry.model == model


@pytest.mark.parametrize("device_name", ["NVIDIA A10", "NVIDIA GB200", "NVIDIA H100", "H100", "NVIDIA H800 PCIe",
                                         "Radeon RX 7900", "", "   ", None])
def test_other_devices_match_nothing_rather_than_a_neighbour(device_name: str | None) -> None:
    assert match_model(device_name) is None


def test_normalize_drops_vendor_words_and_separators() -> None:
    assert normalize("NVIDIA A100-SXM4-80GB") == "a100 sxm4 80gb"
    assert normalize("  Tesla  V100_DGXS/32GB ") == "v100 dgxs 32gb"
    assert normalize("AMD Instinct MI300X") == "mi300x"


def test_a_catalog_price_without_a_source_is_refused() -> None:
    doc = {"schema": "gpuscope.prices/1", "version": "x", "grid": {"kg_co2_per_kwh": 0.4, "source": "s"},
           "gpus": [{"model": "X1", "match": ["x1"], "memory_gb": 8, "usd_per_gpu_hour": 1.0, "source": None}]}
    with pytest.raises(CatalogError, match="X1"):
        parse_catalog(json.dumps(doc).encode())
    with pytest.raises(CatalogError):
        parse_catalog(b'{"schema": "gpuscope.prices/1"}')
