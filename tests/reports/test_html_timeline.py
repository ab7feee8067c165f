"""The report's timeline links: the slowest and the median step embedded as gzipped data URLs that decode to
the step traces themselves, escaped; past the size limit, the command that writes them instead."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path

import pytest

from gpuscope.analyzers.trace.step_pick import StepWindow
from gpuscope.reports import html_timeline
from gpuscope.reports.html_timeline import timeline_section
from gpuscope.reports.timeline import StepFile
from gpuscope.traces import read_trace
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES
from tests.reports.test_timeline import plugin_picks

LINK = re.compile(r'<a download="([^"]+)" href="data:application/gzip;base64,([A-Za-z0-9+/=]+)">')


def test_the_report_embeds_the_slowest_and_the_median_step(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = gpuscope("report", str(SAMPLES / "resnet50_workers4"), "-o", str(out), home=tmp_path)
    assert result.returncode == 0, result.stderr
    links = LINK.findall(out.read_text(encoding="utf-8"))
    assert [name.split(".")[2:4] for name, _ in links] == [[f"step{n}", why] for n, why in plugin_picks(5)]
    for name, data in links:
        raw = gzip.decompress(base64.b64decode(data))
        doc = json.loads(raw)
        assert doc["gpuscope"]["step"] == name.split(".")[2].removeprefix("step")
        path = tmp_path / name
        path.write_bytes(base64.b64decode(data))
        assert read_trace(path).events.ts_ns.size == sum(e["ph"] == "X" for e in doc["traceEvents"])


def files(size: int) -> tuple[StepFile, ...]:
    step = StepWindow(rank=0, name='1"><script>alert(1)</script>', start_ns=0, end_ns=2_000_000, why=("slowest",))
    return (StepFile(step=step, file_name='a".json.gz', data=gzip.compress(b"{}") + b"x" * size),)


def test_names_in_the_section_are_escaped() -> None:
    section = timeline_section(files(0), "<run>", has_trace=True)
    assert "<script>" not in section and "&lt;script&gt;" in section and "&lt;run&gt;" in section
    assert 'download="a&#34;.json.gz"' in section
    assert html.unescape(section).count("<script>alert(1)</script>") == 1  # the text, shown as text


def test_too_large_to_embed_gives_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_timeline, "EMBED_MAX_BYTES", 100)
    section = timeline_section(files(200), "20260101-000000-abcdef", has_trace=True)
    assert "data:" not in section and "gpuscope timeline 20260101-000000-abcdef" in section


def test_no_section_without_a_trace_and_a_line_without_steps() -> None:
    assert timeline_section((), "r", has_trace=False) == ""
    assert "No profiler steps" in timeline_section((), "r", has_trace=True)
