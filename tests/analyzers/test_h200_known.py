"""Eight loops recorded on an H200 whose bottleneck is known by construction (sample_traces/h200), checked against
what each loop measured with its own clock (sample_traces/h200/measured): the answers come from how the loops
were built and timed, not from gpuscope."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

from gpuscope.model.report import Report
from tests.analyzers.bundled import H200, bundled_report
from tests.conftest import SAMPLES

ACTIVE = slice(7, 13)
"""The six recorded steps: 5 skipped and 2 warm-up before them (record.py)."""


def measured(variant: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SAMPLES / "h200" / "measured" / f"{variant}.json").read_text())
    return doc


def loop_step_s(variant: str) -> float:
    """The loop's own mean wall time per recorded step."""
    return statistics.fmean(measured(variant)["measured_by_the_loop"]["wall_s_per_step"][ACTIVE])


def loop_wait_share(variant: str) -> float:
    """The share of the recorded steps' wall time the loop spent blocked in next() for its batch."""
    m = measured(variant)["measured_by_the_loop"]
    return sum(m["data_wait_s_per_step"][ACTIVE]) / sum(m["wall_s_per_step"][ACTIVE])


def report(variant: str) -> Report:
    return bundled_report(f"h200/{variant}")


def codes(r: Report) -> set[str]:
    return {x.code for x in r.recommendations}


def test_every_h200_folder_is_covered() -> None:
    assert {name.split("/")[1] for name in H200} == {p.stem for p in (SAMPLES / "h200" / "measured").glob("*.json")}


@pytest.mark.parametrize("variant", [n.split("/")[1] for n in H200])
def test_step_time_is_what_the_loop_timed(variant: str) -> None:
    """The job's step time agrees with the loop's own clock within 10%: the trace's step runs to the end of the GPU
    work it launched (the TensorBoard plugin's span) and holds the profiler's own step bookkeeping, which weigh
    most where a step launches thousands of tiny kernels (mlp_launch_bound: 53.6 against 50.3 ms) or lasts a few
    milliseconds (decode_bs4: 5.0 against 4.6 ms); the ResNet-50 steps agree within 1%."""
    facts = report(variant).facts
    assert facts is not None and facts.step_time_us is not None
    assert facts.step_time_us / 1e6 == pytest.approx(loop_step_s(variant), rel=0.10)


def test_a_loader_in_the_training_process_is_data_loading_as_long_as_the_loop_waited() -> None:
    r = report("resnet50_workers0")
    assert r.verdict.primary == "data_loading" and r.verdict.confidence >= 0.7
    assert r.stage_shares["data_loading"] == pytest.approx(loop_wait_share("resnet50_workers0"), abs=0.03)
    assert "dataloader_num_workers" in codes(r)


@pytest.mark.parametrize("variant", ["resnet50_workers12", "resnet50_workers12_b"])
def test_twelve_workers_leave_no_data_wait(variant: str) -> None:
    r = report(variant)
    assert loop_wait_share(variant) < 0.01
    assert r.verdict.primary != "data_loading" and (r.stage_shares["data_loading"] or 0.0) < 0.01
    assert not codes(r) & {"dataloader_num_workers", "faster_loading"}


def test_the_worker_saving_model_on_a_pair_it_was_not_fitted_on() -> None:
    """The worker-contention constant (0.2) was fitted on the V100 ResNet-50 pair; here, 12 workers on a 16-core
    host, the loop's own clock measured 84% and 86% shorter steps. The model says 79%: it under-predicts by 4 to
    7 points here (with cores to spare, workers slow the main process less than on the V100 host)."""
    (rec,) = [x for x in report("resnet50_workers0").recommendations if x.code == "dataloader_num_workers"]
    assert rec.est_step_saving is not None
    before = loop_step_s("resnet50_workers0")
    for after in ("resnet50_workers12", "resnet50_workers12_b"):
        measured_saving = 1 - loop_step_s(after) / before
        assert rec.est_step_saving == pytest.approx(measured_saving, abs=0.07)
        assert rec.est_step_saving < measured_saving  # conservative, never promising more than came


def test_thousands_of_tiny_kernels_are_host_overhead_with_graph_and_fused_optimizer_advice() -> None:
    r = report("mlp_launch_bound")
    assert r.verdict.primary == "host_overhead"
    assert {"cuda_graphs", "fused_optimizer"} <= codes(r)  # Adam(foreach=False) has a fused version
    # torch.optim's single-tensor Adam reads its CPU step counter with .item(): no device sync, none reported.
    (sync,) = [f for f in r.findings if f.code == "sync_calls"] or [None]
    assert sync is None or sync.evidence["item_calls"] == 0
    assert "remove_syncs" not in codes(r)


def test_item_calls_are_counted_one_for_one() -> None:
    """13 .item() reads per step (12 activation norms and the loss) over 6 recorded steps."""
    r = report("mlp_item_syncs")
    assert r.verdict.primary == "host_overhead"
    (sync,) = [f for f in r.findings if f.code == "sync_calls"]
    assert sync.evidence["item_calls"] == 13 * 6
    assert "remove_syncs" in codes(r)
    assert "fused_optimizer" not in codes(r)  # AdamW(fused=True) already


def test_pageable_copies_are_memory_with_pin_memory_advice() -> None:
    r = report("pageable_h2d")
    assert r.verdict.primary == "memory"
    (copies,) = [f for f in r.findings if f.code == "pageable_memcpy"]
    assert copies.evidence["pageable_memcpy_count"] == 6  # one 128 MiB copy per recorded step
    assert "pin_memory" in codes(r)


def test_a_bf16_transformer_at_a_large_batch_is_the_healthy_case() -> None:
    r = report("transformer_bf16")
    assert r.verdict.primary == "gpu_compute"
    assert r.facts is not None and (r.facts.gpu_busy or 0.0) > 0.9
    assert not codes(r) & {"amp", "tf32"}  # already bf16 on tensor cores


def test_a_batch_of_four_decode_is_served_and_launch_bound() -> None:
    r = report("decode_bs4")
    assert {rank.workload for rank in r.ranks} == {"inference"}
    assert r.verdict.primary == "host_overhead"
    assert {"dynamic_batching", "cuda_graphs"} <= codes(r)
    assert not codes(r) & {"larger_batch", "fused_optimizer", "dataloader_num_workers"}
