"""The gate fails closed: two runs that are not runs of one job are not compared, and the reason is named.

Real traces from sample_traces/, copied and broken the ways a CI job breaks them (tests/gate/edits.py); the
expected reasons follow from what each test broke, not from the gate's output.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from gpuscope.gate.compare import compare
from gpuscope.gate.config import parse_config
from gpuscope.gate.metrics import US_PER_HOUR
from gpuscope.gate.result import GateResult
from gpuscope.model.rank import DeviceBusy
from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.gate import edits
from tests.gate.reports import analysed, report

DLRM_RANKS = set(range(8))


@pytest.fixture(scope="module")
def dlrm() -> Report:
    return analysed(SAMPLES / "dlrm_8rank")


@pytest.fixture(scope="module")
def dlrm_rank3_cut(tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = edits.copy("dlrm_8rank", tmp_path_factory.mktemp("cut") / "dlrm")
    edits.cut_short(edits.rank_file(folder, 3))
    return analysed(folder)


def _codes(result: GateResult) -> dict[str, str]:
    return {m.code: m.side for m in result.mismatches}


def test_a_candidate_rank_file_cut_short_fails_instead_of_reading_as_cheaper(dlrm: Report,
                                                                              dlrm_rank3_cut: Report) -> None:
    assert {r.rank for r in dlrm_rank3_cut.ranks} == DLRM_RANKS - {3}
    result = compare(dlrm, dlrm_rank3_cut)
    assert not result.passed and not result.comparable and result.metrics == ()
    assert _codes(result) == {"unreadable_rank": "candidate"}
    (mismatch,) = result.mismatches
    assert "worker3_" in mismatch.reason and "7 of its 8 ranks" in mismatch.reason and mismatch.partial


def test_a_baseline_rank_file_cut_short_fails_on_that_and_not_as_a_regression(dlrm: Report,
                                                                              dlrm_rank3_cut: Report) -> None:
    result = compare(dlrm_rank3_cut, dlrm)
    assert not result.passed and _codes(result) == {"unreadable_rank": "baseline"} and not result.failures


def test_allow_partial_compares_the_ranks_both_runs_have(dlrm: Report, dlrm_rank3_cut: Report) -> None:
    # One profiler step a side: too few to tell anything, so only with weak tests allowed does it pass.
    assert not compare(dlrm, dlrm_rank3_cut, allow_partial=True).passed
    result = compare(dlrm, dlrm_rank3_cut, parse_config('weak = "pass"'), allow_partial=True)
    assert result.passed and result.comparable and result.partial and result.ranks == (0, 1, 2, 4, 5, 6, 7)
    assert any("--allow-partial" in n for n in result.notes)
    metrics = {m.key: m for m in result.metrics}
    # A job's step lasts until its slowest rank's: over the seven ranks both runs read, on each side.
    seven = [r for r in dlrm.ranks if r.rank != 3]
    step_us = statistics.fmean(max(s.duration_us for s in step) for step in zip(*(r.per_step for r in seven)))
    assert metrics["step_time"].baseline == pytest.approx(step_us) == metrics["step_time"].candidate
    price = dlrm.cost.usd_per_gpu_hour if dlrm.cost is not None else None
    assert price is not None  # a V100: the catalog prices it
    assert metrics["cost_per_1k_steps"].candidate == pytest.approx(step_us * 7 * price / US_PER_HOUR * 1000)
    assert metrics["cost_per_1k_steps"].change == pytest.approx(0.0)  # not cheaper: the same seven GPUs each side


def test_a_missing_rank_file_fails_by_the_world_size_the_others_state(dlrm: Report, tmp_path: Path) -> None:
    folder = edits.copy("dlrm_8rank", tmp_path / "dlrm")
    edits.rank_file(folder, 3).unlink()
    result = compare(dlrm, analysed(folder))
    assert not result.passed and _codes(result) == {"missing_ranks": "candidate"}
    assert "lacks rank 3: 7 of its 8 ranks" in result.mismatches[0].reason


def test_a_baseline_with_more_gpus_fails(dlrm: Report, tmp_path: Path) -> None:
    one = edits.copy("dlrm_8rank", tmp_path / "one")
    for rank in range(1, 8):
        edits.rank_file(one, rank).unlink()
    result = compare(dlrm, analysed(one))
    assert not result.passed and _codes(result) == {"missing_ranks": "candidate"}
    assert "ranks 1, 2, 3, 4, 5, 6, 7" in result.mismatches[0].reason
    four = edits.copy("dlrm_8rank", tmp_path / "four")
    edits.set_world_size(four, 4)
    smaller = analysed(four)
    assert {r.world_size for r in smaller.ranks} == {4}
    for allow in (False, True):  # another job size is another job: no flag makes it a partial comparison
        result = compare(dlrm, smaller, allow_partial=allow)
        assert not result.passed and _codes(result) == {"gpu_count": "both"}
        assert "8 ranks and the candidate of 4" in result.mismatches[0].reason


def test_another_gpu_model_fails_a_cpu_run_against_a_v100_one() -> None:
    cpu, v100 = analysed(SAMPLES / "cpu_mlp_aa" / "run_a"), analysed(SAMPLES / "resnet50_workers4")
    result = compare(v100, cpu)
    assert not result.passed and _codes(result) == {"gpu_count": "both", "gpu_model": "both"}  # a CPU job: no GPU
    model = next(m for m in result.mismatches if m.code == "gpu_model")
    assert "Tesla V100-DGXS-32GB" in model.reason and "no GPU" in model.reason
    assert not compare(v100, cpu, allow_partial=True).passed


def test_another_workload_fails_inference_against_training_on_one_h200() -> None:
    training, serving = analysed(SAMPLES / "h200" / "transformer_bf16"), analysed(SAMPLES / "h200" / "decode_bs4")
    result = compare(training, serving)
    assert not result.passed and _codes(result) == {"workload": "both"}
    assert "the baseline is training and the candidate inference" in result.mismatches[0].reason


def test_a_baseline_without_steady_steps_fails_instead_of_passing_a_slower_candidate(tmp_path: Path) -> None:
    folder = edits.copy("resnet50_workers4", tmp_path / "workers4")
    assert edits.drop_profiler_steps(folder) == 6
    result = compare(analysed(folder), analysed(SAMPLES / "resnet50_dataloader_bound"))
    assert not result.passed and _codes(result) == {"no_steady_steps": "baseline"}
    assert "no profiler steps" in result.mismatches[0].reason


def test_only_warm_up_steps_are_no_steady_steps() -> None:
    warm = report([100.0] * 6, name="b", warmup=6)
    result = compare(warm, report([200.0] * 6, name="c"))
    assert not result.passed and _codes(result) == {"no_steady_steps": "baseline"}
    assert "6 profiler step(s) are all start-up or warm-up" in result.mismatches[0].reason


def test_an_unknown_report_schema_fails_by_name_and_nothing_else_is_read() -> None:
    base = report([100.0] * 6, name="b")
    result = compare(base, replace(base, schema="gpuscope.report/9", ranks=()))
    assert not result.passed and _codes(result) == {"report_schema": "candidate"}
    assert "'gpuscope.report/9'" in result.mismatches[0].reason


def test_a_json_file_that_is_no_trace_is_no_missing_rank(tmp_path: Path) -> None:
    folder = edits.copy("h200/resnet50_workers12", tmp_path / "workers12")
    (folder / "meta.json").write_text('{"variant": "resnet50_workers12", "num_workers": 12}')  # the job's notes
    a, b = analysed(folder), analysed(SAMPLES / "h200" / "resnet50_workers12_b")
    assert any("meta.json" in w for w in a.warnings) and a.unread_rank_files == ()
    result = compare(a, b)
    assert result.comparable and result.mismatches == ()


def test_ranks_that_differ_without_a_world_size_are_a_partial_comparison() -> None:
    two, one = report([100.0] * 6, name="two", ranks=2), report([100.0] * 6, name="one")
    result = compare(two, one)
    assert not result.passed and _codes(result) == {"ranks_differ": "both"}
    assert "only the baseline has rank 1" in result.mismatches[0].reason
    assert compare(two, one, allow_partial=True).passed


def test_a_gpu_the_trace_does_not_name_is_not_taken_for_a_named_one() -> None:
    unnamed, named = analysed(SAMPLES / "resnet50_old_schema"), analysed(SAMPLES / "resnet50_workers4")
    assert {r.device for r in unnamed.ranks} == {None} and all(r.devices for r in unnamed.ranks)
    result = compare(named, unnamed)
    assert _codes(result) == {"gpu_model": "both"} and "a GPU the trace does not name" in result.mismatches[0].reason
    assert compare(unnamed, unnamed).comparable


def test_a_workload_one_run_cannot_tell_is_another_workload() -> None:
    base = report([100.0] * 6, name="b")
    training = replace(base, ranks=tuple(replace(r, workload="training") for r in base.ranks))
    result = compare(training, base)
    assert _codes(result) == {"workload": "both"} and "cannot tell" in result.mismatches[0].reason


def test_a_rank_on_another_number_of_gpus_is_another_gpu_count() -> None:
    def on(*devices: int) -> Report:
        rep = report([100.0] * 6, name="b")
        return replace(rep, ranks=tuple(replace(r, devices=tuple(DeviceBusy(d, 0.8, "H200") for d in devices))
                                        for r in rep.ranks))

    base, two = on(0), on(0, 1)
    assert compare(base, base).comparable
    result = compare(base, two, allow_partial=True)
    assert not result.passed and _codes(result) == {"gpu_count": "both"}


def test_a_run_without_a_trace_has_no_steady_steps() -> None:
    live = replace(report([100.0] * 6, name="live"), ranks=())
    result = compare(live, report([100.0] * 6, name="c"))
    assert not result.passed and _codes(result) == {"no_steady_steps": "baseline"}
    assert any("it has no trace" in m.reason for m in result.mismatches)
