"""The GPU spec table: device names to entries (form factors told apart), the dense peaks and their sources, and the
user's config.toml entries over the shipped ones."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from gpuscope.model.gpu_spec import DTYPES
from gpuscope.specs import SpecError, load_specs, match_spec, parse_table, shipped_specs, spec_for

# Device names as NVML, ROCm or a trace's deviceProperties spell them -> the entry they are.
NAMES = {
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB", "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",
    "Tesla V100-DGXS-32GB": "V100 SXM2 32GB", "Tesla V100-PCIE-16GB": "V100 PCIe 16GB",
    "Tesla V100-PCIE-32GB": "V100 PCIe 32GB", "Tesla T4": "T4", "NVIDIA A10": "A10", "NVIDIA A10G": "A10G",
    "NVIDIA L4": "L4", "NVIDIA L40S": "L40S", "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB", "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB", "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL", "NVIDIA H200": "H200 SXM", "NVIDIA H200 NVL": "H200 NVL", "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200", "AMD Instinct MI250X/MI250": "MI250X", "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI300X VF": "MI300X", "AMD Instinct MI325X": "MI325X", "AMD Instinct MI355X": "MI355X",
    "Tesla V100S-PCIE-32GB": "V100S PCIe 32GB", "NVIDIA L40": "L40", "AMD Instinct MI210": "MI210",
    "NVIDIA H800": "H800", "NVIDIA GH200 480GB": "GH200 96GB", "NVIDIA GB10": "GB10",
    "NVIDIA A100-PG509-200": "A100 SXM 40GB",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    return home


@pytest.mark.parametrize(("name", "model"), NAMES.items())
def test_each_device_name_finds_its_own_form_factor(name: str, model: str) -> None:
    spec = match_spec(name)
    assert spec is not None and spec.model == model


@pytest.mark.parametrize("name", ["NVIDIA H100", "H100", "A100", "NVIDIA GeForce RTX 4090", "", "   ", None,
                                  "NVIDIA H800 PCIe", "NVIDIA GH200 144G HBM3e", "AMD Radeon Graphics"])
def test_a_name_the_table_cannot_tell_apart_or_lacks_has_no_spec(name: str | None) -> None:
    # A bare "H100" could be PCIe, SXM or NVL, 30% apart: no entry rather than a guess.
    assert match_spec(name) is None


def test_every_shipped_entry_has_a_source_a_date_and_known_memory() -> None:
    table = shipped_specs()
    assert {g.model for g in table.gpus} == set(NAMES.values()) | {"V100 SXM2 16GB"}
    for spec in table.gpus:
        assert spec.source and spec.url and spec.url.startswith("https://"), spec.model
        assert spec.read is not None and re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.read), spec.model
        assert spec.memory_bytes >= 16 * 10**9 and spec.memory_bandwidth_bytes_per_s, spec.model
        # What the driver reports is a little under the datasheet's decimal GB (the driver keeps some), never more.
        if spec.device_bytes is not None:
            assert 0.97 * spec.memory_bytes < spec.device_bytes <= spec.memory_bytes * 1.08, spec.model
            assert spec.device_bytes_source, spec.model
        # Tensor rates are at least the plain fp32 rate: a sparse figure left undivided would still pass, a
        # datasheet column shifted by one would not.
        fp32 = spec.peak_tflops.fp32
        for dtype in ("tf32", "bf16", "fp16", "fp8"):
            value = spec.peak_tflops.get(dtype)
            assert fp32 is None or value is None or value >= fp32, (spec.model, dtype)


def test_datasheet_figures_and_what_each_gpu_lacks() -> None:
    v100, t4, a100, h100 = (match_spec(n) for n in ("Tesla V100-SXM2-16GB", "Tesla T4", "NVIDIA A100-SXM4-80GB",
                                                    "NVIDIA H100 80GB HBM3"))
    assert v100 is not None and t4 is not None and a100 is not None and h100 is not None
    assert v100.peak_flops("fp16") == 125e12 and v100.peak_flops("fp32") == 15.7e12
    for old in (v100, t4):
        assert not old.supports("bf16") and not old.supports("tf32") and not old.supports("fp8")
    assert a100.supports("bf16") and a100.supports("tf32") and not a100.supports("fp8")
    assert a100.memory_bytes == 80 * 10**9 and a100.memory_bandwidth_gb_s == 2039
    # H100 SXM's datasheet gives 1,979 TFLOPS bf16 *with sparsity*; the dense rate is half.
    assert h100.peak_flops("bf16") == 989.5e12 and h100.supports("fp8")
    a10g = match_spec("NVIDIA A10G")
    assert a10g is not None and a10g.peak_flops("bf16") is None and a10g.supports("bf16")
    assert "read" in h100.source_line and h100.url is not None and h100.url in h100.source_line


def test_pcie_sxm_and_nvl_differ_where_the_datasheets_do() -> None:
    peaks = {n: match_spec(n) for n in ("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL")}
    bf16 = {n: s.peak_flops("bf16") if s else None for n, s in peaks.items()}
    assert len(set(bf16.values())) == 3 and None not in bf16.values()
    assert {s.interconnect for s in peaks.values() if s} == {"PCIe", "NVLink"}


def test_the_shipped_file_keeps_every_dtype_and_a_versioned_schema() -> None:
    doc = json.loads(resources.files("gpuscope").joinpath("data/gpu_specs.json").read_bytes())
    assert doc["schema"] == "gpuscope.gpu_specs/1" and doc["version"]
    for entry in doc["gpus"]:
        assert set(entry["peak_tflops"]) == set(DTYPES), entry["model"]


def test_config_changes_a_shipped_entry_and_adds_a_new_one(home: Path) -> None:
    (home / "config.toml").write_text(
        '[gpu_specs."NVIDIA H100 80GB HBM3"]\npeak_tflops = { bf16 = 900 }\n'
        '[gpu_specs."RTX 6000 Ada"]\nmatch = ["rtx 6000 ada"]\nmemory_gb = 48\nmemory_bandwidth_gb_s = 960\n'
        'peak_tflops = { fp32 = 91.1, bf16 = 364.2 }\nsource = "NVIDIA RTX 6000 Ada datasheet"\n')
    h100 = spec_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.model == "H100 SXM"
    assert h100.peak_flops("bf16") == 900e12 and h100.peak_flops("fp8") == 1979e12  # the rest stays
    assert h100.source.startswith("config ") and "NVIDIA H100 datasheet" in h100.source
    ada = spec_for("NVIDIA RTX 6000 Ada Generation")
    assert ada is not None and ada.peak_flops("bf16") == 364.2e12 and ada.source == "NVIDIA RTX 6000 Ada datasheet"
    assert spec_for("NVIDIA A100-SXM4-80GB") == match_spec("NVIDIA A100-SXM4-80GB")  # untouched


@pytest.mark.parametrize(("text", "message"), [
    ('[gpu_specs."X9"]\npeak_tflops = { bf16 = 1 }\n', "needs memory_gb"),
    ('[gpu_specs."H100 SXM"]\npeak_tflops = { bf16 = -5 }\n', "peak_tflops.bf16"),
    ('[gpu_specs."H100 SXM"]\npeak_tflops = { bf17 = 5 }\n', "bf17"),
    ('[gpu_specs."X9"]\nmemory_gb = 8\nmatch = ["("]\n', "not a regular expression"),
    ('gpu_specs = 3\n', "must be a table"),
    ('[gpu_specs\n', "cannot read"),
])
def test_a_bad_config_entry_is_one_clear_error(home: Path, text: str, message: str) -> None:
    (home / "config.toml").write_text(text)
    with pytest.raises(SpecError, match=re.escape(message)):
        load_specs()


def test_a_broken_table_is_refused() -> None:
    with pytest.raises(SpecError, match="schema"):
        parse_table(b'{"schema": "other/1", "version": "1", "gpus": []}')
    with pytest.raises(SpecError, match="not valid"):
        parse_table(b'{"schema": "gpuscope.gpu_specs/1"}')
