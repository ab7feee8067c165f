"""One formatting module behind every view: the same number reads the same in the terminal, figures and reports."""

from __future__ import annotations

import html

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gpuscope import format as fmt
from gpuscope.figures import cost as figure_cost
from gpuscope.model.diagnosis import JobFacts, RecurringSteps
from gpuscope.reports import html_details


def test_every_view_formats_money_with_the_same_function() -> None:
    assert figure_cost.usd is fmt.usd and html_details.usd is fmt.usd
    assert [fmt.usd(v) for v in (None, 0.0, 0.00042, -0.00042, 0.005, 0.5, 12.345, 1234.5)] == [
        "n/a", "$0.00", "<$0.01", "-<$0.01", "$0.01", "$0.50", "$12.35", "$1,234"]


def test_gpu_time_and_memory_read_in_their_unit() -> None:
    assert [fmt.gpu_time(h) for h in (None, 2.5, 0.2, 1.07 / 3600)] == ["n/a", "2.5 GPU-h", "12.0 GPU-min",
                                                                          "1.07 GPU-s"]
    assert [fmt.gib(b) for b in (None, 0, 2**20 * 50, 2**20 // 20, 2**30 * 3)] == [
        "n/a", "0.0 GiB", "50.0 MiB", "<0.1 MiB", "3.0 GiB"]


def test_evidence_reads_as_words() -> None:
    assert fmt.evidence_item("step_time_us", None) == "step time n/a"
    assert fmt.evidence_item("step_time_us", 177_600.0) == "step time 177.6 ms"
    assert fmt.evidence_item("gpu_busy", 0.566) == "GPU busy 56.6%"
    assert fmt.evidence_item("dataloader_share", 0.334) == "dataloader share 33.4%"


def test_evidence_prints_with_its_unit_once() -> None:
    assert fmt.evidence_item("step_time_us", 177_592.0) == "step time 177.6 ms"
    assert fmt.evidence_item("read_bytes_per_s", 48_321_941.99) == "read 48.3 MB/s"
    assert fmt.evidence_item("peak_allocated_bytes", 3 * 2**30) == "peak allocated 3.0 GiB"
    assert fmt.evidence_item("host_overhead_share", 0.551) == "host overhead share 55.1%"
    assert fmt.evidence_item("step_time_us", None) == "step time n/a"
    assert fmt.evidence_item("optimizer", "SGD") == "optimizer SGD"


def test_the_workload_line_every_view_prints() -> None:
    from dataclasses import replace

    from tests.analyzers.test_cost import rank

    train = replace(rank(), workload="training", workload_evidence="Optimizer.step#SGD.step")
    serve = replace(rank(index=1), workload="inference", workload_evidence="forward ops only")
    assert fmt.workload_line([train]) == "training (Optimizer.step#SGD.step)"
    assert fmt.workload_line([train, serve]) == "inference and training"
    assert fmt.workload_line([rank()]) is None


UNSAFE = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))] + [
    "\u061c", "\u200e", "\u200f", "\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
    "\u2066", "\u2067", "\u2068", "\u2069", "\ud800", "\udfff", "\ufffe", "\uffff"]
"""Written out from the standards: C0, DEL and C1 (ECMA-48), the bidi controls of Unicode's UAX #9, lone
surrogates, and the two non-characters XML 1.0 forbids."""


def test_printable_shows_each_control_character_as_its_escape() -> None:
    for char in UNSAFE:
        code = ord(char)
        assert fmt.printable(char) == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    assert fmt.printable("\x1b]0;title\x07 ok") == r"\x1b]0;title\x07 ok"
    assert fmt.printable("void at::native::vectorized_elementwise_kernel<4, float>") == \
        "void at::native::vectorized_elementwise_kernel<4, float>"
    assert fmt.printable("NVIDIA H100 80GB HBM3 · µs · 東京 · é") == "NVIDIA H100 80GB HBM3 · µs · 東京 · é"
    assert fmt.printable(42) == "42"
    # Characters that hide a difference without being controls: soft hyphen, zero-width space and joiner, no-break
    # space, a private-use code point (a Prometheus error type made of one soft hyphen read as empty before).
    assert fmt.printable("a\xadb\u200bc\u200dd\xa0e\ue000") == r"a\xadb\u200bc\u200dd\xa0e\ue000"


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_printable_leaves_no_unsafe_character_and_changes_nothing_else(text: str) -> None:
    shown = fmt.printable(text)
    assert not set(shown) & set(UNSAFE) and shown.isprintable()
    if text.isprintable():
        assert shown == text


def test_markdown_text_escapes_what_github_reads_too() -> None:
    assert fmt.markdown_text("@team :smile: $x^2$ ~~old~~ <b> a|b") == \
        r"\@team \:smile\: \$x\^2\$ \~\~old\~\~ \<b\> a\|b"
    assert fmt.markdown_text("step 1, of 2; 50% = ok? a/b") == "step 1, of 2; 50% = ok? a/b"  # nothing else


@given(st.text())
def test_markdown_text_renders_as_the_printable_string(text: str) -> None:
    """In a paragraph, a CommonMark renderer (with raw HTML on) gives back exactly the printable text: no tag,
    link, emphasis or entity came out of it."""
    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(
        f"name: {fmt.markdown_text(text)}")
    assert rendered.startswith("<p>") and rendered.endswith("</p>\n")
    # A paragraph's trailing white space (Unicode's too) is not rendered: compare without it.
    assert html.unescape(rendered[3:-5]).rstrip() == f"name: {fmt.printable(text)}".rstrip()


def test_credentials_in_urls_are_masked() -> None:
    words = ["gpuscope", "fleet", "--prometheus", "https://alice:s3cr%40t@prom.example:9090/api", "--selector",
             'job="x"', "git+ssh://token@github.com/org/repo", "http://prom.example/path@v2"]
    assert fmt.command_line(words) == ('gpuscope fleet --prometheus https://***@prom.example:9090/api --selector '
                                       'job="x" git+ssh://***@github.com/org/repo http://prom.example/path@v2')
    assert fmt.without_credentials("https://u:p@ss@host/x") == "https://***@host/x"


def test_a_saving_too_small_per_run_is_shown_per_1000_steps_or_per_hour() -> None:
    from gpuscope.format import saving_text, saving_usd_text
    from gpuscope.model.cost import CostReport
    from gpuscope.model.diagnosis import Recommendation
    rec = Recommendation("x", "x", "d", 0.2, est_saving_usd=0.2 * 0.001)  # 20% of a trace that cost a tenth of a cent
    cost = CostReport(gpu_hours=0.001 / 3.9, usd_per_gpu_hour=3.9, price_source="t", total_usd=0.001,
                      wasted_usd=None, per_1k_steps_usd=0.18, gpu_count=1)
    # a run under an hour: its dollars per hour of its GPUs (0.0002 / (0.001 / 3.9) h), then per 1,000 steps
    assert saving_usd_text(rec, cost) == "~$0.78 per hour, ~$0.04 per 1,000 steps"
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


def test_the_step_line_says_per_step_and_how_the_steps_spread() -> None:
    step_line = fmt.step_line
    assert step_line(JobFacts()) is None
    assert step_line(JobFacts(step_time_us=18_700.0, steady_steps=6)) == "18.7 ms per step (mean of all 6 steady steps)"
    two = JobFacts(step_time_us=18_700.0, steady_steps=2, step_time_median_us=18_700.0)
    assert step_line(two) == "18.7 ms per step (mean of all 2 steady steps; too few to tell a slow step)"
    spread = JobFacts(step_time_us=46_600.0, steady_steps=12, step_time_median_us=21_700.0, step_time_p90_us=33_100.0,
                      step_time_spread_us=4_600.0, outlier_threshold_us=37_800.0, outlier_step_count=1,
                      typical_step_us=22_700.0, typical_steps=11)
    assert step_line(spread) == ("46.6 ms per step (mean of all 12 steady steps; median 21.7 ms, p90 33.1 ms, spread "
                                 "4.6 ms; typical step 22.7 ms without the outlier)")


def test_slow_steps_that_recur_read_as_what_they_are() -> None:
    every = RecurringSteps(steps=(3, 7, 11, 15), period=4, per_period=1, extra_us=60_000.0, per_step_us=15_000.0,
                           reference_us=30_000.0, steady_steps=16)
    assert fmt.recurring_line(every) == "every 4th step +60.0 ms: +15.0 ms a step on average"
    some = RecurringSteps(steps=(2, 9), period=None, per_period=0, extra_us=55_000.0, per_step_us=9_166.7,
                          reference_us=20_000.0, steady_steps=12)
    assert fmt.recurring_line(some) == "2 of 12 steps +55.0 ms: +9.2 ms a step on average"
    assert [fmt.ordinal(n) for n in (2, 3, 4, 11, 12, 21, 22)] == ["2nd", "3rd", "4th", "11th", "12th", "21st", "22nd"]
