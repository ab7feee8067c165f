"""Physics as a ceiling: work above the GPU's peak for its type, or above its memory bandwidth, is flagged with its
likely cause in every view instead of shown bare; an operator whose FLOPs cannot be right is left out of MFU; an MFU
still above 100% is flagged. Small traces built in code (one GEMM a step whose kernel time is known), and the
bundled V100 ResNet-50, whose cuDNN Winograd convolutions run above the fp32 peak."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpuscope.analyzers.efficiency.ceiling import Work, flag, utilisation_flag
from gpuscope.api.analysis import analyze_path
from gpuscope.model.report import Report
from gpuscope.reports.terminal import render
from gpuscope.specs import spec_for
from tests.builders import cpu_op, kernel, launch, step, trace, write
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

H100 = "NVIDIA H100 80GB HBM3"
SQUARE = [[4096, 4096], [4096, 4096]]
"""2 x 4096^3 = 137.4 GFLOP: 687 TFLOP/s in its 200 µs kernel, 69% of the H100 SXM's dense bf16 peak."""
HUGE = [[10**18, 256], [256, 256]]
PLAUSIBLE = [[4096, 65536], [65536, 163840]]
"""88 TFLOP: plausible dims, in a kernel of 15 µs."""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))


def _mm(dims: list[list[int]], ts: float, kernel_us: float, corr: int) -> list[dict[str, Any]]:
    op = cpu_op("aten::mm", ts, 30)
    op["args"].update({"Input Dims": dims, "Input type": ["c10::BFloat16", "c10::BFloat16"],
                       "Concrete Inputs": ["", ""]})
    return [op, launch(ts + 5, 10, corr), kernel("nvjet_tst_128x256_64x4_bf16", ts + 20, kernel_us, corr)]


def _gemm_trace(folder: Path, extra: tuple[list[list[int]], ...] = (), *, gpu: str = H100) -> Path:
    """Three 1 ms steps of one 4096-cube bf16 GEMM in a 200 µs kernel, and each of ``extra`` in a 15 µs one."""
    folder.mkdir(parents=True, exist_ok=True)
    events: list[dict[str, Any]] = []
    for i in range(3):
        t0 = i * 1000.0
        events += [step(i, t0, 1000.0), *_mm(SQUARE, t0 + 10, 200.0, 100 * i + 1)]
        for j, dims in enumerate(extra):
            events += _mm(dims, t0 + 300 + 100 * j, 15.0, 100 * i + 2 + j)
    doc = trace(events)
    doc["deviceProperties"][0]["name"] = gpu
    return write(folder / "gemm.json", doc)


def _text(report: Report) -> str:
    console = Console(record=True, width=200, color_system=None)
    render(report, console)
    return console.export_text()


def _percentages(text: str) -> list[float]:
    return [float(p.replace(",", "")) for p in re.findall(r"(\d[\d,]*(?:\.\d+)?)%", text)]


def test_impossible_shapes_are_flagged_and_left_out_of_mfu(tmp_path: Path) -> None:
    clean, _ = analyze_path(_gemm_trace(tmp_path / "a"), save=False)
    path = _gemm_trace(tmp_path / "b", (HUGE, PLAUSIBLE))
    report, _ = analyze_path(path, save=False)
    eff = report.efficiency
    assert clean.efficiency is not None and eff is not None and clean.efficiency.mfu is not None
    assert clean.efficiency.mfu == pytest.approx(2 * 4096**3 / 1e-3 / 989.4e12, rel=0.05)  # 137 GFLOP a 1 ms step
    assert eff.mfu == pytest.approx(clean.efficiency.mfu, rel=1e-9)  # what is left out is the edited calls alone
    assert eff.model_flops_per_step == pytest.approx(clean.efficiency.model_flops_per_step, rel=1e-9)
    assert eff.left_out_flops_per_step == pytest.approx(2.0 * 10**18 * 256 * 256 + 2.0 * 4096 * 65536 * 163840)
    assert sorted(a.shape for a in eff.above_ceiling) == sorted(json.dumps(d) for d in (HUGE, PLAUSIBLE))
    assert all(a.flag.cause == "shapes" and not a.in_mfu for a in eff.above_ceiling)
    (gemm,) = [f for f in eff.families if f.family == "gemm"]
    assert gemm.flag is not None and gemm.flag.kind == "above_peak" and gemm.flag.cause == "shapes"
    text = _text(report)
    assert "above peak (shapes do not fit the kernels' time)" in text and max(_percentages(text)) <= 100
    # `gpuscope ops` on the same trace: the same MFU, the operator's flag instead of a share of its roofline.
    result = gpuscope("ops", str(path), "--json", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["efficiency"]["mfu"] == pytest.approx(eff.mfu, rel=1e-12)
    (mm,) = [o for r in doc["ranks"] for o in r["ops"] if o["name"] == "aten::mm"]
    assert mm["efficiency"]["flag"]["cause"] == "shapes" and mm["efficiency"]["roofline_share"] > 1
    text = gpuscope("ops", str(path), home=tmp_path / "home").stdout
    assert "> peak" in text and max(_percentages(text)) <= 100


def test_an_mfu_above_100_percent_is_flagged_with_its_cause_instead_of_shown(tmp_path: Path) -> None:
    """The H100's GEMMs in a trace that names an A10 (125 TFLOP/s bf16): every one above the A10's peak, so the
    peak is the suspect, not the shapes; MFU, kept, is above 100% and shows as its flag."""
    report, _ = analyze_path(_gemm_trace(tmp_path, gpu="NVIDIA A10"), save=False)
    eff = report.efficiency
    assert eff is not None and eff.mfu is not None and eff.mfu > 1 and eff.left_out_flops_per_step == 0
    assert eff.mfu_flag is not None and eff.mfu_flag.kind == "above_100" and eff.mfu_flag.cause == "peak"
    assert all(a.flag.cause == "peak" and a.in_mfu for a in eff.above_ceiling)
    text = _text(report)
    assert "MFU above 100% (wrong GPU or shapes)" in text and max(_percentages(text)) <= 100


def test_the_v100s_winograd_convolutions_are_above_the_fp32_peak_and_kept_in_mfu() -> None:
    """cuDNN runs ResNet-50's 3x3 convolutions as Winograd (winogradForwardData4x4, the volta_sgemm GEMM over the
    transformed tiles, winogradForwardOutput4x4): direct-convolution FLOPs in less time than the peak allows."""
    report, _ = analyze_path(SAMPLES / "resnet50_dataloader_bound", save=False)
    eff = report.efficiency
    assert eff is not None and eff.mfu is not None and eff.mfu < 1 and eff.mfu_flag is None
    winograd = [a for a in eff.above_ceiling if a.flag.cause == "winograd"]
    assert winograd and all(a.in_mfu and ("convolution" in a.op or "conv2d" in a.op) for a in winograd)
    assert eff.left_out_flops_per_step == 0
    flagged = {f.family: f.flag for f in eff.families if f.flag is not None}
    assert set(flagged) == {"gemm"} and flagged["gemm"] is not None and flagged["gemm"].cause == "winograd"
    # The fill kernels move the bytes they write, not twice: under the V100's 0.9 TB/s.
    (copy,) = [f for f in eff.families if f.family == "copy and index"]
    assert copy.achieved_tb_s is not None and copy.achieved_tb_s < 0.9 and copy.flag is None


def test_each_cause_by_what_the_work_says() -> None:
    v100, a100 = spec_for("Tesla V100-SXM2-32GB"), spec_for("NVIDIA A100-SXM4-80GB")
    assert v100 is not None and a100 is not None
    one_ms = 1000.0
    fast = Work("x", 20e12 * 1e-3, 0.0, one_ms, "fp32", fast_flops=10e12 * 1e-3, algorithm="winograd")
    found = flag(fast, v100)
    assert found is not None and found.cause == "winograd"  # 10 TFLOP/s without the Winograd work: under 15.7
    assert (f := flag(Work("x", 30e12 * 1e-3, 0.0, one_ms, "fp32"), a100)) is not None and f.cause == "tf32"
    assert (f := flag(Work("x", 200e12 * 1e-3, 0.0, one_ms, "fp32"), a100)) is not None and f.cause == "shapes"
    assert (f := flag(Work("x", 0.0, 3e12 * 1e-3, one_ms, "fp32"), a100)) is not None and f.cause == "cache"
    assert flag(Work("x", 10e12 * 1e-3, 1e9 * 1e-3, one_ms, "fp32"), v100) is None
    assert flag(Work("x", 1e18, 1e18, one_ms, "fp32"), None) is None  # no spec: nothing to hold it against
    assert utilisation_flag("MFU", 0.99, untimed_share=0.0, dtype="bf16", spec=a100, kept=()) is None
    untimed = utilisation_flag("MFU", 1.5, untimed_share=0.6, dtype="bf16", spec=a100, kept=())
    assert untimed is not None and untimed.cause == "untimed"
    tf32 = utilisation_flag("MFU", 2.0, untimed_share=0.0, dtype="fp32", spec=a100, kept=())
    assert tf32 is not None and tf32.cause == "tf32"  # 2 x 19.5 TFLOP/s fp32 is under the TF32 peak
