"""Model FLOPs, MFU and efficiency advice on real traces, checked against published and independent counts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rich.console import Console

from gpuscope.api.analysis import analyze_path
from gpuscope.model.report import Report
from gpuscope.reports.terminal import render as _render
from tests import reference

SAMPLES = Path(__file__).resolve().parents[3] / "sample_traces"
RESNET = SAMPLES / "resnet50_dataloader_bound"
TIMESFORMER = SAMPLES / "dev" / "h100_timesformer_inference.json.gz"
DLRM_RANK0 = next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz"))


def render(report: Report) -> str:
    console = Console(record=True, width=200, color_system=None)
    _render(report, console)
    return console.export_text()


def _report(path: Path) -> Report:
    report, _ = analyze_path(path, save=False)
    return report


def _renamed(tmp_path: Path, name: str) -> Path:
    """The DLRM rank-0 trace (fp32 GEMMs, recorded shapes) with its GPUs named ``name``."""
    doc = json.loads(gzip.decompress(DLRM_RANK0.read_bytes()))
    for device in doc.get("deviceProperties", []):
        device["name"] = name
    out = tmp_path / "renamed.json"
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))


def test_resnet50_training_step_is_three_forward_passes_of_published_flops() -> None:
    # ResNet-50 at 224x224: 4.09 GMACs a forward pass per image (torchvision); training = forward + 2x backward.
    report = _report(RESNET)
    facts, eff = report.facts, report.efficiency
    assert facts is not None and eff is not None and facts.model_flops_per_step is not None
    published = 3 * 2 * 4.09e9 * 32
    assert abs(facts.model_flops_per_step - published) / published < 0.10
    # MFU exactly as stated: FLOPs / (the verdict's step time x GPUs x the V100 SXM2's fp32 peak from its datasheet).
    assert eff.gpu_model == "V100 SXM2 32GB" and eff.peak_dtype == "fp32" and facts.peak_flops == 15.7e12
    assert facts.step_time_us is not None and eff.gpus == 1
    assert facts.mfu == facts.model_flops_per_step / (facts.step_time_us / 1e6 * 1 * 15.7e12)
    assert eff.peak_source is not None and "volta-v100-datasheet" in eff.peak_source
    text = render(report)
    assert "MFU" in text and "15.7 TFLOP/s" in text and "V100 datasheet" in text


def test_transformer_model_flops_cover_the_leaf_gemms_counted_from_the_dims() -> None:
    report = _report(TIMESFORMER)
    assert report.facts is not None and report.facts.model_flops_per_step is not None
    leaf = reference.leaf_gemm_flops_per_step(TIMESFORMER)
    assert leaf > 0
    assert report.facts.model_flops_per_step >= leaf * (1 - 1e-9)


def test_a_gpu_not_in_the_table_has_no_mfu_and_says_why_in_every_view(tmp_path: Path) -> None:
    report = _report(_renamed(tmp_path, "Mystery GPU 9000"))
    assert report.facts is not None and report.efficiency is not None
    assert report.facts.model_flops_per_step and report.facts.mfu is None and report.facts.peak_flops is None
    note = report.efficiency.mfu_note or ""
    assert "'Mystery GPU 9000' is not in the GPU spec table" in note
    assert "MFU n/a" in render(report) and "not in the GPU spec table" in render(report)


def test_fp32_gemms_on_a_tensor_core_gpu_get_bf16_or_tf32_advice_with_a_roofline_saving(tmp_path: Path) -> None:
    report = _report(_renamed(tmp_path, "NVIDIA A100-SXM4-80GB"))
    rec = next((r for r in report.recommendations if r.code == "fp32_gemm"), None)
    assert rec is not None, [r.code for r in report.recommendations]
    assert "bf16" in rec.title and "TF32" in rec.title and "allow_tf32" in rec.detail
    assert rec.est_step_saving is not None and rec.est_step_saving > 0 and "roofline" in rec.reasoning
    same_on_v100 = _report(DLRM_RANK0)  # no bf16 or TF32 tensor cores: no such advice
    assert all(r.code != "fp32_gemm" for r in same_on_v100.recommendations)
