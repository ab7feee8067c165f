"""A failing gate explains the change as `gpuscope diff` does: in the terminal, JUnit, the Markdown summary and the
JSON; a passing gate adds nothing."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from gpuscope.changes import explain
from gpuscope.format import markdown_text
from gpuscope.gate.compare import compare
from gpuscope.gate.markdown import to_markdown
from gpuscope.gate.terminal import render
from gpuscope.model.report import Report
from gpuscope.reports.diff import headline
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

FAST = str(SAMPLES / "resnet50_workers4")
SLOW = str(SAMPLES / "resnet50_dataloader_bound")


def test_a_failing_gate_explains_the_change_in_every_output(tmp_path: Path) -> None:
    summary, junit = tmp_path / "summary.md", tmp_path / "gate.xml"
    result = gpuscope("gate", SLOW, "--baseline", FAST, "--junit", str(junit), home=tmp_path,
                      GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 1, result.stderr
    explained = json.loads(gpuscope("diff", FAST, SLOW, "--json", home=tmp_path).stdout)
    data = next(p for p in explained["parts"] if p["stage"] == "data_loading")
    out = result.stdout
    assert out.index("FAIL:") < out.index("What changed (gpuscope diff):")
    # The step time: the mean of all six steps of each run (two of num_workers=4's are slow, 182 and 163 ms).
    assert "the step got 36.5 ms slower (141.1 ms -> 177.6 ms, beyond noise): +58.1 ms data wait" in out
    assert "set-up: DataLoader worker processes (num_workers>0) -> in-process (num_workers=0)" in out

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    texts = [f.text or "" for f in suite.iter("failure")]
    assert len(texts) > 1 and sum("what changed (gpuscope diff):" in t for t in texts) == 1
    assert "+58.1 ms data wait" in texts[0]

    md = summary.read_text()
    assert "#### What changed (gpuscope diff)" in md and f"- {markdown_text('data wait: +58.1 ms per step')}" in md

    gate_json = json.loads(gpuscope("gate", SLOW, "--baseline", FAST, "--json", home=tmp_path).stdout)
    gated = gate_json["explanation"]
    assert gated["parts"] == explained["parts"] and gated["usd_per_month"] == explained["usd_per_month"]
    assert next(p for p in gated["parts"] if p["stage"] == "data_loading") == data


def test_a_passing_gate_explains_nothing(tmp_path: Path) -> None:
    result = gpuscope("gate", FAST, "--baseline", SLOW, "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["explanation"] is None
    shown = gpuscope("gate", FAST, "--baseline", SLOW, home=tmp_path)
    assert shown.returncode == 0 and "What changed" not in shown.stdout


def test_names_in_the_explanation_stay_text(workers4: Report, loader_bound: Report) -> None:
    name = "<img src=x> [x](http://e.test)"
    hostile = replace(loader_bound, run=replace(loader_bound.run, name=name))
    result = replace(compare(workers4, hostile), explanation=explain(workers4, hostile))
    assert not result.passed and result.explanation is not None
    md = to_markdown(result)
    assert md.count("<img") == md.count("\\<img") > 0 and "#### What changed" in md
    out = io.StringIO()
    render(result, Console(file=out, width=200))
    assert headline(result.explanation) in out.getvalue()
