"""MFU's FLOPs per step cover the steps its step time covers: a profiled CPU loop with one step that is slow (an
outlier, counted in ``facts.step_time_us`` like every steady step) and does more matrix work than the others. The
steps' FLOPs are counted by torch.utils.flop_counter.FlopCounterMode, which shares no code with gpuscope. The loop
runs on the CPU, so the same report is a CPU job: MFU n/a for that reason, with no GPU counted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from gpuscope.analyzers.efficiency.run import CPU_JOB_NOTE  # noqa: E402
from gpuscope.api.analysis import analyze_path  # noqa: E402

STEPS = 8
SLOW_STEP = 5
"""The 0-based active step that sleeps (the outlier) and multiplies a large matrix besides (more FLOPs)."""
SLEEP_S = 0.3


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))


def _loop(tmp_path: Path) -> tuple[Path, float, float]:
    """The trace of the loop, the FLOPs of one typical step and those of the slow one (FlopCounterMode)."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x, big = torch.randn(16, 64), torch.randn(256, 256)

    def step(slow: bool) -> None:
        model(x).sum().backward()
        if slow:
            torch.mm(big, big)
            time.sleep(SLEEP_S)

    step(False)  # lazy init out of both counts
    counts = []
    for slow in (False, True):
        counter = FlopCounterMode(display=False)
        with counter:
            step(slow)
        counts.append(float(counter.get_total_flops()))
    path = tmp_path / "loop.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for i in range(STEPS + 1):
            step(i - 1 == SLOW_STEP)
            prof.step()
    prof.export_chrome_trace(str(path))
    return path, counts[0], counts[1]


def test_flops_per_step_cover_every_steady_step_as_the_step_time_does(tmp_path: Path) -> None:
    path, typical, slow = _loop(tmp_path)
    assert slow > typical * 2  # the outlier does more work: it moves the FLOPs per step, as its time the step time
    report, _ = analyze_path(path, save=False)
    facts, eff = report.facts, report.efficiency
    assert facts is not None and eff is not None
    # The slow step (it slept) is in the step time: the mean of every steady step, whatever else a busy machine
    # made slow.
    steady = [s.duration_us for s in report.ranks[0].per_step if not s.warmup]
    assert max(steady) >= SLEEP_S * 1e6 and facts.step_time_us == pytest.approx(sum(steady) / len(steady), rel=1e-9)
    n = facts.steady_steps  # the loop's steady steps (a first one may be start-up): the slow one among them
    assert facts.model_flops_per_step == pytest.approx(((n - 1) * typical + slow) / n, rel=1e-9)
    assert eff.model_flops_per_step == facts.model_flops_per_step
    assert eff.step_time_us == facts.step_time_us
    # Every step's FLOPs are kept, the slow one's included, and add up to the rank's total over its steady steps.
    rank = report.ranks[0].efficiency
    assert rank is not None and len(rank.step_flops) == rank.steps
    assert sorted(f for _, f in rank.step_flops)[-1] == pytest.approx(slow, rel=1e-9)
    assert sum(f for _, f in rank.step_flops) == pytest.approx(rank.model_flops * rank.steps, rel=1e-9)


def test_a_cpu_job_has_no_mfu_and_no_gpu(tmp_path: Path) -> None:
    path, _, _ = _loop(tmp_path)
    report, _ = analyze_path(path, save=False)
    eff = report.efficiency
    assert report.cpu_job and eff is not None
    assert eff.mfu is None and eff.mfu_note == CPU_JOB_NOTE and eff.gpus == 0 and eff.peak_flops is None
    assert report.facts is not None and report.facts.mfu is None
    assert eff.model_flops_per_step is not None and eff.model_flops_per_step > 0  # the work is still counted
    assert not eff.inefficiencies and not any(r.code in ("fp32_gemm", "unaligned_gemm", "small_gemm")
                                              for r in report.recommendations)
