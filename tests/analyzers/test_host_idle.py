"""Where the host is while the GPU waits (``ranks[].host_in_gpu_idle``) and the advice that names it when no other
host change applies. Traces built by hand; the figures are known by construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.report import build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests import builders as b

STEPS = 4


def shampoo_steps() -> list[b.Event]:
    """Steps of 1000 µs: a 200 µs kernel, then the GPU idle while the host runs Shampoo's step (300 to 800 µs), in
    which an aten::mul (400 to 500 µs) runs twice nested in itself (a name counts once where it nests)."""
    events: list[b.Event] = []
    for i in range(STEPS):
        t = i * 1000.0
        events += [b.step(i, t, 1000), b.cpu_op("aten::mm", t, 20, ext=100 + i),
                   b.launch(t + 5, 5, 10 + i, ext=100 + i), b.kernel("sm80_xmma_gemm_f32f32", t + 10, 190, 10 + i,
                                                                     ext=100 + i),
                   b.cpu_op("Optimizer.step#Shampoo.step", t + 300, 500, cat="user_annotation"),
                   b.cpu_op("aten::mul", t + 400, 100), b.cpu_op("aten::mul", t + 420, 50)]
    return events


def analyse(tmp_path: Path, events: list[b.Event]) -> Report:
    loaded = load(b.write(tmp_path / "t.json", b.trace(events)))
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces))


def test_the_host_ranges_covering_the_gpus_idle_time(tmp_path: Path) -> None:
    rank = analyse(tmp_path, shampoo_steps()).ranks[0]
    # GPU idle: 810 µs of each step (the kernel runs 10 to 200 µs); aten::mm (0 to 20 µs) covers its first 10.
    got = [(w.name, w.idle_us, w.share) for w in rank.host_in_gpu_idle]
    assert got == [("Optimizer.step#Shampoo.step", pytest.approx(STEPS * 500), pytest.approx(500 / 810)),
                   ("aten::mul", pytest.approx(STEPS * 100), pytest.approx(100 / 810)),
                   ("aten::mm", pytest.approx(STEPS * 10), pytest.approx(10 / 810))]


def test_host_overhead_with_no_other_change_gets_the_range_it_waits_in(tmp_path: Path) -> None:
    r = analyse(tmp_path, shampoo_steps())
    assert r.verdict.primary == "host_overhead"
    (hot,) = [x for x in r.recommendations if x.stage == "host_overhead"]
    assert hot.code == "host_hotspot" and hot.est_step_saving is None
    assert hot.title == "Speed up the host work the GPU waits for: Optimizer.step#Shampoo.step"
    assert "Optimizer.step#Shampoo.step 62%" in hot.detail and "Shampoo has no fused or multi-tensor" in hot.detail
    (wait,) = [f for f in r.findings if f.code == "host_wait_idle"]
    assert "mostly inside Optimizer.step#Shampoo.step (62% of the GPU's idle time)" in wait.title
    assert "host_hotspot" in wait.recommendations
