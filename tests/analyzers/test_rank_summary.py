"""A rank's summary: what its worker computes once, and the same rank under another number."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuscope.analyzers.diagnosis.evidence import trace_evidence
from gpuscope.analyzers.efficiency.count import count_rank
from gpuscope.analyzers.ranks import renumbered, summarize_rank
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.analyzers.trace.startup import plan_steps
from gpuscope.traces import read_trace
from tests import builders as b
from tests.conftest import SAMPLES

TRACES = [next((SAMPLES / "dlrm_8rank").glob("worker3_*.json.gz")),
          SAMPLES / "torch_compile_cpu" / "first_call.json.gz", SAMPLES / "dev" / "mi210_gpu_only.json.gz",
          next((SAMPLES / "cpu_mlp_aa" / "run_a").glob("*.json.gz"))]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_a_summary_holds_what_each_analysis_gives_on_its_own(path: Path) -> None:
    trace = read_trace(path)
    summary = summarize_rank(trace)
    # One step plan and one set of roles, shared: the same figures, and the FLOPs counted over the same steps.
    assert replace(summary.report, efficiency=None) == analyze_rank(trace)
    assert summary.report.efficiency == count_rank(trace, plan_steps(trace))
    assert summary.evidence == trace_evidence(trace)
    assert summary.facts.source == trace.source and summary.report.rank == summary.evidence.rank == trace.rank


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_renumbering_a_summary_is_summarizing_the_renumbered_trace(path: Path) -> None:
    trace = read_trace(path)
    assert renumbered(summarize_rank(trace), 41) == summarize_rank(replace(trace, rank=41))


def test_a_rank_that_used_a_gpu_it_does_not_name_is_one_gpu_numbered_as_the_rank(tmp_path: Path) -> None:
    # CUDA calls and GPU memory, but no GPU event and no deviceProperties: which device it was is unknown
    doc = b.trace([b.cpu_op("aten::empty", 0, 50), b.launch(10, 20, 1, name="cudaMalloc"),
                   b.memory(12, 1024, 1024)], device_memory=None)
    trace = read_trace(b.write(tmp_path / "t.json", doc))
    facts = summarize_rank(trace).facts
    assert facts.gpu_from_rank and [g.index for g in facts.gpus] == [trace.rank]
    assert [g.index for g in renumbered(summarize_rank(trace), 5).facts.gpus] == [5]


@pytest.mark.parametrize("path", TRACES[1::2], ids=lambda p: p.parent.name)
def test_a_rank_without_gpu_activity_is_no_gpu(path: Path) -> None:
    trace = read_trace(path)
    summary = summarize_rank(trace)
    assert summary.facts.gpus == () and not summary.facts.gpu_from_rank
    assert summary.report.cpu_only and summary.report.gpu_count == 0
    assert renumbered(summary, 5).facts.gpus == ()
