"""Activation checkpointing: model FLOPs (PaLM's MFU numerator) count the forward once; hardware FLOPs add the forward
re-run in backward. Small CPU models profiled with torch.utils.checkpoint (non-reentrant and reentrant, with and
without Python stacks) against torch.utils.flop_counter.FlopCounterMode, which shares no code with gpuscope: the
same step without checkpointing gives the model FLOPs, with checkpointing the hardware FLOPs (it counts the re-run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from gpuscope.analyzers.efficiency.count import count_rank  # noqa: E402
from gpuscope.analyzers.trace.startup import plan_steps  # noqa: E402
from gpuscope.model.efficiency import RankEfficiency  # noqa: E402
from gpuscope.traces.kineto import read_trace  # noqa: E402

STEPS = 3


def _model() -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 64), torch.nn.ReLU())
    head = torch.nn.Linear(64, 8)
    return block, head, torch.randn(16, 64)


def _step(block: torch.nn.Module, head: torch.nn.Module, x: torch.Tensor, mode: str | None, *,
          input_grad: bool = False) -> Callable[[], None]:
    """One training step; reentrant checkpointing needs an input that requires grad (``input_grad``: so does the
    reference step without checkpointing, to do the same work)."""
    def step() -> None:
        h = x.clone().requires_grad_(input_grad)
        y = block(h) if mode is None else checkpoint(block, h, use_reentrant=mode == "reentrant")
        head(y).sum().backward()
    return step


def _flops(step: Callable[[], None]) -> float:
    step()
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return float(counter.get_total_flops())


def _counted(step: Callable[[], None], path: Path, *, with_stack: bool) -> RankEfficiency:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=with_stack,
                 schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for _ in range(STEPS + 1):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))
    trace = read_trace(path)
    return count_rank(trace, plan_steps(trace))


@pytest.mark.parametrize(("mode", "with_stack"), [("non-reentrant", True), ("non-reentrant", False),
                                                  ("reentrant", True), ("reentrant", False)])
def test_a_forward_re_run_for_a_checkpoint_is_hardware_flops_only(mode: str, with_stack: bool,
                                                                   tmp_path: Path) -> None:
    block, head, x = _model()
    grad = mode == "reentrant"
    model = _flops(_step(block, head, x, None, input_grad=grad))
    hardware = _flops(_step(block, head, x, mode, input_grad=grad))
    assert hardware > model  # the re-run forward: the block's two Linear layers once more
    counted = _counted(_step(block, head, x, mode, input_grad=grad), tmp_path / "trace.json", with_stack=with_stack)
    assert counted.model_flops == pytest.approx(model, rel=1e-9)
    assert counted.model_flops + counted.recomputed_flops == pytest.approx(hardware, rel=1e-9)
    # Each step's own calls: the same work in every step.
    assert [f for _, f in counted.step_flops] == pytest.approx([model] * len(counted.step_flops), rel=1e-9)
    assert [f for _, f in counted.step_recomputed_flops] == pytest.approx([hardware - model] * counted.steps,
                                                                          rel=1e-9)


def test_without_checkpointing_nothing_is_recomputed(tmp_path: Path) -> None:
    block, head, x = _model()
    counted = _counted(_step(block, head, x, None), tmp_path / "trace.json", with_stack=True)
    assert counted.recomputed_flops == 0.0
    assert counted.model_flops == pytest.approx(_flops(_step(block, head, x, None)), rel=1e-9)
