"""Names from traces, labels, command lines and users in every terminal view: printed as text, never as rich markup
or as escape sequences. The views are rendered as a terminal gets them (colours on), and the real command runs in
a pseudo-terminal; only rich's own colour sequences may reach it."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from gpuscope.cli.live_view import LiveView
from gpuscope.collectors.sampler import Tick
from gpuscope.collectors.stacks import StackBatch
from gpuscope.fleet import analyze_fleet
from gpuscope.fleet.terminal import render_fleet
from gpuscope.model import schema
from gpuscope.model.fleet import UTIL
from gpuscope.reports.terminal import render
from tests.fleet.test_analysis import fleet, price
from tests.payloads import ANSI, ANSI_SHOWN, RICH, SGR, controls, hostile_report, in_pty, payload, payload_trace, shown


def terminal() -> tuple[Console, io.StringIO]:
    """A plain rich Console as a caller would pass one: a colour terminal, wide enough that nothing wraps."""
    out = io.StringIO()
    return Console(file=out, width=6000, force_terminal=True, color_system="truecolor"), out


def test_every_part_of_the_report_view_prints_hostile_text_as_text() -> None:
    console, out = terminal()
    report = hostile_report(payload())
    render(report, console)
    render(replace(report, ranks=report.ranks[:1]), console)  # one rank: its panel names the top kernel
    text = out.getvalue()
    assert controls(text.encode()) == []
    assert "\x1b]" not in text  # no OSC at all: no title, no hyperlink
    assert f"{shown(payload())} resnet <b>bold</b>" in text  # the run name in the header, whole
    assert f"{shown(payload())} Tesla V100-DGXS-32GB" in text  # the GPU, in the header and each rank's title
    assert f"warning: {shown(payload())} rank 1" in text
    assert f"{shown(payload())} Use more DataLoader workers" in text
    assert "top kernel: " + ANSI_SHOWN[:40] in text and "top stack: " + ANSI_SHOWN[:40] in text  # cut short
    assert text.count(RICH) >= 10


def test_the_live_view_prints_the_command_and_frames_as_text() -> None:
    view = LiveView(title=f"gpuscope run · {payload()}", pid=4242)
    frames = (f"{payload()} (train.py:1)", f"{ANSI} (queue.py:180)")
    view.update(Tick(ts_ns=1, rows=[(1, schema.NVML, 0, schema.NO_PID, schema.GPU_UTIL, 0.5)],
                     stacks=StackBatch(rows=[(1, 4242, 4242, "active", 7)], stacks={7: frames})))
    console, out = terminal()
    console.print(view)
    text = out.getvalue()
    assert controls(text.encode()) == []
    assert f"gpuscope run · {shown(payload())}" in text and f"{ANSI_SHOWN} (queue.py:180)" in text
    assert text.count(RICH) == 2


def test_the_fleet_view_prints_labels_as_text() -> None:
    rows = {(f"{payload()} node-b", 1, f"{payload()} serve-0"): {UTIL: [0.0, 0.0, 0.0, 0.0]},
            ("node-a", 0, "train-0"): {UTIL: [0.9, 0.8, 0.9, 0.85]}}
    data = replace(fleet(rows, model=f"{payload()} H100"), prometheus_url="https://alice:pr0m-pa55@prom.example:9090")
    report = analyze_fleet(data, prices={f"{payload()} H100": price(6.88)})
    console, out = terminal()
    render_fleet(report, console, run_id="20261203-000000-aaaaaa")
    text = out.getvalue()
    assert controls(text.encode()) == []
    assert "https://***@prom.example:9090" in text and "pr0m-pa55" not in text
    assert f"ns/{shown(payload())} serve-0" in text and f"{shown(payload())} node-b" in text
    assert f"{shown(payload())} H100" in text


def test_the_command_prints_a_hostile_trace_and_run_name_as_text_in_a_terminal(tmp_path: Path) -> None:
    """`analyze`, `runs`, `show`, `gate` and a user error, each in a pseudo-terminal."""
    trace, _ = payload_trace(tmp_path)
    home = tmp_path / "home"
    code, out = in_pty("analyze", str(trace), "--name", payload(), home=home, columns=4000)
    assert code == 0, out
    assert controls(out) == [] and b"\x1b]" not in out
    text = SGR.sub(b"", out).decode()
    assert f"{shown(payload())}  ·  1 x {shown(payload())} Tesla V100" in text  # run name, GPU name
    assert "top kernel: " + ANSI_SHOWN[:40] in text  # the kernel name, cut short
    run_id = re.search(r"trace run (\S+)", text)
    assert run_id is not None
    for args in (("runs",), ("show", run_id.group(1))):
        code, out = in_pty(*args, home=home)
        assert code == 0 and controls(out) == [] and b"\x1b]" not in out, args
        assert ANSI_SHOWN in SGR.sub(b"", out).decode(), args
    code, out = in_pty("show", ANSI, home=home)
    assert code == 2 and controls(out) == [] and out.startswith(b"gpuscope: error: no run with id"), out
    summary, junit = tmp_path / "summary.md", tmp_path / "gate.xml"
    code, out = in_pty("gate", run_id.group(1), "--baseline", run_id.group(1), "--junit", str(junit), home=home,
                       columns=4000,
                       GITHUB_STEP_SUMMARY=str(summary))
    assert code == 0 and controls(out) == [], out
    assert f"gpuscope gate: {shown(payload())} against {shown(payload())}" in SGR.sub(b"", out).decode()
    markdown = summary.read_text()
    assert "\x1b" not in markdown and re.search(r"(?<!\\)[<>\[\]]", markdown) is None  # every bracket escaped
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["candidate"] == props["baseline"] == shown(payload())
