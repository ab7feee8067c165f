"""The diff of two loops built in code, against what each step's breakdown and price come to by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuscope
from gpuscope.analyzers.trace import profile
from gpuscope.model.diff import Diff
from tests.changes.loops import write_loop


def diff_of(tmp_path: Path, base: dict[str, object], cand: dict[str, object], **options: object) -> Diff:
    a = write_loop(tmp_path, "base", **base)  # type: ignore[arg-type]
    b = write_loop(tmp_path, "cand", **cand)  # type: ignore[arg-type]
    return gpuscope.diff(a, b, **options)  # type: ignore[arg-type]


def part(d: Diff, stage: str) -> tuple[float, float]:
    """(baseline, candidate) µs per step of a stage, families summed."""
    rows = [p for p in d.parts if p.stage == stage]
    return sum(p.baseline_us for p in rows), sum(p.candidate_us for p in rows)


def test_a_slower_loader_is_the_whole_change(tmp_path: Path, gpuscope_home: Path) -> None:
    # By hand: 1000 µs steps = kernel 400 + runtime 20 + loader 300 + CPU exec 20 + other 260; the candidate's loader
    # takes 600 µs and its steps 1300 µs, the rest unchanged.
    d = diff_of(tmp_path, {}, {"loader_us": 600.0, "step_us": 1300.0})
    assert (d.step_time_us.baseline, d.step_time_us.candidate) == pytest.approx((1000.0, 1300.0))
    assert part(d, "data_loading") == pytest.approx((300.0, 600.0))
    assert part(d, "host_overhead") == pytest.approx((300.0, 300.0))  # runtime 20 + CPU exec 20 + other 260
    assert part(d, "gpu_compute") == pytest.approx((400.0, 400.0))
    assert part(d, "memory") == part(d, "communication") == part(d, "idle") == (0.0, 0.0)
    (data,) = [p for p in d.parts if p.stage == "data_loading"]
    assert data.change_us == pytest.approx(300.0) and data.share_of_change == pytest.approx(1.0)
    # Six identical steps a side: the observed split is the most extreme of C(12, 6) = 924.
    assert data.significant is True and data.p_value == pytest.approx(1 / 924)
    assert d.significant is True and d.change == pytest.approx(0.3)
    assert all(p.significant is False for p in d.parts if p.stage != "data_loading")


def test_the_parts_add_up_to_each_step_and_to_the_change(tmp_path: Path, gpuscope_home: Path) -> None:
    d = diff_of(tmp_path, {"extra": (("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0),)},
                {"loader_us": 450.0, "step_us": 1200.0, "kernel_us": 500.0})
    assert d.change_us is not None and d.step_time_us.baseline is not None and d.step_time_us.candidate is not None
    assert sum(p.change_us for p in d.parts) == pytest.approx(d.change_us, rel=1e-9)
    assert sum(p.baseline_us for p in d.parts) == pytest.approx(d.step_time_us.baseline, rel=1e-9)
    assert sum(p.candidate_us for p in d.parts) == pytest.approx(d.step_time_us.candidate, rel=1e-9)
    assert sum(p.share_of_change or 0.0 for p in d.parts) == pytest.approx(1.0)


def test_kernels_match_by_name_then_family_and_new_ones_appear(tmp_path: Path, gpuscope_home: Path) -> None:
    d = diff_of(tmp_path, {"extra": (("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", 30.0),)},
                {"kernel": "ampere_sgemm_64x32_nn", "kernel_us": 350.0,
                 "extra": (("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", 30.0),
                           ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0))})
    by_match = {(k.match, k.family): k for k in d.kernels}
    gemm = by_match[("family", "gemm")]
    assert gemm.names_baseline == ("volta_sgemm_128x64_nn",) and gemm.names_candidate == ("ampere_sgemm_64x32_nn",)
    assert (gemm.baseline_us, gemm.candidate_us, gemm.change_us) == pytest.approx((400.0, 350.0, -50.0))
    nccl = by_match[("appeared", "communication")]
    assert (nccl.baseline_us, nccl.candidate_us, nccl.candidate_count) == pytest.approx((0.0, 100.0, 1.0))
    same = by_match[("name", "elementwise")]
    assert same.change_us == pytest.approx(0.0) and same.baseline_count == same.candidate_count == 1.0
    assert [k.match for k in d.kernels][:2] == ["appeared", "family"]  # largest change first: +100, then -50
    nccl_setup = {s.key: s for s in d.setup}["nccl"]
    assert (nccl_setup.baseline, nccl_setup.candidate, nccl_setup.changed) == \
        ("no NCCL kernels", "AllReduce RING LL", True)


def test_setup_changes_are_read_from_the_traces(tmp_path: Path, gpuscope_home: Path) -> None:
    d = diff_of(tmp_path, {"cuda_runtime_version": 12010, "cuda_driver_version": 12040},
                {"cuda_runtime_version": 12040, "cuda_driver_version": 12040, "workers": True,
                 "shapes": [[64, 3, 224, 224], [64, 3, 7, 7]], "types": ("c10::BFloat16", "c10::BFloat16"),
                 "annotations": ("Torch-Compiled Region: 0/0",)})
    changed = {s.key: (s.baseline, s.candidate) for s in d.setup_changes}
    assert changed == {
        "batch_shape": ("[32, 3, 224, 224] into aten::conv2d", "[64, 3, 224, 224] into aten::conv2d"),
        "dtypes": ("float32", "bfloat16"),
        "dataloader": ("in-process (num_workers=0)", "worker processes (num_workers>0)"),
        "cuda_runtime": ("12.1", "12.4"),
        "torch_compile": ("no", "yes"),
    }
    items = {s.key: s for s in d.setup}
    assert items["cuda_driver"].changed is False and items["gpu_model"].changed is False
    assert items["pytorch"].changed is None and items["pytorch"].baseline is None  # Kineto does not record it


def test_an_aspect_one_run_does_not_state_is_unknown_not_unchanged(tmp_path: Path, gpuscope_home: Path) -> None:
    d = diff_of(tmp_path, {"cuda_runtime_version": 12010}, {})
    cuda = {s.key: s for s in d.setup}["cuda_runtime"]
    assert (cuda.baseline, cuda.candidate, cuda.changed) == ("12.1", None, None)
    assert "cuda_runtime" not in {s.key for s in d.setup_changes}


def test_the_price_per_step_job_and_month_by_hand(tmp_path: Path, gpuscope_home: Path) -> None:
    # At $2 per GPU-hour on 1 GPU a 1000 µs step costs 2 * 1000 / 3.6e9 dollars and a 1300 µs one 30% more.
    # A month: the baseline's 730 hours of work ($1,460) done 30% dearer is $438 more.
    d = diff_of(tmp_path, {}, {"loader_us": 600.0, "step_us": 1300.0}, usd_per_gpu_hour=2.0, job_hours=100.0)
    assert d.price.usd_per_step == pytest.approx(2.0 * 300 / 3.6e9)
    assert d.usd_per_month == pytest.approx(438.0) and d.price.usd_per_month == d.usd_per_month
    assert d.price.usd_per_job == pytest.approx(60.0)  # 100 hours of baseline work ($200), 30% dearer
    assert "730 hours on 1 GPU" in d.price.assumption
    by_steps = diff_of(tmp_path, {}, {"loader_us": 600.0, "step_us": 1300.0}, usd_per_gpu_hour=2.0,
                       job_steps=1_000_000, hours_per_month=100.0)
    assert by_steps.price.usd_per_job == pytest.approx(1e6 * 2.0 * 300 / 3.6e9)
    assert by_steps.usd_per_month == pytest.approx(60.0)


def test_too_few_steps_say_unknown_not_no_change(tmp_path: Path, gpuscope_home: Path) -> None:
    d = diff_of(tmp_path, {"steps": 3}, {"steps": 3, "loader_us": 600.0, "step_us": 1300.0})
    assert d.significant is None and all(p.significant is None for p in d.parts)
    assert d.test.startswith("weak")


def test_a_name_the_other_side_may_have_left_unlisted_is_not_called_new(tmp_path: Path, gpuscope_home: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profile, "TABLE_ROWS", 1)  # each side lists its one longest kernel and sums the rest
    d = diff_of(tmp_path, {"extra": (("void relu_kernel", 20.0),)},
                {"step_us": 1300.0, "extra": (("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 500.0),)})
    by_name = {k.name: k for k in d.kernels}
    gemm, nccl = by_name["volta_sgemm_128x64_nn"], by_name["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    # The candidate lists only its collective (500 µs a step); its GEMM (400 µs) is in its rest.
    assert gemm.match == "unlisted" and "at most 400 µs per step" in gemm.note
    assert nccl.match == "unlisted" and "at most 20 µs per step" in nccl.note  # the baseline's relu, unlisted
