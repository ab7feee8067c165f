"""The roofline chart and the MFU card on efficiency figures built in code: points where the families are, ceilings
where the GPU's peak and bandwidth put them, n/a and its reason without a spec, labels inert."""

from __future__ import annotations

import pytest

from gpuscope.figures import Absent, EfficiencyCard, efficiency_card, roofline
from gpuscope.model.efficiency import Efficiency, FamilyRoofline


def family(name: str, intensity: float | None, tflops: float | None, gpu_us: float = 1000.0) -> FamilyRoofline:
    return FamilyRoofline(family=name, gpu_us=gpu_us, flops=0.0, bytes=0.0, achieved_tflops=tflops,
                          achieved_tb_s=None, intensity=intensity, roofline_tflops=None, roofline_share=None)


def efficiency(*families: FamilyRoofline, peak: float | None = 100e12, bandwidth: float | None = 2e12,
               note: str | None = None) -> Efficiency:
    return Efficiency(model_flops_per_step=1e12, peak_flops=peak, peak_dtype="bf16", peak_source="a datasheet",
                      gpu_model="GPU <b>X</b>", gpus=2, mfu=None if peak is None else 0.25, mfu_note=note,
                      step_time_us=20_000.0, unmodelled_share=0.1, families=families,
                      memory_bandwidth_bytes_per_s=bandwidth, attainable_mfu=0.4, target_mfu_source="default")


def test_points_sit_at_their_intensity_and_flops_under_the_ridge_of_peak_over_bandwidth() -> None:
    fig = roofline(efficiency(family("gemm", 200.0, 60.0), family("<i>elementwise</i>", 0.25, 0.4),
                              family("no bytes", None, 3.0)))
    assert not isinstance(fig, Absent)
    memory, compute, points = fig.data
    assert list(points.x) == [200.0, 0.25] and list(points.y) == [60.0, 0.4]  # the family without bytes is left out
    assert "&lt;i&gt;elementwise&lt;/i&gt;" in list(points.text)
    ridge = 100e12 / 2e12
    assert list(compute.y) == [100.0, 100.0] and compute.x[0] == memory.x[1] == ridge
    assert memory.y[0] == pytest.approx(memory.x[0] * 2.0)  # 2 TB/s: TFLOP/s = intensity x 2
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    assert "GPU &lt;b&gt;X&lt;/b&gt;" in fig.layout.title.text


def test_without_a_spec_the_points_are_drawn_and_the_title_says_why_there_are_no_ceilings() -> None:
    why = "'GPU <b>X</b>' is not in the GPU spec table"
    fig = roofline(efficiency(family("gemm", 200.0, 60.0), peak=None, bandwidth=None, note=why))
    assert not isinstance(fig, Absent)
    assert [t.name for t in fig.data] == ["kernel families"]
    assert "no ceilings" in fig.layout.title.text and "&lt;b&gt;" in fig.layout.title.text
    card = efficiency_card(efficiency(peak=None, bandwidth=None, note=why))
    assert isinstance(card, EfficiencyCard) and dict(card.rows)["MFU"] == "n/a" and dict(card.rows)["Peak"] == "n/a"
    assert card.note == f"MFU n/a: {why}"


def test_no_work_is_absent_with_its_reason() -> None:
    assert isinstance(roofline(None), Absent) and isinstance(efficiency_card(None), Absent)
    assert roofline(efficiency(family("gemm", None, None))) == Absent(
        "no roofline: no kernel family with counted FLOPs and bytes")
