"""Training or serving, from what the trace ran; serving advice for inference and never training-only advice."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from gpuscope.analyzers.diagnosis.rules.serving import TRAINING_ONLY
from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.pricing import resolve_price
from gpuscope.traces import load
from tests.conftest import SAMPLES

TRAINING_WORDS = ("learning rate", "optimizer", "gradient", "loss")


@cache
def report(path: str) -> Report:
    loaded = load(SAMPLES / path)
    return build_report(Run(meta=trace_run_meta(loaded.traces, name=path), traces=loaded.traces))


@pytest.mark.parametrize(("path", "expected"), [
    ("resnet50_dataloader_bound", "training"),  # Optimizer.step#SGD.step, autograd backward
    ("dlrm_8rank", "training"),
    ("dev/mi210_gpu_only.json.gz", "training"),  # GPU-only, but batch_norm_backward kernels
    ("dev/sampled_rank-0.json.gz", "training"),
    ("dev/h100_timesformer_inference.json.gz", "inference"),  # forward ops only
    ("dev/sglang_decode_cudagraph_bs32.json.gz", "inference"),  # SGLang's scheduler in the Python frames
    ("dev/vllm_decode_graph_capture.json.gz", "inference"),
])
def test_workload_is_read_from_what_ran(path: str, expected: str) -> None:
    assert {r.workload for r in report(path).ranks} == {expected}
    assert all(r.workload_evidence for r in report(path).ranks)


def test_inference_gets_serving_advice_and_no_training_advice() -> None:
    r = report("dev/h100_timesformer_inference.json.gz")
    codes = [x.code for x in r.recommendations]
    assert "dynamic_batching" in codes and "larger_batch" not in codes
    assert not set(codes) & TRAINING_ONLY
    for rec in r.recommendations:
        text = (rec.title + " " + rec.detail).lower()
        assert not any(w in text for w in TRAINING_WORDS), (rec.code, text)
    batching = next(x for x in r.recommendations if x.code == "dynamic_batching")
    assert all(server in batching.detail for server in ("Triton", "TorchServe", "vLLM", "SGLang"))
    # The findings point at the serving recommendation that replaced the training one.
    assert any("dynamic_batching" in f.recommendations for f in r.findings)


def test_an_idle_inference_gpu_is_offered_sharing_and_training_keeps_its_batch_advice() -> None:
    served = report("dev/event_sync_multi_stream.json.gz")
    assert served.ranks[0].workload == "inference"
    assert "share_gpu" in {x.code for x in served.recommendations}
    trained = report("h200/resnet50_workers12")  # every rank's peak memory known, 4% of the device
    codes = {x.code for x in trained.recommendations}
    assert "larger_batch" in codes and not codes & {"dynamic_batching", "share_gpu", "inference_compiler"}


def test_right_sizing_stays_with_the_gpu_vendor(tmp_path: Path) -> None:
    loaded = load(SAMPLES / "dev" / "h100_timesformer_inference.json.gz")
    meta = trace_run_meta(loaded.traces, name="h100")
    price = resolve_price(meta.gpus[0].name, home=tmp_path, env={})
    options = AnalysisOptions(price=price, capabilities=gpu_capabilities(tmp_path))
    r = build_report(Run(meta=meta, traces=loaded.traces), options)
    (right,) = [x for x in r.recommendations if x.code == "right_size"]
    assert "MI300X" not in right.title and "MI300X" not in right.detail  # an H100 job: NVIDIA GPUs only


def test_decode_gemv_kernels_get_weight_quantisation(tmp_path: Path) -> None:
    from tests import builders as b
    from tests.analyzers.test_trace_rules import analyse

    events: list[b.Event] = []
    for i in range(3):
        t = i * 10_000.0
        events.append(b.step(i, t, 10_000))
        events += [b.cpu_op("aten::mm", t + 10, 50), b.launch(t + 20, 5, 10 * i + 1),
                   b.kernel("void gemv2T_kernel_val<int, int, __nv_bfloat16, 128, 16, 4, 4>", t + 30, 6_000,
                            10 * i + 1),
                   b.launch(t + 40, 5, 10 * i + 2), b.kernel("sm90_xmma_gemm_bf16bf16", t + 6_040, 3_500, 10 * i + 2)]
    r = analyse(tmp_path, events)
    assert r.ranks[0].workload == "inference" and r.verdict.primary == "gpu_compute"
    (q,) = [x for x in r.recommendations if x.code == "quantize_weights"]
    assert q.est_step_saving is not None and 0.2 < q.est_step_saving < 0.35  # ~95% compute x 63% GEMV x 0.5


def test_the_cost_per_1000_requests_of_a_served_model(tmp_path: Path) -> None:
    import json

    from tests.cli.helpers import gpuscope

    path = str(SAMPLES / "dev" / "h100_timesformer_inference.json.gz")
    result = gpuscope("analyze", path, "--no-save", "--samples-per-step", "8", home=tmp_path)
    assert result.returncode == 0 and "per 1,000 requests" in result.stdout
    cost = json.loads(gpuscope("analyze", path, "--no-save", "--json", "--samples-per-step", "8",
                               home=tmp_path).stdout)["cost"]
    assert cost["per_1k_samples_usd"] == pytest.approx(cost["per_step_usd"] / 8 * 1000)
