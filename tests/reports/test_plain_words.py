"""Every view of every bundled trace speaks plain words: no internal keys (``step_time_us=``, ``*_share``), no
arrows between codes, no doubled words or stray spaces before punctuation, no "$0.0000" or a 1970 date; and the
terminal view, at 80 columns in a pipe, wraps every sentence of the report instead of cutting it."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from gpuscope.console import SafeConsole
from gpuscope.dashboards.data import RunData
from gpuscope.dashboards.run_page import layout
from gpuscope.model.report import Report
from gpuscope.model.run import RunMeta
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.reports.terminal import render
from tests.analyzers.bundled import ALL, bundled_report

INTERNAL = (re.compile(r"\w_us="), re.compile(r"\w_share\b"), re.compile(r"[a-z]_[a-z]+ ->"),
            re.compile(r"\$0\.0000"), re.compile(r"\b1970-"), re.compile(r"\brun run\b"),
            re.compile(r"e-0\d GPU-h"))
DOUBLED = re.compile(r"\b([A-Za-z]{2,}) \1\b", re.IGNORECASE)
SPACE_BEFORE_PUNCTUATION = re.compile(r"[^\s] +[,;:!?](\s|$)|[A-Za-z] +\.(\s|$)")


def _names(report: Report) -> list[str]:
    """Names that come from the trace (kernels, operators, frames): they are the user's text, not ours."""
    return sorted({k.name for r in report.ranks for k in r.top_kernels}, key=len, reverse=True)


def _problems(text: str, report: Report) -> list[str]:
    for name in _names(report):
        text = text.replace(name, " ")
    flat = " ".join(text.split())
    found = [p.pattern for p in INTERNAL if p.search(flat)]
    found += [f"doubled: {m.group(0)!r}" for m in DOUBLED.finditer(flat)]
    found += [f"space before punctuation: {flat[max(m.start() - 30, 0):m.end() + 5]!r}"
              for m in SPACE_BEFORE_PUNCTUATION.finditer(flat)]
    return found


def _terminal(report: Report, width: int = 80) -> str:
    out = io.StringIO()
    render(report, SafeConsole(file=out, width=width, force_terminal=False, color_system=None))
    return out.getvalue()


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _html_text(report: Report) -> str:
    parser = _Text()
    parser.feed(render_html(ReportDocument(report=report)))
    return " ".join(parser.parts)


def _dash_text(component: object) -> str:
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_dash_text(c) for c in component)
    children = getattr(component, "children", None)
    data = getattr(component, "rowData", None)  # a table's rows
    rows = " ".join(" ".join(str(v) for v in row.values()) for row in data) if isinstance(data, list) else ""
    return ("" if children is None else _dash_text(children)) + " " + rows


def _dashboard_text(report: Report) -> str:
    run = report.run
    meta = RunMeta(id=run.id or "20260101-000000-abcdef", name=run.name or "trace", kind="trace",
                   status="complete", started_ns=run.started_ns or 0)
    return _dash_text(layout(RunData(meta=meta, report=report, samples=pd.DataFrame(), stacks=None)))


@pytest.mark.parametrize("name", ALL)
def test_every_view_speaks_plain_words(name: str) -> None:
    report = bundled_report(name)
    # The terminal at a width that wraps nothing: a long path folded at a line's end would read as "x.gz : 3"
    # (the wrapping itself is the next test's).
    for view, text in (("terminal", _terminal(report, width=2000)), ("HTML report", _html_text(report)),
                       ("dashboard", _dashboard_text(report))):
        assert not _problems(text, report), (view, _problems(text, report))


@pytest.mark.parametrize("name", ALL)
def test_the_terminal_at_80_columns_wraps_every_sentence_whole(name: str) -> None:
    report = bundled_report(name)
    text = _terminal(report, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(w for w in re.sub(r"[│╭╮╰╯─]", " ", text).split())
    for sentence in [f.title for f in report.findings] + [x for r in report.recommendations
                                                          for x in (r.title, r.detail, r.reasoning or "")]:
        assert " ".join(sentence.split()) in flat, sentence


def test_the_checks_catch_what_they_look_for() -> None:
    report = bundled_report("resnet50_dataloader_bound")
    for bad in ("step_time_us=n/a", "dataloader_share 33%", "host_overhead -> data_loading", "cost ~$0.0000",
                "started 1970-01-01", "gpuscope run run 1", "saves $9.09 per per hour", "$3.90/GPU-h , ~$0.0003",
                "costs 3.504e-05 GPU-h"):
        assert _problems(bad, report), bad
    assert not _problems("GPU busy 56.6% · step time 177.6 ms, per hour $3.90: fine (really).", report)
