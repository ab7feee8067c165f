"""One formatting module behind every view: the same number reads the same in the terminal, figures and reports."""

from __future__ import annotations

from gpuscope import format as fmt
from gpuscope.figures import cost as figure_cost
from gpuscope.reports import format as report_format


def test_every_view_formats_money_with_the_same_function() -> None:
    assert figure_cost.usd is fmt.usd and report_format.usd is fmt.usd
    assert [fmt.usd(v) for v in (None, 0.0, 0.00042, 0.5, 12.345, 1234.5)] == [
        "n/a", "$0.00", "$0.0004", "$0.50", "$12.35", "$1,234"]


def test_evidence_prints_with_its_unit_once() -> None:
    assert fmt.evidence_item("step_time_us", 177_592.0) == "step_time=177.6 ms"
    assert fmt.evidence_item("read_bytes_per_s", 48_321_941.99) == "read=48.3 MB/s"
    assert fmt.evidence_item("peak_allocated_bytes", 3 * 2**30) == "peak_allocated=3.0 GiB"
    assert fmt.evidence_item("host_overhead_share", 0.551) == "host_overhead_share=55.1%"
    assert fmt.evidence_item("step_time_us", None) == "step_time_us=n/a"
    assert fmt.evidence_item("optimizer", "SGD") == "optimizer=SGD"


def test_the_workload_line_every_view_prints() -> None:
    from dataclasses import replace

    from tests.analyzers.test_cost import rank

    train = replace(rank(), workload="training", workload_evidence="Optimizer.step#SGD.step")
    serve = replace(rank(index=1), workload="inference", workload_evidence="forward ops only")
    assert fmt.workload_line([train]) == "training (Optimizer.step#SGD.step)"
    assert fmt.workload_line([train, serve]) == "inference and training"
    assert fmt.workload_line([rank()]) is None


def test_a_saving_too_small_per_run_is_shown_per_1000_steps_or_per_hour() -> None:
    from gpuscope.format import saving_text, saving_usd_text
    from gpuscope.model.report import CostReport, Recommendation
    rec = Recommendation("x", "x", "d", 0.2, est_saving_usd=0.2 * 0.001)  # 20% of a trace that cost a tenth of a cent
    cost = CostReport(gpu_hours=0.001 / 3.9, usd_per_gpu_hour=3.9, price_source="t", total_usd=0.001,
                      wasted_usd=None, per_1k_steps_usd=0.18, gpu_count=1)
    assert saving_usd_text(rec, cost) == "~$0.04 per 1,000 steps"
    no_steps = CostReport(gpu_hours=0.001 / 3.9, usd_per_gpu_hour=3.9, price_source="t", total_usd=0.001,
                          wasted_usd=None, gpu_count=8)
    assert saving_usd_text(rec, no_steps) == "~$6.24 per hour"  # 20% of 8 GPUs at $3.90
    big = Recommendation("x", "x", "d", 0.2, est_saving_usd=78.0)
    job = CostReport(gpu_hours=100, usd_per_gpu_hour=3.9, price_source="t", total_usd=390.0, wasted_usd=None,
                     projected_usd=390.0)
    assert saving_text(big, job) == "saves ~20% of step time, ~$78.00 over the job"


def test_no_bundled_trace_prints_a_zero_dollar_saving() -> None:
    from gpuscope.format import saving_text
    from tests.analyzers.bundled import ALL, bundled_report
    for name in ALL:
        report = bundled_report(name)
        for rec in report.recommendations:
            text = saving_text(rec, report.cost)
            assert "$0.00 " not in text + " " and "$0.000" not in text, (name, rec.code, text)
