"""The HTML report's memory section: in a trace run's report where its trace recorded memory events, and as the
whole report of a snapshot's run; the peak, the largest allocations with their source lines, and names from the
recording as text."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

from typer.testing import CliRunner

from gpuscope.analyzers.memory import snapshot_memory
from gpuscope.cli.main import app as cli
from gpuscope.reports.html_memory import render_memory_html
from gpuscope.store import Store
from gpuscope.traces.snapshot import read_snapshot
from tests import memory_builders as mb
from tests import reference
from tests.conftest import SAMPLES

SNAPSHOT = SAMPLES / "memory_snapshots" / "cs336_medium_training_step.pickle.gz"


def _text(page: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_trace_runs_report_has_the_memory_section(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    trace = SAMPLES / "h200" / "pageable_h2d"
    result = CliRunner().invoke(cli, ["report", str(trace), "-o", str(out)], env={"GPUSCOPE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="memory-detail"' in page and 'id="memory-at-peak-0"' in page
    assert 'data-chart="memory-timeline-0"' in page and 'data-chart="memory-makeup-0"' in page
    peak = max(e["args"]["Total Allocated"] for e in reference.memory_events(next(trace.glob("*.json.gz")), (1,)))
    assert f"peak allocated {peak / 2**30:.1f} GiB" in _text(page)


def test_a_snapshot_runs_report_is_its_memory(tmp_path: Path) -> None:
    env = {"GPUSCOPE_HOME": str(tmp_path / "home")}
    assert CliRunner().invoke(cli, ["memory", str(SNAPSHOT)], env=env).exit_code == 0
    with Store(tmp_path / "home") as store:
        (meta,) = store.list_runs()
    out = tmp_path / "m.html"
    result = CliRunner().invoke(cli, ["report", meta.id, "-o", str(out)], env=env)
    assert result.exit_code == 0, result.output
    text = _text(out.read_text())
    expected = reference.snapshot_replay(reference.snapshot(SNAPSHOT))
    assert f"peak allocated {expected['peak'] / 2**30:.1f} GiB" in text
    assert "step (optimizer.py:80)" in text and "allocated before the recording began" in text


def test_names_from_the_snapshot_are_text_in_the_page(tmp_path: Path) -> None:
    evil = '<script>window.__owned=1</script><img src=x onerror="1">'
    doc = mb.snapshot([mb.segment(0, 8 * mb.MIB, [])], [[mb.action("alloc", 0, mb.MIB, 0,
                                                                    [mb.frame(evil, f"/w/{evil}.py", 3)])]])
    page = render_memory_html(snapshot_memory(read_snapshot(mb.write(tmp_path / "s.pickle", doc))))
    assert "<img" not in page and "window.__owned=1</script>" not in page
    assert "&lt;script&gt;window.__owned=1&lt;/script&gt;" in page
