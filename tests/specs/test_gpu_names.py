"""Device names as real traces, NVML and users spell them: each stands for exactly one GPU in both the spec table and
the price catalog, or is refused as ambiguous with the choices, never a neighbour's figures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.model.gpu_names import family, normalize
from gpuscope.pricing import load_catalog, lookup_model
from gpuscope.specs import lookup_gpu, lookup_spec, shipped_specs
from tests.conftest import SAMPLES

# deviceProperties / NVML names -> the spec-table model. Those marked * were read from real recordings: this
# repository's sample_traces, HolisticTraceAnalysis's and TraceLens's test traces.
REAL = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",  # *
    "NVIDIA H100 PCIe": "H100 PCIe", "NVIDIA H100 NVL": "H100 NVL", "NVIDIA H800": "H800",
    "NVIDIA H200": "H200 SXM",  # *
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",  # *
    "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100-PG509-200": "A100 SXM 40GB",  # *
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB", "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB",  # *
    "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",  # *
    "Tesla V100-DGXS-32GB": "V100 SXM2 32GB",  # *
    "Tesla V100-PCIE-16GB": "V100 PCIe 16GB", "Tesla V100S-PCIE-32GB": "V100S PCIe 32GB",
    "NVIDIA L40": "L40", "NVIDIA L40S": "L40S", "NVIDIA L4": "L4", "Tesla T4": "T4", "NVIDIA A10G": "A10G",
    "NVIDIA GH200 480GB": "GH200 96GB", "NVIDIA GB10": "GB10",
    "NVIDIA B200": "B200",  # *
    "AMD Instinct MI300X": "MI300X",  # *
    "AMD Instinct MI300X VF": "MI300X",  # *
    "AMD Instinct MI210": "MI210",  # *
}
# Names that could be more than one model: refused with these choices (at least).
AMBIGUOUS = {
    "NVIDIA H100": {"H100 SXM", "H100 PCIe", "H100 NVL"}, "H100": {"H100 SXM", "H100 PCIe", "H100 NVL"},
    "H100 80GB": {"H100 SXM", "H100 PCIe"}, "A100": {"A100 SXM 40GB", "A100 SXM 80GB"},
    "Tesla V100-SXM2": {"V100 SXM2 16GB", "V100 SXM2 32GB"},
}
# Names no entry stands for: a GPU the table lacks, or a name that says nothing of the model.
UNKNOWN = ["AMD Radeon Graphics", "", "NVIDIA GeForce RTX 4090", "NVIDIA H800 PCIe", "NVIDIA GH200 144G HBM3e"]


@pytest.mark.parametrize(("name", "model"), REAL.items())
def test_a_real_device_name_is_one_gpu_in_both_tables(name: str, model: str) -> None:
    spec = lookup_spec(name)
    assert spec.found is not None and spec.found.model == model and not spec.choices
    entry = lookup_model(name)
    assert entry.found is not None and entry.found.spec == model


@pytest.mark.parametrize(("name", "some"), AMBIGUOUS.items())
def test_a_name_of_several_models_is_ambiguous_in_both_tables_with_the_choices(name: str, some: set[str]) -> None:
    spec = lookup_spec(name)
    assert spec.found is None and spec.ambiguous and some <= set(spec.choices)
    entry = lookup_model(name)
    assert entry.found is None and entry.ambiguous
    by_model = {e.model: e.spec for e in load_catalog().gpus}
    assert some <= {by_model[c] for c in entry.choices}
    assert all(c in spec.choices_text() for c in spec.choices)


@pytest.mark.parametrize("name", UNKNOWN)
def test_a_name_no_entry_stands_for_is_neither_found_nor_ambiguous(name: str) -> None:
    for found in (lookup_spec(name), lookup_model(name)):
        assert found.found is None and not found.ambiguous


def test_the_catalog_matches_names_by_its_spec_models_patterns_and_covers_each_family() -> None:
    # One rule for names: a catalog entry's patterns are its spec model's, and a family the catalog prices is
    # there whole, so that a sibling the catalog lacked could never make a name look ambiguous in one table alone.
    specs = {s.model: s for s in shipped_specs().gpus}
    catalog = load_catalog().gpus
    for entry in catalog:
        assert entry.spec in specs and entry.match == specs[entry.spec].match, entry.model
    priced = {family(e.spec or "") for e in catalog}
    for spec in specs.values():
        if family(spec.model) in priced:
            assert any(e.spec == spec.model for e in catalog), spec.model


def test_no_two_shipped_entries_share_a_name_and_each_matches_its_own() -> None:
    specs = shipped_specs().gpus
    assert len({normalize(s.model) for s in specs}) == len(specs)
    for spec in specs:
        assert lookup_spec(spec.model).found == spec


def test_a_price_catalog_model_names_its_spec_on_the_command_line() -> None:
    # "A100 80GB" is how `gpuscope prices` lists the SXM card: the spec table alone would call it ambiguous.
    assert lookup_spec("A100 80GB").ambiguous
    found = lookup_gpu("A100 80GB")
    assert found.found is not None and found.found.model == "A100 SXM 80GB"
    assert lookup_gpu("H100").ambiguous


def test_the_h100_and_h200_report_their_driver_sizes() -> None:
    h100 = lookup_gpu("H100 SXM").found
    h200 = lookup_gpu("NVIDIA H200").found
    assert h100 is not None and h200 is not None
    # 85,018,279,936 bytes: an H100 80GB HBM3's deviceProperties (sample_traces/dev/h100_timesformer_inference).
    assert h100.usable_memory[0] == 85_018_279_936 and f"{h100.usable_memory[0] / 2**30:.1f}" == "79.2"
    assert "as the driver reports it" in h100.usable_memory[1]
    assert h200.usable_memory[0] == 150_109_880_320  # every sample_traces/h200 recording's deviceProperties
    nvl = lookup_gpu("H100 NVL").found
    assert nvl is not None and nvl.usable_memory[0] == 94 * 10**9 and "datasheet" in nvl.usable_memory[1]


def test_a_trace_of_an_ambiguous_name_has_no_price_and_no_mfu_and_says_why(tmp_path: Path) -> None:
    # A trace whose deviceProperties say only "NVIDIA H100": n/a price and n/a MFU, each with the choices, never the
    # SXM card's $6.88 or its 989.5 TFLOP/s.
    doc = json.loads(gzip.decompress((SAMPLES / "dev" / "h100_timesformer_inference.json.gz").read_bytes()))
    doc["deviceProperties"][0]["name"] = "NVIDIA H100"
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(doc))
    report, _ = analyze_path(path)
    assert report.cost is not None and report.cost.usd_per_gpu_hour is None and report.cost.total_usd is None
    assert report.cost.note is not None and "could be any of H100 SXM 80GB, H100 PCIe or H100 NVL" in report.cost.note
    eff = report.efficiency
    assert eff is not None and eff.mfu is None and eff.peak_flops is None
    assert eff.mfu_note is not None and "could be any of H100 SXM, H100 NVL or H100 PCIe" in eff.mfu_note
