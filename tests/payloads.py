"""Hostile strings for the escaping tests, a real trace that carries them, and the checks of what a terminal got.

Each payload would be code in some view if a view took it as anything but text: HTML that runs a script or sends
a request, a Markdown or HTML link, a template expression, rich markup, or ANSI/OSC escape sequences that retitle
the window, clear the screen or print a hyperlink. Scripts that would run set ``window.__pwned``; requests that
would leave go to ``leak`` (a listener the browser tests watch).
"""

from __future__ import annotations

import dataclasses
import fcntl
import gzip
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import types
import typing
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from gpuscope.model.diagnosis import Finding
from gpuscope.model.live import StackLive
from gpuscope.model.rank import FillingCall
from gpuscope.model.report import GpuSummary, Report
from tests.conftest import SAMPLES

NO_LEAK = "http://127.0.0.1:9/leak"
"""Where the payloads send requests when a test does not listen (port 9: nothing answers)."""

ANSI = ("\x1b]0;pwned title\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example/\x1b\\hyperlink\x1b]8;;\x1b\\"
        "\x9b31mC1\x1b[5mblink\x07\x08\x7f\u202eevil\u202c")
"""Retitle the window, clear the screen, a hyperlink (OSC 8), a C1 CSI, blink, bell, backspace, DEL, a bidi
override."""
ANSI_SHOWN = (r"\x1b]0;pwned title\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example/\x1b\hyperlink\x1b]8;;"
              r"\x1b\\x9b31mC1\x1b[5mblink\x07\x08\x7f\u202eevil\u202c")
"""``ANSI`` as every view shows it, written out by hand: each control character as a visible escape."""
RICH = "[link=https://evil.example/]click[/link] [bold red]B[/] :skull:"
TEMPLATE = "{{7*7}} ${7*7} {% raw %}#{7*7}"


def payloads(leak: str = NO_LEAK) -> dict[str, str]:
    """Every payload by kind; ``leak`` is where a request would go if a payload ran."""
    return {
        "ansi": ANSI,
        "rich": RICH,
        "template": TEMPLATE,
        "script": f"<script>window.__pwned='script';fetch('{leak}?script')</script>",
        "onerror": f'"><img src="{leak}?img" onerror="window.__pwned=\'onerror\'">',
        "javascript": "[md](javascript:window.__pwned='md') <a href=\"javascript:window.__pwned='a'\">a</a>",
        "svg": f"<svg onload=\"window.__pwned='svg'\"></svg><iframe src=\"{leak}?iframe\"></iframe>",
        "style": f"<style>body{{background:url('{leak}?css')}}</style>",
    }


def payload(leak: str = NO_LEAK) -> str:
    """All the payloads in one string."""
    return " ".join(payloads(leak).values())


def shown(text: str) -> str:
    """A string holding ``payload()`` as a view shows it (``ANSI`` written as ``ANSI_SHOWN``)."""
    return text.replace(ANSI, ANSI_SHOWN)


class ParsedHtml(HTMLParser):
    """Tags, attribute names and text of an HTML fragment, as a browser would parse it (``feed`` it the fragment)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def payload_trace(folder: Path, leak: str = NO_LEAK) -> tuple[Path, str]:
    """The bundled resnet50 trace with its longest-running kernel and its GPUs renamed to carry every payload;
    the file and the new kernel name."""
    source = next((SAMPLES / "resnet50_dataloader_bound").glob("*.json.gz"))
    with gzip.open(source, "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    total_us: Counter[str] = Counter()
    for event in doc["traceEvents"]:
        if event.get("cat") == "Kernel":
            total_us[event["name"]] += event.get("dur", 0)
    top = total_us.most_common(1)[0][0]
    name = f"{payload(leak)} {top}"
    for event in doc["traceEvents"]:
        if event.get("name") == top:
            event["name"] = name
    for device in doc.get("deviceProperties", []):
        device["name"] = f"{payload(leak)} Tesla V100"
    path = folder / "payload.pt.trace.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path, name


SGR = re.compile(rb"\x1b\[[0-9;]*m")
"""Select Graphic Rendition: the colours and weights rich writes itself, the only escape a view may send."""
CONTROL = re.compile(rb"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]"
                     rb"|\xe2\x81[\xa6-\xa9]")
"""A control byte but the line ends; in UTF-8, a C1 control, a bidi mark, override, embedding or isolate, or a line
or paragraph separator."""


def controls(output: bytes) -> list[bytes]:
    """What of ``output`` could steer a terminal, once rich's own colours are taken out (a pty ends lines
    with CR LF)."""
    return CONTROL.findall(SGR.sub(b"", output).replace(b"\r\n", b"\n"))


def in_pty(*args: str, home: Path, columns: int = 400, timeout_s: float = 120, **env: str) -> tuple[int, bytes]:
    """`gpuscope ARGS` with a pseudo-terminal as stdin, stdout and stderr, as a user at a terminal runs it
    (``env`` added to the environment): its exit code and every byte it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, columns, 0, 0))
    full_env = {**os.environ, "GPUSCOPE_HOME": str(home), "TERM": "xterm-256color", **env}
    for name in ("NO_COLOR", "COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE"):
        full_env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=full_env, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's side is closed
                break
            if not chunk:
                break
            out += chunk
        return proc.wait(timeout=max(deadline - time.monotonic(), 1)), bytes(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def tainted(value: Any, text: str) -> Any:
    """A copy of a frozen dataclass tree with ``text`` put before every free-text string in it: each field typed
    ``str``, ``str | None`` or ``tuple[str, ...]``, and the string values of a ``dict`` whose values may be free text
    (evidence). Fields and dict values typed ``Literal`` keep their value (a report read back from the store could not
    hold anything else there)."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    hints = typing.get_type_hints(type(value))
    changes = {}
    for f in dataclasses.fields(value):
        changes[f.name] = _tainted_field(getattr(value, f.name), hints[f.name], text)
    return dataclasses.replace(value, **changes)


def _tainted_field(value: Any, hint: Any, text: str) -> Any:
    free_text = hint is str or (typing.get_origin(hint) in (types.UnionType, typing.Union)
                                and str in typing.get_args(hint))
    if isinstance(value, str):
        return f"{text} {value}" if free_text else value
    if isinstance(value, tuple):
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return tuple(_tainted_field(v, item, text) for v in value)
    if isinstance(value, dict):
        args = typing.get_args(hint)
        item = args[1] if len(args) == 2 else str
        free = item is str or (typing.get_origin(item) in (types.UnionType, typing.Union)
                               and str in typing.get_args(item))
        return {k: f"{text} {v}" if isinstance(v, str) and free else v for k, v in value.items()}
    return tainted(value, text)


def hostile_report(text: str) -> Report:
    """A report with every part a view shows filled (two ranks with kernels and devices, findings with string
    evidence, recommendations, cost with a note, a live summary with GPUs, host and a stack, warnings, GPUs) and
    ``text`` before each of its free-text strings."""
    from tests.figures.fixtures import full_report

    base = full_report()
    live = base.live
    assert live is not None
    ranks = tuple(dataclasses.replace(r, device="Tesla V100-DGXS-32GB", workload="training",
                                      workload_evidence="Optimizer.step#SGD.step", step_source="range my_iteration",
                                      filling_call=FillingCall(name="cudaMemcpy", duration_us=900.0, share=0.9,
                                                               gpu_busy=0.0)) for r in base.ranks)
    report = dataclasses.replace(
        base, ranks=ranks, warnings=("rank 1: 12 events without a duration were left out",),
        run=dataclasses.replace(base.run, gpus=(GpuSummary(model="Tesla V100-DGXS-32GB", memory_bytes=32 * 2**30),)),
        findings=(Finding(code="dataloader_share_high", severity="critical", title="The GPU waits for input",
                          evidence={"dataloader_share": 0.5, "optimizer": "SGD"}, time_share=0.5, rank=1),),
        cost=dataclasses.replace(base.cost, note="no price for this GPU", energy_source="nvml_energy_counter")
        if base.cost is not None else None,
        live=dataclasses.replace(live, sources=("nvml", "py-spy"), gpus=(dataclasses.replace(
            live.gpus[0], throttle_reasons=("sw_power_cap",)),),
            stacks=StackLive(samples=100, main_samples=100, main_dataloader_wait=0.6, main_python=0.4,
                             top_stack=("<module> (train.py:1)", "train (train.py:40)", "wait (queue.py:180)"))))
    result: Report = tainted(report, text)
    return result
