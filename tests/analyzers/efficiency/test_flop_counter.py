"""Model FLOPs counted from a profiler trace's recorded shapes against torch.utils.flop_counter.FlopCounterMode,
which counts the same steps from the dispatcher and shares no code with gpuscope: small CPU models, profiled with
``record_shapes=True``, forward and backward."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from gpuscope.analyzers.efficiency.count import count_rank  # noqa: E402
from gpuscope.analyzers.trace.startup import plan_steps  # noqa: E402
from gpuscope.traces.kineto import read_trace  # noqa: E402

STEPS = 3


def _mlp() -> tuple[Callable[[], None], Callable[[], None]]:
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x = torch.randn(16, 64)
    return (lambda: model(x).sum().backward()), (lambda: None)


def _convnet(groups: int = 1) -> tuple[Callable[[], None], Callable[[], None]]:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 5, padding=2, groups=groups), torch.nn.ReLU(), torch.nn.Conv2d(32, 8, 1, bias=False),
        torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 5))
    x = torch.randn(4, 3, 16, 16)
    return (lambda: model(x).sum().backward()), (lambda: None)


def _attention_block() -> tuple[Callable[[], None], Callable[[], None]]:
    q, k, v = (torch.randn(2, 4, 32, 16) for _ in range(3))
    w = torch.randn(16, 16)

    def step() -> None:
        scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0
        out = torch.matmul(scores.softmax(-1), v)
        torch.bmm(out.reshape(8, 32, 16), w.expand(8, 16, 16))
        torch.addmm(torch.zeros(16), out.reshape(-1, 16), w)
    return step, (lambda: None)


def _inference_conv() -> tuple[Callable[[], None], Callable[[], None]]:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.Conv1d(8, 8, 1)
                                if False else torch.nn.Conv2d(8, 4, 3, padding=1, dilation=1))
    x = torch.randn(2, 3, 15, 15)

    def step() -> None:
        with torch.no_grad():
            model(x)
    return step, (lambda: None)


def _traced_flops(step: Callable[[], None], path: Path) -> float:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for _ in range(STEPS + 1):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))
    trace = read_trace(path)
    counted = count_rank(trace, plan_steps(trace))
    # A first step whose first calls ran far slower than the later ones (a CPU convolution's first primitives) is
    # start-up, left out of the steady steps; the FLOPs are per step whatever the count.
    assert 1 <= counted.steps <= STEPS
    return counted.model_flops


@pytest.mark.parametrize("make", [_mlp, _convnet, _attention_block, _inference_conv],
                         ids=["mlp-train", "convnet-train", "matmuls", "conv-inference"])
def test_model_flops_per_step_match_flop_counter_mode(make: Callable[[], tuple[Callable[[], None], Callable[[], None]]],
                                                      tmp_path: Path) -> None:
    step, _ = make()
    step()  # lazy init out of both counts
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    expected = counter.get_total_flops()
    assert expected > 0
    assert _traced_flops(step, tmp_path / "trace.json") == pytest.approx(expected, rel=1e-9)


def test_grouped_convolution_backward_is_counted_by_its_real_work(tmp_path: Path) -> None:
    """FlopCounterMode counts a grouped convolution's weight gradient as if it were not grouped (``groups`` times
    too much); the work is the forward's. Counted by hand: conv1 out [4,16,8,8] w [16,3,3,3]; conv2 out [4,32,8,8]
    w [32,4,5,5]; conv3 out [4,8,8,8] w [8,32,1,1]; linear 4x512x5. Backward: conv1 weight only (its input needs no
    gradient), conv3 input and weight, conv2 input, weight; the linear's two products."""
    step, _ = _convnet(groups=4)
    step()
    conv1, conv2, conv3 = 2 * 4 * 16 * 64 * 27, 2 * 4 * 32 * 64 * 100, 2 * 4 * 8 * 64 * 32
    linear = 2 * 4 * 512 * 5
    expected = (conv1 + conv2 + conv3 + linear) + (conv1 + 2 * conv2 + 2 * conv3 + 2 * linear)
    assert _traced_flops(step, tmp_path / "trace.json") == expected
