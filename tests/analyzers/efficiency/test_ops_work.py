"""FLOPs per operator (`gpuscope ops`) against torch.utils.flop_counter.FlopCounterMode's own count per aten op, the
type autocast ran the work in, and the roofline figures against the V100's datasheet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from gpuscope.analyzers.efficiency.count import count_rank  # noqa: E402
from gpuscope.analyzers.efficiency.opwork import op_work  # noqa: E402
from gpuscope.analyzers.trace.ops import operator_table  # noqa: E402
from gpuscope.analyzers.trace.optree import call_tree  # noqa: E402
from gpuscope.analyzers.trace.startup import plan_steps  # noqa: E402
from gpuscope.model.trace import RankTrace  # noqa: E402
from gpuscope.specs import spec_for  # noqa: E402
from gpuscope.traces import load  # noqa: E402
from gpuscope.traces.kineto import read_trace  # noqa: E402
from tests.conftest import SAMPLES  # noqa: E402

STEPS = 3
V100_FP32_TFLOPS = 15.7
V100_TB_S = 0.9
"""NVIDIA's V100 datasheet (SXM2): 15.7 TFLOP/s fp32, 900 GB/s HBM2."""


def _profiled(step: Callable[[], None], path: Path) -> RankTrace:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for _ in range(STEPS + 1):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))
    return read_trace(path)


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)), \
        torch.randn(16, 64)


def test_each_operators_flops_are_flop_counter_modes_for_that_op(tmp_path: Path) -> None:
    model, x = _mlp()

    def step() -> None:
        model(x).sum().backward()

    step()
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    per_op = {str(op).removeprefix("aten."): n for op, n in counter.get_flop_counts()["Global"].items()}
    trace = _profiled(step, tmp_path / "mlp.json")
    work = op_work(trace, call_tree(trace), None)
    assert per_op["addmm"] > 0 and per_op["mm"] > 0
    assert work["aten::addmm"].flops == STEPS * per_op["addmm"]  # the forward products
    assert work["aten::mm"].flops == STEPS * per_op["mm"]  # the backward's
    # aten::linear is modelled at its own inputs: the same work as the addmm inside it.
    assert work["aten::linear"].flops == work["aten::addmm"].flops
    assert work["aten::addmm"].dtype == "fp32" and work["aten::addmm"].roofline_share is None  # no GPU, no spec


def test_work_under_autocast_counts_in_the_autocast_type(tmp_path: Path) -> None:
    model, x = _mlp()

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        out.float().sum().backward()

    step()
    trace = _profiled(step, tmp_path / "autocast.json")
    counted = count_rank(trace, plan_steps(trace))
    # Recorded under bf16 autocast: the outer aten::linear takes fp32 inputs, the work ran in bf16.
    assert counted.model_flops > 0 and dict(counted.flops_by_dtype) == {"bf16": counted.model_flops}
    assert all(g.kind != "fp32" for g in counted.gemms)
    assert op_work(trace, call_tree(trace), None)["aten::linear"].dtype == "bf16"


def test_the_bf16_transformer_sample_is_counted_as_bf16_and_gets_no_fp32_advice() -> None:
    # sample_traces/h200/record.py ran this model under torch.autocast("cuda", dtype=torch.bfloat16).
    trace = load(SAMPLES / "h200" / "transformer_bf16").traces[0]
    counted = count_rank(trace, plan_steps(trace))
    assert [d for d, _ in counted.flops_by_dtype] == ["bf16"]
    assert all(g.kind != "fp32" for g in counted.gemms)


def test_resnet50_operators_against_the_v100_roofline() -> None:
    trace = load(SAMPLES / "resnet50_dataloader_bound").traces[0]
    tree = call_tree(trace)
    table = {o.name: o for o in operator_table(trace, tree=tree).ops}
    spec = spec_for(trace.gpus[0].name)
    assert spec is not None and spec.model.startswith("V100")
    work = op_work(trace, tree, spec)
    for name in ("aten::conv2d", "aten::cudnn_convolution_backward", "aten::addmm"):
        w, op = work[name], table[name]
        # Every call counted: the GPU time is the operator table's GPU total, to the microsecond.
        assert w.calls == op.calls and w.gpu_us == pytest.approx(op.gpu_total_us)
        assert w.achieved_tflops == pytest.approx(w.flops / (w.gpu_us / 1e6) / 1e12)
        assert w.intensity == pytest.approx(w.flops / w.bytes)
        ceiling = min(V100_FP32_TFLOPS, w.intensity * V100_TB_S)
        assert w.dtype == "fp32" and w.roofline_tflops == pytest.approx(ceiling)
        assert w.roofline_share == pytest.approx(w.achieved_tflops / ceiling)
    # Ops that do no counted work are not listed; a module's autograd node sums the ops inside it.
    assert "aten::empty" not in work and "aten::t" not in work
    assert work["CudnnConvolutionBackward"].flops == work["aten::cudnn_convolution_backward"].flops


@pytest.mark.parametrize("sample", ["transformer_bf16", "resnet50_workers0"])
def test_under_autocast_the_model_flops_land_on_the_matrix_kernels_not_the_casts(sample: str) -> None:
    # Both ran under bf16 autocast (sample_traces/h200/record.py): each aten::linear also launches elementwise casts.
    trace = load(SAMPLES / "h200" / sample).traces[0]
    counted = count_rank(trace, plan_steps(trace))
    families = {f.family: f for f in counted.families}
    matrix = sum(f.flops for name, f in families.items() if name in ("gemm", "convolution", "attention"))
    assert matrix == pytest.approx(counted.model_flops, rel=1e-9)
    # An elementwise kernel does about one FLOP per element it reads and writes: well under one FLOP a byte.
    assert families["elementwise"].flops / families["elementwise"].bytes < 1
