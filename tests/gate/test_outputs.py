"""The gate's writers on results built in code: JUnit for weak and unknown metrics, Markdown, benchmark JSON."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from dataclasses import replace

from markdown_it import MarkdownIt
from rich.console import Console

from gpuscope.gate.benchmark import to_benchmark
from gpuscope.gate.compare import compare
from gpuscope.gate.config import parse_config
from gpuscope.gate.junit import to_junit
from gpuscope.gate.markdown import to_markdown
from gpuscope.gate.result import GateResult
from gpuscope.gate.terminal import render
from gpuscope.model.codec import to_json
from tests.gate.reports import report
from tests.payloads import RICH, ParsedHtml, controls, payload, shown

BASE = report([100.0, 101, 102], name="base", usd_per_gpu_hour=None)
CAND = report([150.0, 151, 152], name="cand|pr", usd_per_gpu_hour=None)
ALLOW_WEAK = parse_config('weak = "pass"')


def test_junit_fails_a_slowdown_too_few_steps_can_test_and_names_how_many_to_profile() -> None:
    suite = ET.fromstring(to_junit(compare(BASE, CAND))).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    step = cases["step_time"].find("failure")
    assert step is not None and "profile at least 5 steady steps on each side" in (step.get("message") or "")
    assert suite.get("failures") == "1"  # +49.5% step time on 3 vs 3 steps; the cost is unknown (no price)


def test_junit_marks_weak_and_unknown_metrics_skipped_with_their_reason() -> None:
    result = compare(BASE, CAND, ALLOW_WEAK)
    suite = ET.fromstring(to_junit(result)).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    step = cases["step_time"].find("skipped")
    assert step is not None and "only 3 vs 3 steps" in (step.get("message") or "")
    cost = cases["cost_per_1k_steps"].find("skipped")
    assert cost is not None and "not known" in (cost.get("message") or "")
    assert suite.get("failures") == "0" and int(suite.get("skipped") or 0) >= 2
    assert all(c.find("system-out") is not None for c in cases.values())


def test_markdown_escapes_table_cells_and_explains_what_did_not_simply_pass() -> None:
    text = to_markdown(compare(BASE, CAND, ALLOW_WEAK))
    assert text.startswith("### gpuscope gate: PASS")
    assert "cand\\|pr" in text  # a pipe in a run name does not break the table
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(compare(BASE, CAND, ALLOW_WEAK).metrics)
    assert all(row.count(" | ") == 7 for row in rows) and "-0.0" not in text
    page = markdown_html(text)
    assert "<li><strong>Step time (mean)</strong>: +49.5% but only 3 vs 3 steps" in page
    assert ("<td>mean of all the job's steady steps, slow ones included (warm-up steps left out); a job's step "
            "ends when its slowest rank's step does") in page


def test_names_from_traces_are_text_in_markdown_and_the_terminal() -> None:
    name = "[x](http://e.test) <img src=x> *b* [bold red]r[/bold red]"
    result = compare(BASE, replace(CAND, run=replace(CAND.run, name=name)))
    md = markdown_html(to_markdown(result))
    assert "[x](http://e.test) &lt;img src=x&gt; *b*" in md and "<img" not in md and "<a" not in md
    out = io.StringIO()
    render(result, Console(file=out, width=200))
    assert name in out.getvalue()  # rich markup in a name is printed as it is, not applied


def test_a_pass_within_the_threshold_shows_no_p_value_but_the_json_keeps_it() -> None:
    base = report([100.0, 101, 99, 100, 102, 98, 100, 101], name="b")
    cand = report([d * 1.05 for d in [100.0, 101, 99, 100, 102, 98, 100, 101]], name="c")  # +5%: all steps slower
    step = next(m for m in compare(base, cand).metrics if m.key == "step_time")
    assert step.status == "pass" and step.p_value is not None and step.p_value < 0.01  # significant, yet within
    out = io.StringIO()
    render(compare(base, cand), Console(file=out, width=120))
    row = next(line for line in out.getvalue().splitlines() if line.startswith("Step time"))
    assert row.split()[-4:] == ["-", "pass", "(within", "threshold)"] and "<0.001" not in row
    assert "within the +10% threshold" in step.reason
    assert '"p_value":' in to_json(compare(base, cand)).decode()


def test_benchmark_json_leaves_unknown_values_out_and_is_smaller_is_better() -> None:
    entries = to_benchmark(compare(BASE, CAND), prefix="train")
    names = {e["name"] for e in entries}
    assert "train cost per 1,000 steps" not in names  # no price: left out, not 0
    busy = next(e for e in entries if e["name"] == "train GPU not busy")
    assert busy["unit"] == "%" and abs(busy["value"] - 20.0) < 1e-6
    assert next(e for e in entries if e["name"] == "train step time (mean)")["value"] == 0.151


def test_terminal_table_fits_a_ci_log_without_cutting_numbers() -> None:
    out = io.StringIO()
    render(compare(report([100.0] * 6, name="b"), report([200.0] * 6, name="c")), Console(file=out, width=80))
    text = out.getvalue()
    assert "…" not in text and "FAIL" in text and "+100.0%" in text


def markdown_html(text: str) -> str:
    """Markdown as a CommonMark renderer with GitHub's tables, strikethrough and raw HTML turns it into HTML."""
    return str(MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text))


def hostile() -> GateResult:
    """A regression whose run names, metric title, reason, recommendations and note all carry every payload."""
    result = compare(report([100.0] * 6, name=payload()), report([200.0] * 6, name=payload()))
    first = replace(result.metrics[0], title=payload(), reason=payload() + " \ud800\uffff",
                    recommendations=(payload(), payload(), payload()), status="regression", fails=True)
    return replace(result, metrics=(first, *result.metrics[1:]), notes=(payload(),))


def test_markdown_makes_hostile_names_text_not_links_images_or_html() -> None:
    text = to_markdown(hostile())
    parsed = ParsedHtml()
    parsed.feed(markdown_html(text))
    assert parsed.tags <= {"h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "strong"}
    assert parsed.attributes <= {"style"}  # the table's column alignment, nothing else
    rendered = "".join(parsed.text)
    # two run names, the title in the table and in its explanation, the reason, three recommendations, the note
    assert rendered.count(shown(payload())) == 9


def test_junit_is_well_formed_xml_whatever_the_names_hold() -> None:
    data = to_junit(hostile())
    assert b"\x1b" not in data and "\u202e".encode() not in data
    suite = ET.fromstring(data).find("testsuite")  # expat refuses what XML 1.0 forbids
    assert suite is not None
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == shown(payload()) + r" \ud800\uffff"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["candidate"] == props["baseline"] == shown(payload())
    assert shown(payload()) in (failure.text or "")


def test_terminal_table_prints_hostile_names_as_text() -> None:
    out = io.StringIO()
    render(hostile(), Console(file=out, width=400, force_terminal=True, color_system="truecolor"))
    assert controls(out.getvalue().encode()) == []
    assert shown(payload()) in out.getvalue() and RICH in out.getvalue()
